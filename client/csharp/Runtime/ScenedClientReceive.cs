using System;
using System.Collections.Generic;
using System.Text;
using Newtonsoft.Json.Linq;

namespace Scened
{
    /// <summary>What a client does with the lines it reads, in Poll: answers (MOVED followed),
    /// frames into their subscriptions' mirrors, the other events, and connections that closed.</summary>
    public sealed partial class ScenedClient
    {
        /// <summary>For the tests and the benchmark: sees every line as it is read.</summary>
        internal Action<byte[], int, int> LineTap;

        /// <summary>For the tests and the benchmark: handles a line as if s's connection had read it.</summary>
        internal void FeedLine(Subscription s, byte[] b, int off, int len)
        {
            ((LineSplitter.IHandler)this).Line(s.Conn, b, off, len);
        }

        /// <summary>For the tests: whether bytes or a close are waiting for Poll.</summary>
        internal bool Arrived { get { return inbound.Waiting; } }

        void LineSplitter.IHandler.Line(Connection conn, byte[] b, int off, int len)
        {
            if (disposed || conn.Gone)
                return;
            handled++;
            if (LineTap != null)
                LineTap(b, off, len);
            if (IsOk(b, off, len))
            {
                Answer(conn, null);
                return;
            }
            if (FrameReader.LooksLikeEvent(b, off, len))
            {
                EventLine e;
                if (FrameReader.Scan(b, off, len, out e) && !e.Ok && e.IsFrame)
                {
                    Frame(conn, b, off, len, ref e);
                    return;
                }
            }
            JObject o = Json.Parse(Encoding.UTF8.GetString(b, off, len));
            if (o == null)
                return; // not JSON: nothing the protocol sends
            if (o["ok"] != null)
                Answer(conn, o);
            else if (o["event"] != null)
                Event(conn, o);
        }

        private static readonly byte[] OkLine = Encoding.ASCII.GetBytes("{\"ok\":true}");

        /// <summary>Whether the line is the most common answer, read without a parser.</summary>
        private static bool IsOk(byte[] b, int off, int len)
        {
            if (len != OkLine.Length)
                return false;
            for (int i = 0; i < len; i++)
                if (b[off + i] != OkLine[i])
                    return false;
            return true;
        }

        /// <summary>An answer; o null: <c>{"ok":true}</c>, made a JObject only for a call that returns one.</summary>
        private void Answer(Connection conn, JObject o)
        {
            if (conn.Awaiting.Count == 0)
                return; // an answer to no request: a connection refused over --max-clients
            PendingCall c = conn.Awaiting.Dequeue();
            if (o == null)
            {
                Answered(c, conn, c.Kind == PendingCall.Kinds.SetMatrix ? null : new JObject { { "ok", true } });
                return;
            }
            JToken ok = o["ok"];
            if (ok.Type == JTokenType.Boolean && (bool)ok)
            {
                Answered(c, conn, o);
                return;
            }
            ScenedException err = ScenedException.FromResponse(o);
            JObject eo = o["error"] as JObject;
            string addr = eo != null && eo["addr"] != null && eo["addr"].Type == JTokenType.String ? (string)eo["addr"] : null;
            if (err.Code == "MOVED" && c.World != null && addr != null && c.Hops < MaxHops && addr != conn.Addr)
            {
                owners[c.World] = addr;
                c.Hops++;
                Issue(c, ConnectionTo(addr), false);
                return;
            }
            if (c.Kind == PendingCall.Kinds.Unsubscribe && err.Code == "NOT_FOUND")
            {
                Finish(c, o, null); // it had ended already
                return;
            }
            if (c.Kind == PendingCall.Kinds.Resubscribe)
                c.Sub.End("moved", false, err);
            Finish(c, null, err);
        }

        /// <summary>An ok answer: what it makes (a subscription, a new grid) is made now, before the
        /// lines after it are read.</summary>
        private void Answered(PendingCall c, Connection conn, JObject o)
        {
            switch (c.Kind)
            {
                case PendingCall.Kinds.Subscribe:
                case PendingCall.Kinds.Resubscribe:
                    {
                        Subscription s = c.Sub;
                        long id = o != null && o["sub"] != null ? (long)o["sub"] : 0;
                        if (c.Kind == PendingCall.Kinds.Resubscribe && !s.IsActive)
                        {
                            // unsubscribed while it was being made again
                            Issue(new PendingCall { Kind = PendingCall.Kinds.Unsubscribe, Cmd = "unsubscribe",
                                                    Fields = new JObject { { "sub", id } } }, conn, true);
                            break;
                        }
                        s.Id = id;
                        s.Conn = conn;
                        conn.Subs[id] = s;
                        break;
                    }
                case PendingCall.Kinds.Update:
                    {
                        // what the subscription is now, for making it again after a move
                        foreach (KeyValuePair<string, JToken> f in c.Fields)
                        {
                            if (f.Key == "sub")
                                continue;
                            if (f.Value.Type == JTokenType.Null)
                                c.Sub.Request.Remove(f.Key);
                            else
                                c.Sub.Request[f.Key] = f.Value.DeepClone();
                        }
                        JObject p = c.Fields["packed"] as JObject;
                        PackedState ps = c.Sub.Packed;
                        if (p != null && ps != null)
                        {
                            PackedState grid = PackedOf(p);
                            if (grid == null || !ps.SetGrid(grid.Step, grid.OriginX, grid.OriginY, grid.OriginZ))
                                BadFrame(c.Sub, "a packed grid this client cannot take");
                        }
                        break;
                    }
            }
            Finish(c, o, null);
        }

        private void Finish(PendingCall c, JObject result, Exception error)
        {
            c.Result = result;
            c.Error = error;
            c.Done = true;
            CompleteReady();
        }

        /// <summary>Completes the calls at the front of the order that are done; their continuations
        /// run here.</summary>
        private void CompleteReady()
        {
            while (order.Count > 0 && order.Peek().Done)
            {
                PendingCall c = order.Dequeue();
                if (c.SubTask != null)
                {
                    if (c.Error != null)
                        c.SubTask.TrySetException(c.Error);
                    else
                        c.SubTask.TrySetResult(c.Sub);
                }
                else if (c.Error != null)
                {
                    c.Task.TrySetException(c.Error);
                }
                else
                {
                    c.Task.TrySetResult(c.Result);
                }
            }
        }

        private void Frame(Connection conn, byte[] b, int off, int len, ref EventLine e)
        {
            Subscription s;
            if (!e.HasSub || !conn.Subs.TryGetValue(e.Sub, out s))
                return; // a subscription that ended here, or one not made through SubscribeAsync
            int end = off + len;
            stage.Reset();
            string err;
            if (e.Packed >= 0)
            {
                int n;
                if (s.Packed == null)
                    err = "a packed frame of a subscription whose grid this client does not know";
                else if ((n = FrameReader.PackedPayload(b, ref e, stage)) < 0)
                    err = "\"packed\" is not base64";
                else if (!s.Packed.Decode(stage.Bytes, n, e.Full, stage))
                    err = "packed payload refused at byte " + s.Packed.ErrorAt + " of " + n + ": " + s.Packed.Error;
                else
                    err = null;
            }
            else if (e.Ms >= 0 && e.Ids >= 0)
            {
                err = FrameReader.ReadB64(b, end, ref e, stage) ?? FrameReader.ReadRemoved(b, end, ref e, stage);
            }
            else if (e.Set >= 0)
            {
                err = FrameReader.ReadSet(b, end, ref e, stage) ?? FrameReader.ReadRemoved(b, end, ref e, stage);
            }
            else
            {
                err = "a frame without \"set\", \"ids\" and \"ms\", or \"packed\"";
            }
            if (err != null)
            {
                BadFrame(s, err);
                return;
            }
            s.Apply(stage, e.Full, e.Tick);
        }

        /// <summary>A frame this client cannot read: the subscription ends (its mirror keeps the last
        /// good frame) and the daemon is told, since the deltas after it could not be read either.</summary>
        private void BadFrame(Subscription s, string why)
        {
            Connection conn = s.Conn;
            long id = s.Id;
            if (s.Packed != null)
                s.Packed.Clear();
            if (!s.End("bad_frame", false, new ScenedException("BAD_FRAME", "subscription " + id + ": " + why)))
                return;
            if (conn != null && !conn.Gone)
                Issue(new PendingCall { Kind = PendingCall.Kinds.Unsubscribe, Cmd = "unsubscribe",
                                        Fields = new JObject { { "sub", id } } }, conn, true);
        }

        private void Event(Connection conn, JObject o)
        {
            JToken subToken = o["sub"];
            Subscription s = null;
            if (subToken == null || subToken.Type != JTokenType.Integer || !conn.Subs.TryGetValue((long)subToken, out s))
            {
                Action<JObject> h = EventReceived;
                if (h != null)
                    RaiseEvent(h, o);
                return;
            }
            string ev = (string)o["event"];
            if (ev == "unsubscribed")
            {
                string reason = (string)o["reason"] ?? "unsubscribed";
                s.End(reason, reason == "root_destroyed" || reason == "center_destroyed", null);
            }
            else if (ev == "world_destroyed")
            {
                s.End("world_destroyed", true, null);
            }
            else if (ev == "moved")
            {
                Moved(conn, s, o);
            }
            else if (ev == "frame")
            {
                BadFrame(s, "a frame line this client cannot read");
            }
            else
            {
                Action<JObject> h = EventReceived;
                if (h != null)
                    RaiseEvent(h, o);
            }
        }

        /// <summary>The world moved to another daemon: the subscription is made again there, with the
        /// same fields; its mirror stays until the new subscription's full frame replaces it.</summary>
        private void Moved(Connection conn, Subscription s, JObject o)
        {
            JToken a = o["addr"];
            conn.Subs.Remove(s.Id);
            if (a == null || a.Type != JTokenType.String)
            {
                s.End("moved", false, new ScenedException("MOVED", "the world moved, to no address given"));
                return;
            }
            string addr = (string)a;
            owners[s.World] = addr;
            s.Conn = null;
            if (s.Packed != null)
                s.Packed.Clear(); // the new subscription's first frame is full
            Issue(new PendingCall { Kind = PendingCall.Kinds.Resubscribe, Cmd = "subscribe", Fields = s.Request,
                                    World = s.World, Sub = s }, ConnectionTo(addr), true);
        }

        private void ConnectionClosed(Connection conn, Exception e)
        {
            if (conn.Gone)
                return;
            string why = e == null ? conn.Addr + " closed the connection" :
                e is ScenedException ? e.Message : "the connection to " + conn.Addr + " failed: " + e.Message;
            ScenedException err = e as ScenedException ?? new ScenedException("CLOSED", why, null, e);
            conn.Close();
            FailConnection(conn, err);
            string key = null;
            foreach (KeyValuePair<string, Connection> kv in conns)
                if (kv.Value == conn)
                    key = kv.Key;
            if (key != null && conn != primary)
                conns.Remove(key);
        }

        private void FailConnection(Connection conn, ScenedException err)
        {
            conn.Gone = true;
            while (conn.Awaiting.Count > 0)
            {
                PendingCall c = conn.Awaiting.Dequeue();
                if (c.Kind == PendingCall.Kinds.Resubscribe)
                    c.Sub.End("moved", false, err);
                Finish(c, null, err);
            }
            List<Subscription> subs = new List<Subscription>(conn.Subs.Values);
            foreach (Subscription s in subs)
                s.End("closed", false, err);
        }
    }
}

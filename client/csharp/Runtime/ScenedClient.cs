using System;
using System.Collections.Generic;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;

namespace Scened
{
    /// <summary>A client of scened (PROTOCOL.md): calls, pipelined, and subscriptions with a mirror
    /// of the world matrices. Sockets are read and written on threads of their own that only move
    /// bytes; answers, frames and events are handled, and tasks completed (their continuations
    /// run), inside <see cref="Poll()"/>, on the thread that calls it: a Unity game calls it once
    /// per Update. Use a client from that one thread.</summary>
    /// <remarks>In a cluster, a call that names a world goes to the daemon last known to own it,
    /// and a <c>MOVED</c> answer is followed (at most 3 hops: a connection to the owner is opened
    /// and kept, the request sent again there); subscriptions stay on the connection they were
    /// made on, and one whose world moves is made again on the new owner.</remarks>
    public sealed partial class ScenedClient : IDisposable, LineSplitter.IHandler
    {
        private const int MaxHops = 3;

        private readonly ScenedOptions options;
        private readonly Tls tls;
        private readonly Inbound inbound = new Inbound();
        private readonly Dictionary<string, Connection> conns = new Dictionary<string, Connection>();
        private readonly Dictionary<string, string> owners = new Dictionary<string, string>();
        private readonly Queue<PendingCall> order = new Queue<PendingCall>();
        private readonly RequestWriter writer = new RequestWriter();
        private readonly FrameStage stage = new FrameStage();
        private Queue<Inbound.Item> drain = new Queue<Inbound.Item>();
        private Connection primary;
        private bool polling, disposed;
        private int handled;
        private ExceptionDispatchInfo handlerError;

        /// <summary>Raised in Poll for an event other than a frame of no <see cref="Subscription"/> of
        /// this client (one made through CallAsync("subscribe"), for instance), as a JObject. Frames
        /// of no Subscription are dropped.</summary>
        public event Action<JObject> EventReceived;

        private ScenedClient(ScenedOptions options)
        {
            this.options = options;
            if (options.Tls || options.TlsCaFile != null)
                tls = new Tls(options.TlsCaFile);
        }

        /// <summary>Connects (TCP, TLS when asked, <c>hello</c> with the token and the matrix form when
        /// needed) and returns once connected; throws a <see cref="ScenedException"/> otherwise.</summary>
        public static ScenedClient Connect(string host, int port, ScenedOptions options = null)
        {
            if (host == null)
                throw new ArgumentNullException("host");
            ScenedClient c = new ScenedClient(options != null ? options.Copy() : new ScenedOptions());
            Connection conn = new Connection(host, port, c.options, c.tls, c.inbound);
            conn.Open();
            c.primary = conn;
            c.conns[conn.Addr] = conn;
            return c;
        }

        /// <summary>Connect on a thread of the pool; the task completes without Poll.</summary>
        public static Task<ScenedClient> ConnectAsync(string host, int port, ScenedOptions options = null)
        {
            return Task.Run(() => Connect(host, port, options));
        }

        /// <summary>"HOST:PORT" of the daemon connected to.</summary>
        public string Address { get { return primary.Addr; } }

        /// <summary>How the daemon sends this client matrices ("json" or "b64").</summary>
        public MatrixForm Matrices { get { return primary.MatricesForm == "b64" ? MatrixForm.B64 : MatrixForm.Json; } }

        /// <summary>Whether the daemon connected to answered <c>hello</c> with follower reads on
        /// (<see cref="ScenedOptions.FollowerReads"/>); false when not asked.</summary>
        public bool FollowerReads { get { return primary.FollowerReads; } }

        /// <summary>"HOST:PORT" of the daemon a call naming this world goes to: the one a
        /// <c>MOVED</c> last named for it, else <see cref="Address"/>.</summary>
        public string AddressFor(string world)
        {
            string addr;
            return world != null && owners.TryGetValue(world, out addr) ? addr : primary.Addr;
        }

        /// <summary>Whether the connection to the daemon connected to is still up.</summary>
        public bool IsConnected { get { return !disposed && !primary.Gone; } }

        /// <summary>Calls not completed yet.</summary>
        public int Pending { get { return order.Count; } }

        /// <summary>Sends a request, <c>{"cmd": cmd, ...fields}</c>, without waiting for the answers of
        /// earlier ones. The task completes in Poll, in request order, with the whole answer (ok
        /// true), or fails with a <see cref="ScenedException"/> carrying the error code.</summary>
        public Task<JObject> CallAsync(string cmd, JObject fields = null)
        {
            if (cmd == null)
                throw new ArgumentNullException("cmd");
            CheckOpen();
            PendingCall c = new PendingCall { Kind = PendingCall.Kinds.Call, Cmd = cmd, Fields = fields,
                                              World = WorldOf(fields), Task = new TaskCompletionSource<JObject>() };
            Issue(c, Route(c.World), true);
            return c.Task.Task;
        }

        /// <summary><c>transform.set_local</c> of entity in world with matrix16 (16 floats, column-major)
        /// sent as <c>matrix_b64</c>: exact, and written straight into the request without a JObject,
        /// for the transforms a game sends every frame. Completes in Poll, in request order with every
        /// other call; fails with a <see cref="ScenedException"/>.</summary>
        public Task SetLocalAsync(string world, long entity, float[] matrix16)
        {
            return SetMatrix("transform.set_local", world, entity, matrix16);
        }

        /// <summary><see cref="SetLocalAsync"/> for the world matrix (<c>transform.set_world</c>).</summary>
        public Task SetWorldAsync(string world, long entity, float[] matrix16)
        {
            return SetMatrix("transform.set_world", world, entity, matrix16);
        }

        private Task SetMatrix(string cmd, string world, long entity, float[] matrix16)
        {
            if (world == null)
                throw new ArgumentNullException("world");
            if (matrix16 == null || matrix16.Length < 16)
                throw new ArgumentException("a matrix is 16 floats");
            CheckOpen();
            float[] copy = new float[16];
            Array.Copy(matrix16, copy, 16);
            PendingCall c = new PendingCall { Kind = PendingCall.Kinds.SetMatrix, Cmd = cmd, World = world, Entity = entity,
                                              Matrix = copy, Task = new TaskCompletionSource<JObject>() };
            Issue(c, Route(world), true);
            return c.Task.Task;
        }

        /// <summary>Subscribes to world; options are the protocol's <c>subscribe</c> fields (<c>root</c>,
        /// <c>hz</c>, <c>near</c>, <c>packed</c>). The task completes in Poll once the daemon answered;
        /// the subscription's frames are applied from then on (its first is full).</summary>
        public Task<Subscription> SubscribeAsync(string world, JObject options = null)
        {
            if (world == null)
                throw new ArgumentNullException("world");
            CheckOpen();
            JObject fields = options != null ? (JObject)options.DeepClone() : new JObject();
            fields["world"] = world;
            Subscription sub = new Subscription(this, world, fields);
            sub.Packed = PackedOf(fields["packed"]);
            PendingCall c = new PendingCall { Kind = PendingCall.Kinds.Subscribe, Cmd = "subscribe", Fields = fields,
                                              World = world, Sub = sub, SubTask = new TaskCompletionSource<Subscription>() };
            Issue(c, Route(world), true);
            return c.SubTask.Task;
        }

        internal Task<JObject> Update(Subscription sub, JObject fields)
        {
            CheckOpen();
            JObject f = fields != null ? (JObject)fields.DeepClone() : new JObject();
            f["sub"] = sub.Id;
            PendingCall c = new PendingCall { Kind = PendingCall.Kinds.Update, Cmd = "subscribe.update", Fields = f,
                                              Sub = sub, Task = new TaskCompletionSource<JObject>() };
            Issue(c, sub.Conn ?? primary, true);
            return c.Task.Task;
        }

        internal Task Unsubscribe(Subscription sub)
        {
            CheckOpen();
            if (!sub.IsActive || sub.Conn == null)
            {
                sub.End("unsubscribed", false, null);
                return Task.FromResult(true);
            }
            Connection conn = sub.Conn;
            long id = sub.Id;
            sub.End("unsubscribed", false, null);
            PendingCall c = new PendingCall { Kind = PendingCall.Kinds.Unsubscribe, Cmd = "unsubscribe",
                                              Fields = new JObject { { "sub", id } }, Task = new TaskCompletionSource<JObject>() };
            Issue(c, conn, true);
            return c.Task.Task;
        }

        /// <summary>Handles what has arrived: answers (their tasks complete, and their continuations
        /// run, here), frames (applied to their subscriptions' mirrors, then FrameReceived) and
        /// events. Returns the number of lines handled. Never blocks.</summary>
        public int Poll()
        {
            return Poll(0);
        }

        /// <summary>Poll that waits up to waitMilliseconds for something to arrive when nothing has
        /// (for programs without a frame loop).</summary>
        public int Poll(int waitMilliseconds)
        {
            if (disposed)
                return 0;
            if (polling)
                throw new InvalidOperationException("Poll is already running on this client (called from a handler or a continuation it runs)");
            polling = true;
            handled = 0;
            try
            {
                bool ready = order.Count > 0 && order.Peek().Done;
                inbound.Take(ref drain, ready ? 0 : waitMilliseconds);
                while (drain.Count > 0)
                {
                    Inbound.Item item = drain.Dequeue();
                    if (item.Buf == null)
                    {
                        if (!disposed)
                            ConnectionClosed(item.Conn, item.Error);
                        continue;
                    }
                    if (!disposed && !item.Conn.Gone)
                        item.Conn.Lines.Feed(item.Conn, item.Buf, item.Len, this);
                    inbound.Return(item.Buf);
                }
                CompleteReady();
            }
            finally
            {
                polling = false;
            }
            ExceptionDispatchInfo e = handlerError;
            handlerError = null;
            if (e != null)
                e.Throw();
            return handled;
        }

        /// <summary>Closes every connection; calls not completed fail (CLOSED) and subscriptions end
        /// (closed), here. Call it on the thread that calls Poll.</summary>
        public void Dispose()
        {
            if (disposed)
                return;
            disposed = true;
            ScenedException err = new ScenedException("CLOSED", "the client was disposed");
            foreach (Connection c in new List<Connection>(conns.Values))
            {
                c.Close();
                FailConnection(c, err);
            }
            inbound.Wake();
            CompleteReady();
            ExceptionDispatchInfo e = handlerError;
            handlerError = null;
            if (e != null)
                e.Throw();
        }

        // ---- sending ---------------------------------------------------------------------------

        private static string WorldOf(JObject fields)
        {
            JToken w = fields != null ? fields["world"] : null;
            return w != null && w.Type == JTokenType.String ? (string)w : null;
        }

        private static PackedState PackedOf(JToken packed)
        {
            JObject p = packed as JObject;
            if (p == null)
                return null;
            double step, ox = 0, oy = 0, oz = 0;
            if (!Number(p["step"], out step))
                return null;
            JArray o = p["origin"] as JArray;
            if (o != null && (o.Count != 3 || !Number(o[0], out ox) || !Number(o[1], out oy) || !Number(o[2], out oz)))
                return null;
            PackedState s = null;
            try
            {
                s = new PackedState(step, ox, oy, oz);
            }
            catch (ArgumentException)
            {
                // a grid the daemon refuses as well
            }
            return s;
        }

        private static bool Number(JToken t, out double v)
        {
            v = 0;
            if (t == null || (t.Type != JTokenType.Integer && t.Type != JTokenType.Float))
                return false;
            v = (double)t;
            return true;
        }

        /// <summary>The connection for a world: its owner's when one is known, else the first.</summary>
        private Connection Route(string world)
        {
            string addr;
            if (world != null && owners.TryGetValue(world, out addr))
                return ConnectionTo(addr);
            return primary;
        }

        /// <summary>The open connection to addr ("HOST:PORT"), opened (in the background) when
        /// there is none.</summary>
        private Connection ConnectionTo(string addr)
        {
            Connection c;
            if (conns.TryGetValue(addr, out c) && !c.Gone)
                return c;
            int colon = addr.LastIndexOf(':');
            int port;
            string host = colon > 0 ? addr.Substring(0, colon).Trim('[', ']') : addr;
            if (colon <= 0 || !int.TryParse(addr.Substring(colon + 1), out port))
                port = 0;
            c = new Connection(host, port, options, tls, inbound);
            conns[addr] = c;
            Connection opening = c;
            Inbound sink = inbound;
            ThreadPool.QueueUserWorkItem(delegate
            {
                try
                {
                    opening.Open();
                }
                catch (Exception e)
                {
                    sink.PushClose(opening, e);
                }
            });
            return c;
        }

        private void Issue(PendingCall c, Connection conn, bool first)
        {
            // written first: fields that cannot be sent (a NaN) throw here, before the call is queued
            if (c.Matrix != null)
                writer.SetMatrix(c.Cmd, c.World, c.Entity, c.Matrix, 0);
            else
                writer.Request(c.Cmd, c.Fields);
            if (first && (c.Task != null || c.SubTask != null))
                order.Enqueue(c);
            c.Conn = conn;
            if (conn.Gone)
            {
                Finish(c, null, new ScenedException("CLOSED", "the connection to " + conn.Addr + " is closed"));
                return;
            }
            conn.Awaiting.Enqueue(c);
            conn.Send(writer.Buf, writer.Len);
        }

        private void CheckOpen()
        {
            if (disposed)
                throw new ObjectDisposedException("ScenedClient");
        }

        internal void Raise(Action<Subscription> h, Subscription s)
        {
            try
            {
                h(s);
            }
            catch (Exception e)
            {
                if (handlerError == null)
                    handlerError = ExceptionDispatchInfo.Capture(e);
            }
        }

        private void RaiseEvent(Action<JObject> h, JObject o)
        {
            try
            {
                h(o);
            }
            catch (Exception e)
            {
                if (handlerError == null)
                    handlerError = ExceptionDispatchInfo.Capture(e);
            }
        }
    }
}

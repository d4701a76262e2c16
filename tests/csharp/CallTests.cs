// Calls: connecting, answers and errors, pipelining in order, hello's token and matrix form,
// and where tasks complete and their continuations run (inside Poll, on its thread).
using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Scened;

namespace ScenedTests
{
    public static class CallTests
    {
        private static Daemon plain;

        public static Daemon Plain
        {
            get
            {
                if (plain == null || plain.Proc.HasExited)
                    plain = Daemons.Start("--tick-hz", "60");
                return plain;
            }
        }

        public static ScenedClient Connect(ScenedOptions o = null)
        {
            return ScenedClient.Connect("127.0.0.1", Plain.Port, o);
        }

        private static int worlds;

        public static string NewWorld(ScenedClient c)
        {
            string w = "cs" + Interlocked.Increment(ref worlds) + "-" + Rand.Seed;
            T.Call(c, "world.create", T.O("world", w));
            return w;
        }

        public static void Register()
        {
            Program.Add("calls/connect_ping_create_get", ConnectPingCreateGet);
            Program.Add("calls/error_code", ErrorCode);
            Program.Add("calls/pipelined_in_order", PipelinedInOrder);
            Program.Add("calls/continuations_inside_poll", ContinuationsInsidePoll);
            Program.Add("calls/sync_context_continuations_inside_poll", SyncContextInsidePoll);
            Program.Add("calls/connect_async_without_poll", ConnectAsyncWithoutPoll);
            Program.Add("calls/token", Token);
            Program.Add("calls/b64_matrices", B64Matrices);
            Program.Add("calls/strings_and_numbers_round_trip", StringsAndNumbers);
            Program.Add("calls/set_local_and_world_b64", SetMatrices);
            Program.Add("calls/connect_refused", ConnectRefused);
            Program.Add("calls/daemon_gone_fails_pending", DaemonGone);
            Program.Add("calls/dispose_fails_pending", DisposeFailsPending);
        }

        private static void ConnectPingCreateGet()
        {
            using (ScenedClient c = Connect())
            {
                T.Check((bool)T.Call(c, "ping")["ok"], "ping ok");
                string w = NewWorld(c);
                long e = (long)T.Call(c, "transform.create", T.O("world", w, "name", "car", "t", new[] { 1.5, 2, -3 }))["entity"];
                JObject r = T.Call(c, "transform.get", T.O("world", w, "entity", e));
                float[] m = T.Matrix(r["world"]);
                T.Check(m[12] == 1.5f && m[13] == 2 && m[14] == -3, "the translation as set");
                T.Equal("car", (string)r["name"], "name");
                T.Equal(MatrixForm.Json, c.Matrices, "matrices form");
            }
        }

        private static void ErrorCode()
        {
            using (ScenedClient c = Connect())
            {
                T.Equal("NOT_FOUND", T.ErrorCode(c, c.CallAsync("transform.get", T.O("world", "no-such-world", "entity", 1))), "code");
                T.Equal("UNKNOWN_COMMAND", T.ErrorCode(c, c.CallAsync("no.such.command")), "code");
                T.Equal("BAD_REQUEST", T.ErrorCode(c, c.CallAsync("world.create")), "code");
                try
                {
                    T.Call(c, "world.create", T.O("world", "bad name!"));
                    T.Check(false, "a bad name is refused");
                }
                catch (ScenedException e)
                {
                    T.Equal("BAD_REQUEST", e.Code, "code");
                    T.Check(e.Response != null && (string)e.Response["error"]["code"] == "BAD_REQUEST", "the response");
                }
                T.Check((bool)T.Call(c, "ping")["ok"], "the connection stays usable");
            }
        }

        /// <summary>2,000 calls sent without waiting, errors among them: each answer is its own and
        /// the tasks complete in request order.</summary>
        private static void PipelinedInOrder()
        {
            using (ScenedClient c = Connect())
            {
                string w = NewWorld(c);
                long e = (long)T.Call(c, "transform.create", T.O("world", w))["entity"];
                const int n = 2000;
                List<Task<JObject>> tasks = new List<Task<JObject>>();
                List<int> completed = new List<int>();
                for (int i = 0; i < n; i++)
                {
                    int k = i;
                    Task<JObject> t = i % 10 == 7
                        ? c.CallAsync("transform.get", T.O("world", w, "entity", e + 1000000))
                        : c.CallAsync("transform.set_local", T.O("world", w, "entity", e, "t", new[] { (double)i, 0, 0 }, "id", i));
                    t.ContinueWith(_ => completed.Add(k), TaskContinuationOptions.ExecuteSynchronously);
                    tasks.Add(t);
                }
                T.Check(c.Pending == n, "all pending before Poll");
                T.Until(c, () => completed.Count == n, "every call completes");
                for (int i = 0; i < n; i++)
                {
                    T.Equal(i, completed[i], "completion order");
                    if (i % 10 == 7)
                        T.Check(tasks[i].IsFaulted && ((ScenedException)tasks[i].Exception.InnerException).Code == "NOT_FOUND", "call " + i + " fails");
                    else
                        T.Equal(i, (int)tasks[i].Result["id"], "call " + i + "'s own answer");
                }
                float[] m = T.Matrix(T.Call(c, "transform.get", T.O("world", w, "entity", e))["local"]);
                T.Equal((float)(n - 1), m[12], "the last set is the one that stays");
            }
        }

        private static void ContinuationsInsidePoll()
        {
            using (ScenedClient c = Connect())
            {
                int me = Thread.CurrentThread.ManagedThreadId;
                bool inPoll = false, sync = false, awaited = false;
                Task<JObject> t = c.CallAsync("ping");
                t.ContinueWith(_ => sync = inPoll && Thread.CurrentThread.ManagedThreadId == me, TaskContinuationOptions.ExecuteSynchronously);
                Task a = AwaitPing(c, () => awaited = inPoll && Thread.CurrentThread.ManagedThreadId == me);
                T.Arrive(c); // the answers are in: still nothing ran
                T.Check(!t.IsCompleted, "no completion without Poll");
                for (int i = 0; i < 500 && !a.IsCompleted; i++)
                {
                    inPoll = true;
                    c.Poll(20);
                    inPoll = false;
                }
                T.Check(sync, "ContinueWith ran inside Poll on its thread");
                T.Check(awaited, "an await's continuation ran inside Poll on its thread");
            }
        }

        private static async Task AwaitPing(ScenedClient c, Action after)
        {
            await c.CallAsync("ping");
            after();
        }

        /// <summary>As in Unity: the thread that polls has a SynchronizationContext that posts to a
        /// queue; an await made on it continues inside Poll, not later through the queue.</summary>
        private static void SyncContextInsidePoll()
        {
            SynchronizationContext before = SynchronizationContext.Current;
            UnityEngine.PlayerLoop loop = new UnityEngine.PlayerLoop();
            SynchronizationContext.SetSynchronizationContext(loop);
            try
            {
                using (ScenedClient c = Connect())
                {
                    bool inPoll = false, ran = false;
                    Task a = AwaitPing(c, () => ran = inPoll);
                    for (int i = 0; i < 500 && !a.IsCompleted; i++)
                    {
                        inPoll = true;
                        c.Poll(20);
                        inPoll = false;
                    }
                    T.Check(a.IsCompleted && ran, "the continuation ran inside Poll");
                }
            }
            finally
            {
                SynchronizationContext.SetSynchronizationContext(before);
            }
        }

        private static void ConnectAsyncWithoutPoll()
        {
            Task<ScenedClient> t = ScenedClient.ConnectAsync("127.0.0.1", Plain.Port, new ScenedOptions { Matrices = MatrixForm.B64 });
            T.Check(t.Wait(T.Deadline), "ConnectAsync completes without Poll");
            using (ScenedClient c = t.Result)
            {
                T.Equal(MatrixForm.B64, c.Matrices, "hello's matrices");
                T.Check((bool)T.Call(c, "ping")["ok"], "ping");
            }
            Task<ScenedClient> bad = ScenedClient.ConnectAsync("127.0.0.1", Daemons.FreePort());
            try
            {
                bad.Wait(T.Deadline);
                T.Check(false, "connecting to nothing fails");
            }
            catch (AggregateException e)
            {
                T.Equal("CLOSED", ((ScenedException)e.InnerException).Code, "code");
            }
        }

        private static void Token()
        {
            Daemon d = Daemons.Start("--auth-token", "s3cret");
            try
            {
                using (ScenedClient none = ScenedClient.Connect("127.0.0.1", d.Port))
                    T.Equal("UNAUTHORIZED", T.ErrorCode(none, none.CallAsync("world.list")), "without hello");
                try
                {
                    ScenedClient.Connect("127.0.0.1", d.Port, new ScenedOptions { Token = "wrong" }).Dispose();
                    T.Check(false, "a wrong token fails Connect");
                }
                catch (ScenedException e)
                {
                    T.Equal("UNAUTHORIZED", e.Code, "code");
                }
                using (ScenedClient c = ScenedClient.Connect("127.0.0.1", d.Port, new ScenedOptions { Token = "s3cret", Matrices = MatrixForm.B64 }))
                {
                    T.Check(T.Call(c, "world.list")["worlds"] is JArray, "with the token");
                    T.Equal(MatrixForm.B64, c.Matrices, "token and matrices in one hello");
                }
            }
            finally
            {
                d.Stop();
            }
        }

        private static void B64Matrices()
        {
            using (ScenedClient c = Connect(new ScenedOptions { Matrices = MatrixForm.B64 }))
            {
                string w = NewWorld(c);
                float[] m = { 0.8f, 0.6f, 0, 0, -0.6f, 0.8f, 0, 0, 0, 0, 1, 0, 1e-7f, 2.25f, -3.125f, 1 };
                long e = (long)T.Call(c, "transform.create", T.O("world", w, "matrix_b64", ScenedMatrix.ToBase64(m)))["entity"];
                JObject r = T.Call(c, "transform.get", T.O("world", w, "entity", e));
                T.Equal(JTokenType.String, r["world"].Type, "a b64 string");
                T.Check(T.SameBits(m, T.Matrix(r["world"])), "the same bits back");
                T.Check(!ScenedMatrix.TryFromBase64("AAAA", new float[16]), "a short string is no matrix");
            }
        }

        private static void StringsAndNumbers()
        {
            using (ScenedClient c = Connect())
            {
                string w = NewWorld(c);
                string name = "wheel \"fl\" \\ é 車 \U0001F697";
                long e = (long)T.Call(c, "transform.create", T.O("world", w, "name", name, "s", 0.1))["entity"];
                JObject r = T.Call(c, "transform.get", T.O("world", w, "entity", e));
                T.Equal(name, (string)r["name"], "a name with quotes, escapes and non-ASCII");
                T.Equal(0.1f, T.Matrix(r["local"])[0], "0.1 as float32");
                T.Equal((long)e, (long)T.Call(c, "transform.find", T.O("world", w, "path", name))["entity"], "find by it");
                try
                {
                    c.CallAsync("transform.set_local", T.O("world", w, "entity", e, "t", new[] { double.NaN, 0, 0 }));
                    T.Check(false, "a NaN cannot be sent");
                }
                catch (ArgumentException)
                {
                }
                T.Check((bool)T.Call(c, "ping")["ok"], "and the calls after it complete");
            }
        }

        private static void SetMatrices()
        {
            using (ScenedClient c = Connect(new ScenedOptions { Matrices = MatrixForm.B64 }))
            {
                string w = CallTests.NewWorld(c);
                long parent = (long)T.Call(c, "transform.create", T.O("world", w, "t", new[] { 10, 0, 0 }, "s", 2))["entity"];
                long child = (long)T.Call(c, "transform.create", T.O("world", w, "parent", parent))["entity"];
                float[] m = { 0.8f, 0.6f, 0, 0, -0.6f, 0.8f, 0, 0, 0, 0, 1, 0, 1e-7f, -2.25f, 3.1f, 1 };
                List<Task> sets = new List<Task>();
                for (int i = 0; i < 100; i++)
                {
                    m[12] = i + 0.25f;
                    sets.Add(c.SetLocalAsync(w, child, m)); // the matrix is copied: changing it after is fine
                }
                Task last = c.SetWorldAsync(w, parent, new float[] { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 5, 6, 7, 1 });
                Task bad = c.SetLocalAsync(w, child + 1000, m);
                T.Equal("NOT_FOUND", T.ErrorCode(c, (Task<JObject>)bad), "an unknown entity");
                T.Check(sets.TrueForAll(t => t.Status == TaskStatus.RanToCompletion) && last.Status == TaskStatus.RanToCompletion, "the sets succeed, in order");
                JObject r = T.Call(c, "transform.get", T.O("world", w, "entity", child));
                T.Check(T.SameBits(m, T.Matrix(r["local"])), "the last local matrix, to the bit");
                T.Equal(99.25f + 5, T.Matrix(r["world"])[12], "under the parent's new world matrix");
            }
        }

        private static void ConnectRefused()
        {
            try
            {
                ScenedClient.Connect("127.0.0.1", Daemons.FreePort(), new ScenedOptions { Timeout = TimeSpan.FromSeconds(5) });
                T.Check(false, "connecting to nothing fails");
            }
            catch (ScenedException e)
            {
                T.Equal("CLOSED", e.Code, "code");
            }
        }

        private static void DaemonGone()
        {
            Daemon d = Daemons.Start();
            ScenedClient c = ScenedClient.Connect("127.0.0.1", d.Port);
            try
            {
                string w = NewWorld(c);
                Task<Subscription> st = c.SubscribeAsync(w);
                Subscription s = T.Wait(c, st);
                d.Stop();
                Task<JObject> t = c.CallAsync("ping");
                T.Equal("CLOSED", T.ErrorCode(c, t), "a call on a connection that closed");
                T.Until(c, () => !s.IsActive, "the subscription ends");
                T.Equal("closed", s.EndReason, "its reason");
                T.Check(!c.IsConnected, "not connected");
            }
            finally
            {
                c.Dispose();
            }
        }

        private static void DisposeFailsPending()
        {
            ScenedClient c = Connect();
            Task<JObject> t = c.CallAsync("ping");
            c.Dispose();
            T.Check(t.IsFaulted && ((ScenedException)t.Exception.InnerException).Code == "CLOSED", "a pending call fails");
            try
            {
                c.CallAsync("ping");
                T.Check(false, "a call after Dispose throws");
            }
            catch (ObjectDisposedException)
            {
            }
        }
    }
}

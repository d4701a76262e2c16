// A cluster: a real etcd and two daemons sharing a data directory. The client follows MOVED
// (pipelined calls too, in order), keeps a subscription on the owner's connection, and makes it
// again on the new owner when its world moves. And three daemons with --replicas 1, each on a
// data directory of its own: a client with FollowerReads reads from a follower's copy.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Scened;

namespace ScenedTests
{
    public static class ClusterTests
    {
        public static void Register()
        {
            Program.Add("cluster/moved_followed_and_world_moves", MovedAndMove);
            Program.Add("cluster/follower_reads", FollowerReads);
        }

        private static void Signal(Daemon d, string sig)
        {
            Process.Start(new ProcessStartInfo("kill", "-" + sig + " " + d.Proc.Id) { UseShellExecute = false }).WaitForExit();
        }

        private static JToken Until<R>(ScenedClient c, Func<R> f, Func<R, bool> ok, string what) where R : class
        {
            R got = null;
            T.Until(c, () =>
            {
                try
                {
                    got = f();
                    return ok(got);
                }
                catch (ScenedException)
                {
                    return false;
                }
            }, what);
            return got as JToken;
        }

        private static void FollowerReads()
        {
            string etcd = Daemons.StartEtcd();
            Daemon[] d = new Daemon[3];
            string[] names = { "a", "b", "c" };
            for (int i = 0; i < 3; i++)
                d[i] = Daemons.Start("--cluster", etcd, "--node", names[i], "--data", Daemons.TempDir("replicas-" + names[i]),
                                     "--replicas", "1");
            string w = "fr" + Rand.Seed + ".main";
            int owner, follower;
            long e;
            using (ScenedClient a = ScenedClient.Connect("127.0.0.1", d[0].Port))
            {
                WaitNodes(a, 3);
                JObject made = (JObject)Until(a, () => T.Call(a, "world.create", T.O("world", w)), r => true, "world.create");
                owner = Array.IndexOf(names, (string)made["node"]);
                T.Check(owner >= 0, "the world's owner is one of the three: " + made);
            }
            using (ScenedClient onOwner = ScenedClient.Connect("127.0.0.1", d[owner].Port))
            {
                e = (long)T.Call(onOwner, "transform.create", T.O("world", w, "t", new[] { 1, 2, 3 }))["entity"];
                JArray insync = null;
                Until(onOwner, () => T.Call(onOwner, "world.list", T.O("cluster", true)), r =>
                {
                    foreach (JToken x in (JArray)r["worlds"])
                        if ((string)x["name"] == w && x["insync"] is JArray && ((JArray)x["insync"]).Count > 0)
                            insync = (JArray)x["insync"];
                    return insync != null;
                }, "the owner's world.list names a follower in sync");
                follower = Array.IndexOf(names, (string)insync[0]);
                T.Check(follower >= 0 && follower != owner, "the follower is another daemon: " + insync);
            }
            string ownerAddr = "127.0.0.1:" + d[owner].Port, followerAddr = "127.0.0.1:" + d[follower].Port;

            using (ScenedClient plain = ScenedClient.Connect("127.0.0.1", d[follower].Port))
            using (ScenedClient fr = ScenedClient.Connect("127.0.0.1", d[follower].Port, new ScenedOptions { FollowerReads = true }))
            {
                T.Check(fr.FollowerReads, "hello answered follower_reads true");
                T.Check(!plain.FollowerReads, "no follower reads without the option");
                // without the option: MOVED, followed to the owner
                JObject got = T.Call(plain, "transform.get", T.O("world", w, "entity", e));
                T.Equal(2f, T.Matrix(got["local"])[13], "the plain client reads y");
                T.Equal(ownerAddr, plain.AddressFor(w), "the plain client was sent to the owner");
                // with it: from the follower's copy, once it has the transform (it may lag)
                Until(fr, () => T.Call(fr, "transform.get", T.O("world", w, "entity", e)), r => true, "the follower's copy has the transform");
                T.Equal(followerAddr, fr.AddressFor(w), "read on the follower");
                // the owner stopped: the follower still answers
                Signal(d[owner], "STOP");
                Stopwatch stopped = Stopwatch.StartNew();
                try
                {
                    got = T.Call(fr, "transform.get", T.O("world", w, "entity", e));
                }
                finally
                {
                    Signal(d[owner], "CONT");
                }
                Console.WriteLine("  read from the follower with the owner stopped, in " + stopped.ElapsedMilliseconds + " ms");
                float[] m = T.Matrix(got["local"]);
                T.Check(m[12] == 1 && m[13] == 2 && m[14] == 3, "the follower's copy of the transform");
                T.Equal(followerAddr, fr.AddressFor(w), "still on the follower");
                // a write through the follower-reads client reaches the owner
                T.Call(fr, "transform.set_local", T.O("world", w, "entity", e, "t", new[] { 4, 5, 6 }));
                T.Equal(ownerAddr, fr.AddressFor(w), "the write's MOVED was followed to the owner");
                using (ScenedClient onOwner = ScenedClient.Connect("127.0.0.1", d[owner].Port))
                    T.Equal(5f, T.Matrix(T.Call(onOwner, "transform.get", T.O("world", w, "entity", e))["local"])[13], "the owner has the write");
            }
            for (int i = 2; i >= 0; i--)
                d[i].Stop();
        }

        private static void WaitNodes(ScenedClient c, int n)
        {
            T.Until(c, () =>
            {
                Task<JObject> t = c.CallAsync("cluster.nodes");
                try
                {
                    return ((JArray)T.Wait(c, t)["nodes"]).Count == n;
                }
                catch (ScenedException)
                {
                    return false;
                }
            }, n + " nodes registered");
        }

        private static void MovedAndMove()
        {
            string etcd = Daemons.StartEtcd();
            string data = Daemons.TempDir("cluster");
            Daemon a = Daemons.Start("--cluster", etcd, "--node", "a", "--data", data, "--lease-ttl", "2");
            Daemon b = Daemons.Start("--cluster", etcd, "--node", "b", "--data", data, "--lease-ttl", "2");
            using (ScenedClient c = ScenedClient.Connect("127.0.0.1", a.Port, new ScenedOptions { Matrices = MatrixForm.B64 }))
            using (ScenedClient onB = ScenedClient.Connect("127.0.0.1", b.Port))
            {
                WaitNodes(c, 2);
                string w = "g" + Rand.Seed + ".main";
                JObject made = T.Call(c, "world.create", T.O("world", w, "node", "b"));
                T.Equal("b", (string)made["node"], "created on b through a (MOVED followed)");
                // pipelined, the first ones before the owner is known on a fresh client
                long e0 = 0;
                using (ScenedClient fresh = ScenedClient.Connect("127.0.0.1", a.Port))
                {
                    List<Task<JObject>> calls = new List<Task<JObject>>();
                    List<int> done = new List<int>();
                    for (int i = 0; i < 200; i++)
                    {
                        int k = i;
                        Task<JObject> t = i % 50 == 49 ? fresh.CallAsync("ping")
                            : fresh.CallAsync("transform.create", T.O("world", w, "t", new[] { i, 0, 0 }, "id", i));
                        t.ContinueWith(_ => done.Add(k), TaskContinuationOptions.ExecuteSynchronously);
                        calls.Add(t);
                    }
                    T.Until(fresh, () => done.Count == calls.Count, "every call completes");
                    for (int i = 0; i < calls.Count; i++)
                    {
                        T.Equal(i, done[i], "in request order");
                        T.Check(calls[i].Status == TaskStatus.RanToCompletion, "call " + i + " succeeds");
                    }
                    e0 = (long)calls[0].Result["entity"];
                }
                // a typed set from a client that does not know the owner yet
                using (ScenedClient fresh = ScenedClient.Connect("127.0.0.1", a.Port))
                {
                    float[] m0 = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 4, 5, 6, 1 };
                    T.Wait(fresh, fresh.SetLocalAsync(w, e0, m0));
                    T.Check(T.SameBits(m0, T.Matrix(T.Call(onB, "transform.get", T.O("world", w, "entity", e0))["local"])), "set on b through a");
                }
                JArray local = (JArray)T.Call(onB, "world.list")["worlds"];
                T.Check(local.Count == 1 && (long)local[0]["transforms"] == 196, "the transforms are on b");

                Subscription s = T.Wait(c, c.SubscribeAsync(w, T.O("packed", T.O("step", 0.001))));
                T.Until(c, () => s.Count == 196, "the mirror from b");
                int frames = 0;
                s.FrameReceived += x => frames++;
                // a finer grid, which the subscription keeps when it is made again on a
                T.Wait(c, s.UpdateAsync(T.O("packed", T.O("step", 0.0005))));
                T.Call(c, "world.move", T.O("world", w, "to", "a"));
                long e = (long)T.Call(c, "transform.create", T.O("world", w, "t", new[] { 7.0004, 8, 9 }))["entity"];
                float[] m = new float[16];
                T.Until(c, () => s.TryGetWorld(e, m) && s.Count == 197, "the subscription goes on from a");
                T.Check(s.IsActive, "still running");
                T.Check(Math.Abs(m[12] - 7.0004) <= 0.00025 + 1e-6 && Math.Abs(m[14] - 9) < 0.0003, "the new transform on the finer grid: " + m[12]);
                T.Equal(0, ((JArray)T.Call(onB, "world.list")["worlds"]).Count, "nothing left on b");
                T.Check(frames > 0, "frames after the move");
            }
            b.Stop();
            a.Stop();
        }
    }
}

// Subscriptions: json, b64 and packed frames into the mirror, against transform.get; removals,
// the ends of a subscription (root, center, world destroyed; unsubscribe), subscribe.update of
// a region and of a packed grid, and a mirror that allocates nothing per frame.
using System;
using System.Collections.Generic;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Scened;

namespace ScenedTests
{
    public static class FrameTests
    {
        public static void Register()
        {
            Program.Add("frames/json_b64_packed_mirrors", ThreeForms);
            Program.Add("frames/root_destroyed_empties", RootDestroyed);
            Program.Add("frames/world_destroyed_empties", WorldDestroyed);
            Program.Add("frames/near_update_and_center_destroyed", NearUpdate);
            Program.Add("frames/packed_update_grid", PackedUpdateGrid);
            Program.Add("frames/unsubscribe_stops_frames", UnsubscribeStops);
            Program.Add("frames/no_garbage_per_frame", NoGarbage);
        }

        /// <summary>A world of roots, children and grandchildren with random parts; ids in order.</summary>
        public static List<long> Populate(ScenedClient c, string w, Random r, int roots, int children)
        {
            List<long> ids = new List<long>();
            List<Task<JObject>> made = new List<Task<JObject>>();
            for (int i = 0; i < roots; i++)
                made.Add(c.CallAsync("transform.create", Spec(r, T.O("world", w))));
            foreach (Task<JObject> t in made)
                ids.Add((long)T.Wait(c, t)["entity"]);
            made.Clear();
            for (int i = 0; i < children; i++)
                made.Add(c.CallAsync("transform.create", Spec(r, T.O("world", w, "parent", ids[r.Next(ids.Count)]))));
            foreach (Task<JObject> t in made)
                ids.Add((long)T.Wait(c, t)["entity"]);
            return ids;
        }

        /// <summary>Random t, r and s (uniform or not, now and then a mirror) into fields.</summary>
        public static JObject Spec(Random r, JObject f)
        {
            f["t"] = new JArray(r.NextDouble() * 200 - 100, r.NextDouble() * 20, r.NextDouble() * 200 - 100);
            f["r"] = new JArray(r.NextDouble() - 0.5, r.NextDouble() - 0.5, r.NextDouble() - 0.5, r.NextDouble() + 0.1);
            int kind = r.Next(4);
            if (kind == 1)
                f["s"] = 0.5 + r.NextDouble();
            else if (kind == 2)
                f["s"] = new JArray(0.5 + r.NextDouble(), 0.5 + r.NextDouble(), 0.5 + r.NextDouble());
            else if (kind == 3)
                f["s"] = new JArray(-1.0, 1.0, 1.0);
            return f;
        }

        /// <summary>The world matrices of ids now, exact (b64), by entity.</summary>
        public static Dictionary<long, float[]> Truth(ScenedClient b64, string w, List<long> ids)
        {
            List<Task<JObject>> gets = new List<Task<JObject>>();
            foreach (long e in ids)
                gets.Add(b64.CallAsync("transform.get", T.O("world", w, "entity", e)));
            Dictionary<long, float[]> truth = new Dictionary<long, float[]>();
            for (int i = 0; i < ids.Count; i++)
                truth[ids[i]] = T.Matrix(T.Wait(b64, gets[i])["world"]);
            return truth;
        }

        /// <summary>Whether the mirror holds exactly truth's entities, each matrix within tol of its
        /// value (0: the same bits); a packed step gives the translation's tolerance.</summary>
        public static bool Mirrors(Subscription s, Dictionary<long, float[]> truth, double step)
        {
            if (s.Count != truth.Count)
                return false;
            float[] m = new float[16];
            foreach (KeyValuePair<long, float[]> kv in truth)
            {
                if (!s.TryGetWorld(kv.Key, m))
                    return false;
                if (step == 0 ? !T.SameBits(m, kv.Value) : !Near(m, kv.Value, step))
                    return false;
            }
            return true;
        }

        /// <summary>Within the contract's tolerance of a packed matrix: translation within step / 2
        /// plus float32 rounding, rotation within 0.5 degrees (an element of the 3x3 within 0.01
        /// of its column's length), the last row as is.</summary>
        public static bool Near(float[] a, float[] b, double step)
        {
            for (int j = 0; j < 3; j++)
            {
                double len = Math.Sqrt(b[4 * j] * b[4 * j] + b[4 * j + 1] * b[4 * j + 1] + b[4 * j + 2] * b[4 * j + 2]);
                for (int k = 0; k < 3; k++)
                    if (Math.Abs(a[4 * j + k] - b[4 * j + k]) > 0.01 * len + 1e-6)
                        return false;
                if (Math.Abs(a[12 + j] - b[12 + j]) > step / 2 + 1e-6 * Math.Max(1, Math.Abs(b[12 + j])))
                    return false;
            }
            return a[3] == b[3] && a[7] == b[7] && a[11] == b[11] && a[15] == b[15];
        }

        private static void ThreeForms()
        {
            Random r = new Random(Rand.Seed);
            using (ScenedClient cj = CallTests.Connect())
            using (ScenedClient cb = CallTests.Connect(new ScenedOptions { Matrices = MatrixForm.B64 }))
            {
                string w = CallTests.NewWorld(cb);
                List<long> ids = Populate(cb, w, r, 20, 180);
                Subscription sj = T.Wait(cj, cj.SubscribeAsync(w));
                Subscription sb = T.Wait(cb, cb.SubscribeAsync(w));
                Subscription sp = T.Wait(cb, cb.SubscribeAsync(w, T.O("packed", T.O("step", 0.001, "origin", new[] { 10.0, 0, -5 }))));
                T.Check(sp.PackedStep == 0.001 && double.IsNaN(sb.PackedStep), "packed steps");
                Dictionary<long, float[]> start = Truth(cb, w, ids);
                T.Until(() => Mirrors(sj, start, 0) && Mirrors(sb, start, 0) && Mirrors(sp, start, 0.001), "the full frames", cb, cj);
                HashSet<long> removedSeen = new HashSet<long>();
                int raised = 0;
                long attached = sb.Frames;
                sb.FrameReceived += s =>
                {
                    raised++;
                    for (int i = 0; i < s.RemovedCount; i++)
                        removedSeen.Add(s.RemovedAt(i));
                };
                for (int round = 0; round < 6; round++)
                {
                    List<Task<JObject>> sets = new List<Task<JObject>>();
                    for (int i = 0; i < 40; i++)
                        sets.Add(cb.CallAsync("transform.set_local", Spec(r, T.O("world", w, "entity", ids[r.Next(ids.Count)]))));
                    if (round == 3)
                    {
                        // a raw matrix (shear): packed sends it as it is
                        float[] shear = { 1, 0, 0, 0, 0.5f, 1, 0, 0, 0, 0, 1, 0, 3, 4, 5, 1 };
                        sets.Add(cb.CallAsync("transform.set_local", T.O("world", w, "entity", ids[0], "matrix_b64", ScenedMatrix.ToBase64(shear))));
                    }
                    long gone = ids[ids.Count - 1 - round];
                    sets.Add(cb.CallAsync("transform.destroy", T.O("world", w, "entity", gone)));
                    ids.Remove(gone);
                    removedSeen.Remove(gone);
                    foreach (Task<JObject> t in sets)
                        T.Wait(cb, t);
                    Dictionary<long, float[]> truth = Truth(cb, w, ids);
                    T.Until(() => Mirrors(sj, truth, 0) && Mirrors(sb, truth, 0) && Mirrors(sp, truth, 0.001),
                            "round " + round + ": json and b64 mirrors exact, packed within its tolerance", cb, cj);
                    T.Check(removedSeen.Contains(gone), "round " + round + ": the destroyed entity among a frame's removed");
                }
                T.Equal(sb.Frames - attached, (long)raised, "FrameReceived once a frame");
                T.Check(sb.Tick > 0 && sb.IsActive, "ticks; still running");
            }
        }

        private static void RootDestroyed()
        {
            using (ScenedClient c = CallTests.Connect(new ScenedOptions { Matrices = MatrixForm.B64 }))
            {
                string w = CallTests.NewWorld(c);
                long root = (long)T.Call(c, "transform.create", T.O("world", w))["entity"];
                for (int i = 0; i < 5; i++)
                    T.Call(c, "transform.create", T.O("world", w, "parent", root, "t", new[] { i, 0, 0 }));
                T.Call(c, "transform.create", T.O("world", w)); // outside the subtree
                Subscription s = T.Wait(c, c.SubscribeAsync(w, T.O("root", root)));
                Subscription p = T.Wait(c, c.SubscribeAsync(w, T.O("root", root, "packed", T.O("step", 0.01))));
                T.Until(c, () => s.Count == 6 && p.Count == 6, "the subtree in both mirrors");
                int ended = 0;
                s.Ended += x => ended++;
                T.Call(c, "transform.destroy", T.O("world", w, "entity", root));
                T.Until(c, () => !s.IsActive && !p.IsActive, "both end");
                T.Equal("root_destroyed", s.EndReason, "reason");
                T.Equal("root_destroyed", p.EndReason, "packed reason");
                T.Check(s.Count == 0 && p.Count == 0, "the mirrors are empty");
                T.Equal(1, ended, "Ended once");
                T.Equal("NOT_FOUND", T.ErrorCode(c, c.CallAsync("unsubscribe", T.O("sub", s.Id))), "the daemon ended it");
            }
        }

        private static void WorldDestroyed()
        {
            using (ScenedClient c = CallTests.Connect())
            {
                string w = CallTests.NewWorld(c);
                T.Call(c, "transform.create", T.O("world", w));
                Subscription s = T.Wait(c, c.SubscribeAsync(w));
                T.Until(c, () => s.Count == 1, "the world in the mirror");
                T.Call(c, "world.destroy", T.O("world", w));
                T.Until(c, () => !s.IsActive, "ends");
                T.Equal("world_destroyed", s.EndReason, "reason");
                T.Check(s.Count == 0 && s.RemovedCount == 1, "empty, what it held listed as removed");
            }
        }

        private static void NearUpdate()
        {
            using (ScenedClient c = CallTests.Connect(new ScenedOptions { Matrices = MatrixForm.B64 }))
            {
                string w = CallTests.NewWorld(c);
                long player = (long)T.Call(c, "transform.create", T.O("world", w, "t", new[] { 0, 0, 0 }))["entity"];
                List<long> row = new List<long>();
                for (int i = 1; i <= 10; i++)
                    row.Add((long)T.Call(c, "transform.create", T.O("world", w, "t", new[] { 10.0 * i, 0, 0 }))["entity"]);
                Subscription s = T.Wait(c, c.SubscribeAsync(w, T.O("near", T.O("entity", player, "radius", 25), "packed", T.O("step", 0.001))));
                T.Until(c, () => s.Count == 3, "the player and two within 25");
                T.Wait(c, s.UpdateAsync(T.O("near", T.O("entity", player, "radius", 55))));
                T.Until(c, () => s.Count == 6, "five within 55 after subscribe.update");
                T.Wait(c, s.UpdateAsync(T.O("near", T.O("entity", player, "radius", 15))));
                T.Until(c, () => s.Count == 2, "one within 15");
                float[] m = new float[16];
                T.Check(s.TryGetWorld(row[0], m) && Math.Abs(m[12] - 10) < 0.001, "its translation");
                T.Check(!s.TryGetWorld(row[1], m), "20 away: out");
                T.Call(c, "transform.destroy", T.O("world", w, "entity", player));
                T.Until(c, () => !s.IsActive, "ends");
                T.Equal("center_destroyed", s.EndReason, "reason");
                T.Equal(0, s.Count, "empty");
            }
        }

        private static void PackedUpdateGrid()
        {
            using (ScenedClient c = CallTests.Connect(new ScenedOptions { Matrices = MatrixForm.B64 }))
            {
                Random r = new Random(Rand.Seed + 1);
                string w = CallTests.NewWorld(c);
                List<long> ids = Populate(c, w, r, 10, 30);
                Subscription s = T.Wait(c, c.SubscribeAsync(w, T.O("packed", T.O("step", 0.01))));
                Dictionary<long, float[]> truth = Truth(c, w, ids);
                T.Until(c, () => Mirrors(s, truth, 0.01), "on the first grid");
                T.Wait(c, s.UpdateAsync(T.O("packed", T.O("step", 0.0005, "origin", new[] { -50.0, 1, 2 }))));
                T.Equal(0.0005, s.PackedStep, "the new step, from the answer on");
                for (int round = 0; round < 3; round++)
                {
                    // every root: an entity keeps the old grid's value until it is sent again
                    List<Task<JObject>> sets = new List<Task<JObject>>();
                    for (int i = 0; i < 10; i++)
                        sets.Add(c.CallAsync("transform.set_local", Spec(r, T.O("world", w, "entity", ids[i]))));
                    foreach (Task<JObject> t in sets)
                        T.Wait(c, t);
                    truth = Truth(c, w, ids);
                    T.Until(c, () => Mirrors(s, truth, 0.0005), "round " + round + " on the new grid");
                }
                T.Equal("BAD_REQUEST", T.ErrorCode(c, s.UpdateAsync(T.O("packed", T.O("step", -1)))), "a bad grid is refused");
                T.Check(s.IsActive, "and the subscription goes on");
            }
        }

        private static void UnsubscribeStops()
        {
            using (ScenedClient c = CallTests.Connect())
            {
                string w = CallTests.NewWorld(c);
                long e = (long)T.Call(c, "transform.create", T.O("world", w))["entity"];
                Subscription s = T.Wait(c, c.SubscribeAsync(w));
                Subscription control = T.Wait(c, c.SubscribeAsync(w));
                T.Until(c, () => s.Count == 1 && control.Count == 1, "both mirrors");
                T.Wait(c, s.UnsubscribeAsync());
                T.Check(!s.IsActive && s.EndReason == "unsubscribed", "ended by us");
                long frames = s.Frames, before = control.Frames;
                T.Call(c, "transform.set_local", T.O("world", w, "entity", e, "t", new[] { 5, 0, 0 }));
                T.Until(c, () => control.Frames > before, "the control subscription sees the change");
                T.Equal(frames, s.Frames, "no frame after unsubscribe");
                T.Equal(1, s.Count, "the mirror keeps what it had");
            }
        }

        /// <summary>Frames of each form applied again and again (lines captured from the daemon) make
        /// no garbage: the heap does not grow and no collection runs.</summary>
        private static void NoGarbage()
        {
            using (ScenedClient c = CallTests.Connect(new ScenedOptions { Matrices = MatrixForm.B64 }))
            using (ScenedClient cj = CallTests.Connect())
            {
                string w = CallTests.NewWorld(c);
                long root = (long)T.Call(c, "transform.create", T.O("world", w))["entity"];
                for (int i = 0; i < 300; i++)
                    T.Call(c, "transform.create", T.O("world", w, "parent", root, "t", new[] { i, 1.5, 2 }));
                Subscription sb = T.Wait(c, c.SubscribeAsync(w));
                Subscription sp = T.Wait(c, c.SubscribeAsync(w, T.O("packed", T.O("step", 0.001))));
                Subscription sj = T.Wait(cj, cj.SubscribeAsync(w));
                T.Until(() => sb.Count == 301 && sp.Count == 301 && sj.Count == 301, "the world", c, cj);
                Capture cap = new Capture();
                c.LineTap = cap.Take;
                cj.LineTap = cap.Take;
                T.Call(c, "transform.set_local", T.O("world", w, "entity", root, "t", new[] { 1, 2, 3 }, "r", new[] { 0, 0.38268343, 0, 0.92387953 }));
                T.Until(() => cap.Delta(sb.Id, "\"ms\"") != null && cap.Delta(sp.Id, "\"packed\"") != null && cap.Delta(sj.Id, "\"set\"") != null,
                        "a delta frame of each form", c, cj);
                c.LineTap = cj.LineTap = null;
                foreach (Subscription s in new[] { sb, sp, sj })
                {
                    byte[] line = cap.Delta(s.Id, s == sb ? "\"ms\"" : s == sp ? "\"packed\"" : "\"set\"");
                    ScenedClient owner = s == sj ? cj : c;
                    for (int i = 0; i < 50; i++)
                        owner.FeedLine(s, line, 0, line.Length); // warm: arrays at their size
                    int gcs = GC.CollectionCount(0);
                    long heap = GC.GetTotalMemory(false);
                    for (int i = 0; i < 3000; i++)
                        owner.FeedLine(s, line, 0, line.Length);
                    long grew = GC.GetTotalMemory(false) - heap;
                    string form = s == sb ? "b64" : s == sp ? "packed" : "json";
                    T.Check(s.IsActive && s.Count == 301, form + ": the frame applies");
                    T.Check(GC.CollectionCount(0) == gcs && grew < 64 * 1024,
                            form + ": 3,000 frames of 301 matrices grew the heap by " + grew + " bytes, " + (GC.CollectionCount(0) - gcs) + " collections");
                }
            }
        }

        /// <summary>The lines a tap saw: the first delta frame of each subscription that holds a key.</summary>
        public sealed class Capture
        {
            private readonly List<byte[]> lines = new List<byte[]>();

            public void Take(byte[] b, int off, int len)
            {
                byte[] copy = new byte[len];
                Array.Copy(b, off, copy, 0, len);
                lock (lines)
                    lines.Add(copy);
            }

            public byte[] Delta(long sub, string key)
            {
                string head = "{\"event\":\"frame\",\"sub\":" + sub + ",";
                lock (lines)
                {
                    foreach (byte[] l in lines)
                    {
                        string s = System.Text.Encoding.UTF8.GetString(l);
                        if (s.StartsWith(head) && s.Contains("\"full\":false") && s.Contains(key))
                            return l;
                    }
                }
                return null;
            }
        }
    }
}

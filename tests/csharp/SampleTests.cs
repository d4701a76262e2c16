// The sample (client/csharp/Samples~/WorldMirror), compiled against the UnityEngine stub and run
// as Unity's player loop would run it: GameObjects appear, follow and go with the world.
using System;
using System.Collections.Generic;
using System.Threading;
using Newtonsoft.Json.Linq;
using Scened;
using UnityEngine;

namespace ScenedTests
{
    public static class SampleTests
    {
        public static void Register()
        {
            Program.Add("sample/world_mirror_packed", () => Run(0.001f));
            Program.Add("sample/world_mirror_b64", () => Run(0));
        }

        /// <summary>Whether go's transform is the world matrix m with z flipped (right-handed to
        /// Unity's left-handed), within tol.</summary>
        private static bool Placed(UnityEngine.GameObject go, float[] m, double tol)
        {
            UnityEngine.Transform t = go.transform;
            Vector3 p = t.localPosition, s = t.localScale;
            if (Math.Abs(p.x - m[12]) > tol || Math.Abs(p.y - m[13]) > tol || Math.Abs(p.z + m[14]) > tol)
                return false;
            Quaternion q = t.localRotation;
            double x = q.x, y = q.y, z = q.z, w = q.w;
            double[] r =
            {
                1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y),
                2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x),
                2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y),
            };
            double[] sc = { s.x, s.y, s.z };
            for (int j = 0; j < 3; j++)
            {
                for (int k = 0; k < 3; k++)
                {
                    double flip = (j == 2) != (k == 2) ? -1 : 1;
                    if (Math.Abs(r[3 * j + k] * sc[j] - flip * m[4 * j + k]) > 0.02)
                        return false;
                }
            }
            return true;
        }

        private static void Run(float step)
        {
            SynchronizationContext before = SynchronizationContext.Current;
            PlayerLoop loop = new PlayerLoop();
            SynchronizationContext.SetSynchronizationContext(loop);
            try
            {
                using (ScenedClient c = CallTests.Connect(new ScenedOptions { Matrices = MatrixForm.B64 }))
                {
                    string w = CallTests.NewWorld(c);
                    List<long> ids = FrameTests.Populate(c, w, new System.Random(Rand.Seed + 6), 30, 0); // roots: no shear
                    UnityEngine.GameObject root = new UnityEngine.GameObject("mirror");
                    ScenedWorldMirror mirror = root.AddComponent<ScenedWorldMirror>();
                    mirror.port = CallTests.Plain.Port;
                    mirror.world = w;
                    mirror.packedStep = step;
                    loop.Start(mirror);
                    double tol = step > 0 ? step : 1e-4;
                    Func<bool> matches = () =>
                    {
                        Dictionary<long, float[]> truth = FrameTests.Truth(c, w, ids);
                        if (mirror.Objects.Count != truth.Count)
                            return false;
                        foreach (KeyValuePair<long, float[]> kv in truth)
                        {
                            UnityEngine.GameObject go;
                            if (!mirror.Objects.TryGetValue(kv.Key, out go) || go.destroyed || !Placed(go, kv.Value, tol))
                                return false;
                        }
                        return true;
                    };
                    Frames(loop, mirror, c, matches, "a GameObject per entity, placed");
                    T.Equal(ids.Count, root.transform.children.Count, "children of the mirror's object");

                    System.Random r = new System.Random(Rand.Seed + 7);
                    for (int i = 0; i < 10; i++)
                        T.Call(c, "transform.set_local", FrameTests.Spec(r, T.O("world", w, "entity", ids[r.Next(ids.Count)])));
                    long gone = ids[ids.Count - 1];
                    UnityEngine.GameObject goneObject = mirror.Objects[gone];
                    T.Call(c, "transform.destroy", T.O("world", w, "entity", gone));
                    ids.Remove(gone);
                    Frames(loop, mirror, c, matches, "they follow the world");
                    T.Check(goneObject.destroyed, "the destroyed entity's GameObject is destroyed");

                    T.Call(c, "world.destroy", T.O("world", w));
                    Frames(loop, mirror, c, () => mirror.Objects.Count == 0, "the world's end empties the scene");
                    T.Check(mirror.Subscription.EndReason == "world_destroyed", "and says why");
                    loop.Destroy(mirror);
                }
            }
            finally
            {
                SynchronizationContext.SetSynchronizationContext(before);
            }
        }

        /// <summary>Runs frames (what was posted, then Update) until cond holds.</summary>
        private static void Frames(PlayerLoop loop, ScenedWorldMirror mirror, ScenedClient c, Func<bool> cond, string what)
        {
            System.Diagnostics.Stopwatch sw = System.Diagnostics.Stopwatch.StartNew();
            while (true)
            {
                loop.Frame(mirror);
                if (cond())
                    return;
                if (sw.ElapsedMilliseconds > T.Deadline)
                    throw new TestFailure("not within " + T.Deadline + " ms: " + what);
                c.Poll(15); // a frame's time
            }
        }
    }
}

// The packed decoder: against an encoder written from the contract (a long chain of deltas,
// raw matrices, removals, refusals that change nothing), and against the C decoder's bits
// (scenectl prints the frames it decodes) for the same world.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using Newtonsoft.Json.Linq;
using Scened;

namespace ScenedTests
{
    public static class PackedTests
    {
        public static void Register()
        {
            Program.Add("packed/decoder_chain_against_contract_encoder", Chain);
            Program.Add("packed/refusals_change_nothing", Refusals);
            Program.Add("packed/same_bits_as_the_c_decoder", SameBitsAsC);
            Program.Add("codec/base64_matrices_strict", Base64Strict);
        }

        private sealed class Held
        {
            public long[] Q;
            public bool HasQ;
            public uint Rot;
            public float[] S;
        }

        /// <summary>T * R * S from the contract's formulas, in double.</summary>
        private static double[] Expected(long[] q, uint u, float[] s, double step, double[] origin)
        {
            int big = (int)(u >> 30), shift = 20;
            double[] c = new double[4];
            double sum = 0;
            for (int i = 0; i < 4; i++)
            {
                if (i == big)
                    continue;
                c[i] = (((u >> shift) & 1023) / 511.5 - 1) / Math.Sqrt(2);
                sum += c[i] * c[i];
                shift -= 10;
            }
            c[big] = Math.Sqrt(Math.Max(0, 1 - sum));
            double n = Math.Sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + c[3] * c[3]);
            double x = c[0] / n, y = c[1] / n, z = c[2] / n, w = c[3] / n;
            double[] r =
            {
                1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y),
                2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x),
                2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y),
            };
            double[] m = new double[16];
            for (int j = 0; j < 3; j++)
            {
                for (int k = 0; k < 3; k++)
                    m[4 * j + k] = r[3 * j + k] * s[j];
                m[12 + j] = origin[j] + q[j] * step;
            }
            m[15] = 1;
            return m;
        }

        private static double[] RandomQuat(Random r)
        {
            double[] q = { r.NextDouble() * 2 - 1, r.NextDouble() * 2 - 1, r.NextDouble() * 2 - 1, r.NextDouble() * 2 - 1 };
            double n = Math.Sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
            for (int i = 0; i < 4; i++)
                q[i] /= n;
            return q;
        }

        /// <summary>1,000 payloads over 60 entities: absolute and delta translations, rotations and
        /// scales sent or left out, raw matrices, removals, full frames now and then; each decoded
        /// matrix against the contract's T * R * S.</summary>
        private static void Chain()
        {
            Random r = new Random(Rand.Seed + 2);
            double step = 0.001;
            double[] origin = { 100, -20, 0.5 };
            PackedState dec = new PackedState(step, origin[0], origin[1], origin[2]);
            FrameStage st = new FrameStage();
            Dictionary<long, Held> held = new Dictionary<long, Held>();
            long[] ids = new long[60];
            long id = 0;
            for (int i = 0; i < ids.Length; i++)
                ids[i] = id += 1 + r.Next(r.Next(3) == 0 ? 100000 : 3);
            for (int frame = 0; frame < 1000; frame++)
            {
                bool full = frame % 250 == 0;
                if (full)
                    held.Clear();
                PackedEncoder enc = new PackedEncoder();
                Dictionary<long, object> expect = new Dictionary<long, object>();
                List<long> removed = new List<long>();
                foreach (long e in ids)
                {
                    Held h;
                    held.TryGetValue(e, out h);
                    int pick = r.Next(10);
                    if (!full && h != null && pick == 0)
                    {
                        removed.Add(e);
                        held.Remove(e);
                        continue;
                    }
                    if (!full && pick < 4)
                        continue; // unchanged: not in this frame
                    if (pick == 9)
                    {
                        float[] raw = new float[16];
                        for (int k = 0; k < 16; k++)
                            raw[k] = (float)(r.NextDouble() * 10 - 5);
                        enc.Raw(e, raw);
                        expect[e] = raw;
                        held.Remove(e);
                        continue;
                    }
                    Held next = new Held { Q = new long[3], HasQ = true, S = h != null ? h.S : new float[] { 1, 1, 1 } };
                    bool sendT = h == null || !h.HasQ || r.Next(3) != 0, delta = sendT && h != null && h.HasQ && r.Next(2) == 0;
                    for (int k = 0; k < 3; k++)
                        next.Q[k] = sendT ? (long)(r.NextDouble() * 2e7 - 1e7) : h.Q[k];
                    bool sendR = h == null || r.Next(2) == 0;
                    next.Rot = sendR ? PackedEncoder.SmallestThree(RandomQuat(r)) : h.Rot;
                    int scaleKind = h == null ? r.Next(3) : r.Next(4); // 0 none, 1 uniform, 2 three, 3 left out
                    float? uni = null;
                    float[] three = null;
                    if (scaleKind == 0 && h == null)
                        next.S = new float[] { 1, 1, 1 };
                    if (scaleKind == 1)
                    {
                        uni = (float)(0.1 + r.NextDouble() * 3);
                        next.S = new[] { uni.Value, uni.Value, uni.Value };
                    }
                    if (scaleKind == 2)
                    {
                        three = new[] { -(float)(0.1 + r.NextDouble()), (float)(0.1 + r.NextDouble()), (float)(0.1 + r.NextDouble()) };
                        next.S = three;
                    }
                    long[] sent = null;
                    if (sendT)
                    {
                        sent = new long[3];
                        for (int k = 0; k < 3; k++)
                            sent[k] = delta ? next.Q[k] - h.Q[k] : next.Q[k];
                    }
                    enc.Entry(e, sent, delta, sendR ? (uint?)next.Rot : null, uni, three);
                    held[e] = next;
                    expect[e] = next;
                }
                byte[] payload = enc.Finish(removed);
                T.Check(dec.Decode(payload, payload.Length, full, st), "frame " + frame + " decodes: " + dec.Error + " at " + dec.ErrorAt);
                T.Equal(expect.Count, st.N, "frame " + frame + " entries");
                T.Equal(removed.Count, st.NRemoved, "frame " + frame + " removed");
                for (int i = 0; i < st.N; i++)
                {
                    object x = expect[st.Ids[i]];
                    float[] raw = x as float[];
                    if (raw != null)
                    {
                        for (int k = 0; k < 16; k++)
                            T.Check(st.M[16 * i + k] == raw[k], "a raw matrix as sent");
                        continue;
                    }
                    Held h = (Held)x;
                    double[] m = Expected(h.Q, h.Rot, h.S, step, origin);
                    for (int k = 0; k < 16; k++)
                        T.Check(Math.Abs(st.M[16 * i + k] - m[k]) <= 2e-6 * Math.Max(1, Math.Abs(m[k])),
                                "frame " + frame + " entity " + st.Ids[i] + " element " + k + ": " + st.M[16 * i + k] + " against " + m[k]);
                }
                T.Equal(held.Count, dec.Held, "frame " + frame + ": what the decoder holds");
            }
        }

        private static void Refusals()
        {
            PackedState dec = new PackedState(0.01, 0, 0, 0);
            FrameStage st = new FrameStage();
            uint rot = PackedEncoder.SmallestThree(new double[] { 0, 0, 0, 1 });
            PackedEncoder a = new PackedEncoder();
            a.Entry(5, new long[] { 100, 200, 300 }, false, rot, 2f, null);
            a.Entry(9, new long[] { -1, 0, 1 }, false, rot, null, null);
            byte[] first = a.Finish(new long[0]);
            T.Check(dec.Decode(first, first.Length, true, st), "the full frame");
            PackedEncoder d = new PackedEncoder();
            d.Entry(5, new long[] { 1, 1, 1 }, true, null, null, null);
            byte[] delta = d.Finish(new long[] { 9 });

            List<KeyValuePair<string, byte[]>> bad = new List<KeyValuePair<string, byte[]>>();
            for (int n = 0; n < delta.Length; n++)
            {
                byte[] cut = new byte[n];
                Array.Copy(delta, cut, n);
                bad.Add(new KeyValuePair<string, byte[]>("cut at " + n, cut));
            }
            byte[] trailing = new byte[delta.Length + 1];
            Array.Copy(delta, trailing, delta.Length);
            bad.Add(new KeyValuePair<string, byte[]>("a byte after", trailing));
            bad.Add(new KeyValuePair<string, byte[]>("a gap of 0", new byte[] { 1, 0, 1, 0, 0, 0, 0 }));
            bad.Add(new KeyValuePair<string, byte[]>("unknown flags", new byte[] { 1, 5, 64, 0 }));
            bad.Add(new KeyValuePair<string, byte[]>("raw with more", new byte[] { 1, 5, 33, 0 }));
            bad.Add(new KeyValuePair<string, byte[]>("a delta without a translation", new byte[] { 1, 5, 2, 0 }));
            bad.Add(new KeyValuePair<string, byte[]>("both scales", new byte[] { 1, 5, 24, 0, 0, 128, 63, 0, 0, 128, 63, 0, 0, 128, 63, 0, 0, 128, 63, 0 }));
            bad.Add(new KeyValuePair<string, byte[]>("a delta of an entity not held", new byte[] { 1, 7, 3, 2, 2, 2, 0 }));
            bad.Add(new KeyValuePair<string, byte[]>("a left-out rotation of an entity not held", new byte[] { 1, 7, 1, 2, 2, 2, 0 }));
            bad.Add(new KeyValuePair<string, byte[]>("a count past the payload", new byte[] { 100, 0 }));
            bad.Add(new KeyValuePair<string, byte[]>("an 11-byte varint", new byte[] { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }));
            bad.Add(new KeyValuePair<string, byte[]>("an id past 2^53", new byte[] { 0, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10 }));
            List<byte> overflow = new List<byte> { 1, 5, 3 };
            new PackedEncoder().Varint(overflow, PackedEncoder.Zigzag(long.MaxValue));
            overflow.AddRange(new byte[] { 0, 0, 0 });
            bad.Add(new KeyValuePair<string, byte[]>("a delta past 64 bits", overflow.ToArray()));
            foreach (KeyValuePair<string, byte[]> b in bad)
            {
                T.Check(!dec.Decode(b.Value, b.Value.Length, false, st), b.Key + " is refused");
                T.Check(dec.Error != null && dec.ErrorAt >= 0 && dec.ErrorAt <= b.Value.Length, b.Key + ": why and where (" + dec.Error + ")");
                T.Equal(2, dec.Held, b.Key + ": nothing changed");
            }
            T.Check(!dec.Decode(delta, delta.Length, true, st), "deltas in a full frame are refused");
            T.Check(dec.Decode(delta, delta.Length, false, st), "the good delta after every refusal");
            T.Check(st.N == 1 && st.Ids[0] == 5 && Math.Abs(st.M[12] - 1.01) < 1e-6 && Math.Abs(st.M[0] - 2) < 1e-4, "against the baseline as it was");
            T.Check(st.NRemoved == 1 && st.Removed[0] == 9 && dec.Held == 1, "9 removed");
        }

        /// <summary>"ms" decoding: every count of matrices back to the same bits, and every single
        /// character made invalid, padding made wrong or a length off by one refused.</summary>
        private static void Base64Strict()
        {
            Random r = new Random(Rand.Seed + 8);
            byte[] tail = new byte[32];
            for (int n = 0; n <= 7; n++)
            {
                float[] m = new float[16 * n], back = new float[16 * n + 16];
                for (int i = 0; i < m.Length; i++)
                    m[i] = BitConverter.ToSingle(BitConverter.GetBytes(r.Next()), 0);
                byte[] text = System.Text.Encoding.ASCII.GetBytes(Base64.EncodeMatrices(m, 0, n));
                T.Check(Base64.DecodeFloats(text, 0, text.Length, back, 16 * n, tail), n + " matrices decode");
                for (int i = 0; i < m.Length; i++)
                    T.Check(BitConverter.ToInt32(BitConverter.GetBytes(m[i]), 0) == BitConverter.ToInt32(BitConverter.GetBytes(back[i]), 0), n + " matrices: float " + i);
                for (int i = 0; i < text.Length; i++)
                {
                    byte keep = text[i];
                    foreach (byte bad in new[] { (byte)'!', (byte)'=', (byte)'"', (byte)0x80 })
                    {
                        if (bad == '=' && keep == '=')
                            continue;
                        text[i] = bad;
                        T.Check(!Base64.DecodeFloats(text, 0, text.Length, back, 16 * n, tail), n + " matrices: " + (char)bad + " at " + i + " refused");
                    }
                    text[i] = keep;
                }
                if (n > 0)
                {
                    T.Check(!Base64.DecodeFloats(text, 0, text.Length - 4, back, 16 * n, tail), "a group short");
                    T.Check(!Base64.DecodeFloats(text, 0, text.Length, back, 16 * n - 1, tail), "a float fewer");
                }
                if (64 * n % 3 != 0)
                {
                    // the character before the padding, with a bit set past the last byte
                    int last = text.Length - (64 * n % 3 == 1 ? 3 : 2);
                    byte keep = text[last];
                    const string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
                    text[last] = (byte)alphabet[alphabet.IndexOf((char)keep) ^ 1]; // its lowest bit: past the data
                    T.Check(!Base64.DecodeFloats(text, 0, text.Length, back, 16 * n, tail), "bits past the last byte");
                    text[last] = keep;
                }
            }
        }

        /// <summary>scenectl (the C library) and this client decode the same full packed frame of a
        /// still world to the same bits.</summary>
        private static void SameBitsAsC()
        {
            string scenectl = Environment.GetEnvironmentVariable("SCENECTL_BIN") ?? "build/scenectl";
            Random r = new Random(Rand.Seed + 3);
            using (ScenedClient c = CallTests.Connect(new ScenedOptions { Matrices = MatrixForm.B64 }))
            {
                string w = CallTests.NewWorld(c);
                List<long> ids = FrameTests.Populate(c, w, r, 10, 90);
                const string grid = "{\"step\":0.0005,\"origin\":[3,-4,5]}";
                Subscription s = T.Wait(c, c.SubscribeAsync(w, T.O("packed", JObject.Parse(grid))));
                T.Until(c, () => s.Count == ids.Count, "the world in the mirror");
                ProcessStartInfo si = new ProcessStartInfo(scenectl)
                { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
                si.Arguments = "--port " + CallTests.Plain.Port + " subscribe " + w + " --frames 1 \"packed=" + grid.Replace("\"", "\\\"") + "\"";
                string output, err;
                using (Process p = Process.Start(si))
                {
                    output = p.StandardOutput.ReadToEnd();
                    err = p.StandardError.ReadToEnd();
                    T.Check(p.WaitForExit(T.Deadline) && p.ExitCode == 0, "scenectl: " + err);
                }
                JObject frame = JObject.Parse(output.Trim().Split('\n')[0]);
                JArray set = (JArray)frame["set"];
                T.Equal(ids.Count, set.Count, "the frame scenectl decoded");
                float[] mine = new float[16];
                foreach (JObject e in set)
                {
                    T.Check(s.TryGetWorld((long)e["e"], mine), "the entity in the mirror");
                    float[] theirs = T.Matrix(e["m"]);
                    T.Check(T.SameBits(mine, theirs), "entity " + e["e"] + ": the same bits as the C decoder");
                }
            }
        }
    }
}

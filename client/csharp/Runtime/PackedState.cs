using System;
using System.Collections.Generic;

namespace Scened
{
    /// <summary>What a packed subscription last received per entity, on its grid (step, origin),
    /// and the decoder of its payloads (CONTRACT "Packed frames"; the C codec is proto/packed.h):
    /// varint count; per entry, in increasing id, varint id gap, u8 flags, the parts the flags
    /// name; varint removed count and the removed ids' gaps. A payload is read and checked whole
    /// before anything is applied, so a refused one changes nothing. Matrices are rebuilt as the
    /// C decoder rebuilds them (the quaternion's components rounded to float32, the rest in
    /// double, each element rounded to float32 once), so both give the same bits.</summary>
    internal sealed class PackedState
    {
        public const int FlagT = 1, FlagDelta = 2, FlagR = 4, FlagSUni = 8, FlagS = 16, FlagRaw = 32;
        public const long EntityMax = (1L << 53) - 1;

        private static readonly double[] Component = MakeComponents();

        public double Step { get; private set; }
        public double OriginX { get; private set; }
        public double OriginY { get; private set; }
        public double OriginZ { get; private set; }

        /// <summary>Why the last Decode refused its payload, and the offset of the bad value.</summary>
        public string Error { get; private set; }
        public int ErrorAt { get; private set; }

        // the baseline: entity -> slot of the arrays below; free slots on a stack
        private readonly Dictionary<long, int> index = new Dictionary<long, int>();
        private long[] q = new long[3 * 64];
        private float[] scale = new float[3 * 64];
        private uint[] rotation = new uint[64];
        private bool[] hasQ = new bool[64];
        private int[] free = new int[64];
        private int nfree, used;

        // one payload's entries, staged until all of it is read
        private long[] sq = new long[3 * 64];
        private float[] sscale = new float[3 * 64];
        private uint[] srot = new uint[64];
        private int[] sraw = new int[64]; // the offset of a raw entry's 64 bytes, -1 when not raw

        public PackedState(double step, double ox, double oy, double oz)
        {
            if (!SetGrid(step, ox, oy, oz))
                throw new ArgumentException("a packed step must be positive and finite, the origin finite");
        }

        public int Held { get { return index.Count; } }

        private static double[] MakeComponents()
        {
            double[] c = new double[1024];
            double sqrt2 = 1.4142135623730951; // proto/packed.c's SQRT2
            for (int k = 0; k < 1024; k++)
                c[k] = (k / 511.5 - 1) / sqrt2;
            return c;
        }

        private static bool Finite(double v)
        {
            return !double.IsNaN(v) && !double.IsInfinity(v);
        }

        /// <summary>A new step or origin forgets every translation (the daemon sends each absolute
        /// next time); rotations and scales stay. False, changing nothing, on a bad grid.</summary>
        public bool SetGrid(double step, double ox, double oy, double oz)
        {
            if (!(step > 0) || !Finite(step) || !Finite(ox) || !Finite(oy) || !Finite(oz))
                return false;
            if (step != Step || ox != OriginX || oy != OriginY || oz != OriginZ)
            {
                foreach (KeyValuePair<long, int> kv in index)
                    hasQ[kv.Value] = false;
            }
            Step = step;
            OriginX = ox;
            OriginY = oy;
            OriginZ = oz;
            return true;
        }

        /// <summary>Forgets every entity (a full frame, or a refused payload). Keeps the grid.</summary>
        public void Clear()
        {
            index.Clear();
            nfree = used = 0;
        }

        private bool Fail(string why, int at)
        {
            Error = why;
            ErrorAt = at;
            return false;
        }

        private bool Varint(byte[] p, int len, ref int pos, out ulong v)
        {
            v = 0;
            int start = pos;
            for (int i = 0; i < 10; i++)
            {
                if (start + i >= len)
                    return Fail("the payload ends inside a value", start);
                byte b = p[start + i];
                if (i == 9 && (b & 0x7f) > 1)
                    return Fail("a varint of more than 64 bits", start);
                v |= (ulong)(b & 0x7f) << (7 * i);
                if ((b & 0x80) == 0)
                {
                    pos = start + i + 1;
                    return true;
                }
            }
            return Fail("a varint of more than 64 bits", start);
        }

        private bool Count(byte[] p, int len, ref int pos, int minBytes, out int n)
        {
            n = 0;
            int start = pos;
            ulong v;
            if (!Varint(p, len, ref pos, out v))
                return false;
            if (v > (ulong)((len - pos) / minBytes))
                return Fail("a count larger than the payload can hold", start);
            n = (int)v;
            return true;
        }

        private bool NextId(byte[] p, int len, ref int pos, ref long id)
        {
            int start = pos;
            ulong gap;
            if (!Varint(p, len, ref pos, out gap))
                return false;
            if (gap == 0)
                return Fail("entity ids not increasing", start);
            if (gap > (ulong)(EntityMax - id))
                return Fail("an entity id past 2^53 - 1", start);
            id += (long)gap;
            return true;
        }

        private static bool FlagsValid(int flags)
        {
            if ((flags & FlagRaw) != 0)
                return flags == FlagRaw;
            return (flags & ~63) == 0 && ((flags & FlagT) != 0 || (flags & FlagDelta) == 0)
                && !((flags & FlagSUni) != 0 && (flags & FlagS) != 0);
        }

        private void StageCapacity(int n)
        {
            if (n <= srot.Length)
                return;
            int cap = srot.Length;
            while (cap < n)
                cap *= 2;
            sq = new long[3 * cap];
            sscale = new float[3 * cap];
            srot = new uint[cap];
            sraw = new int[cap];
        }

        /// <summary>Decodes len bytes of payload p against what is held (as if nothing were held
        /// when full) into stage (ids, matrices, removed) and brings the baseline up to it. False,
        /// with Error and ErrorAt, when the payload is refused: then neither the baseline nor the
        /// stage's contents mean anything changed.</summary>
        public bool Decode(byte[] p, int len, bool full, FrameStage stage)
        {
            stage.Reset();
            int pos = 0, n;
            if (!Count(p, len, ref pos, 2, out n)) // an entry is a gap and flags at least
                return false;
            stage.ReserveEntries(n);
            StageCapacity(n);
            long id = 0;
            for (int i = 0; i < n; i++)
            {
                if (!NextId(p, len, ref pos, ref id) || !Entry(p, len, ref pos, id, i, full))
                    return false;
                stage.Ids[i] = id;
            }
            int removed;
            if (!Count(p, len, ref pos, 1, out removed))
                return false;
            id = 0;
            for (int i = 0; i < removed; i++)
            {
                if (!NextId(p, len, ref pos, ref id))
                    return false;
                stage.AddRemoved(id);
            }
            if (pos != len)
                return Fail("bytes after the removed ids", pos);

            // all of it is good: the baseline, then the matrices
            if (full)
                Clear();
            for (int i = 0; i < n; i++)
            {
                if (sraw[i] >= 0)
                    Forget(stage.Ids[i]);
                else
                    Keep(stage.Ids[i], i);
            }
            for (int i = 0; i < stage.NRemoved; i++)
                Forget(stage.Removed[i]);
            for (int i = 0; i < n; i++)
            {
                if (sraw[i] >= 0)
                {
                    for (int k = 0; k < 16; k++)
                        stage.M[16 * i + k] = FloatBits.FromLittle(p, sraw[i] + 4 * k);
                }
                else
                {
                    Rebuild(i, stage.M, 16 * i);
                }
            }
            stage.N = n;
            return true;
        }

        /// <summary>One entry after its id, staged at i.</summary>
        private bool Entry(byte[] p, int len, ref int pos, long id, int i, bool full)
        {
            int at = pos;
            if (pos >= len)
                return Fail("the payload ends inside a value", pos);
            int flags = p[pos++];
            if (!FlagsValid(flags))
                return Fail("flags that name no valid entry", at);
            if (flags == FlagRaw)
            {
                if (len - pos < 64)
                    return Fail("the payload ends inside a value", pos);
                sraw[i] = pos;
                pos += 64;
                return true;
            }
            sraw[i] = -1;
            int b = -1;
            if (!full && !index.TryGetValue(id, out b))
                b = -1;
            bool needsQ = (flags & FlagT) == 0 || (flags & FlagDelta) != 0;
            if ((needsQ && (b < 0 || !hasQ[b])) || ((flags & FlagR) == 0 && b < 0))
                return Fail("a part left out or a delta for an entity without that part", at);
            int j = 3 * i;
            if ((flags & FlagT) != 0)
            {
                for (int k = 0; k < 3; k++)
                {
                    int start = pos;
                    ulong u;
                    if (!Varint(p, len, ref pos, out u))
                        return false;
                    long d = (long)(u >> 1) ^ -(long)(u & 1);
                    if ((flags & FlagDelta) != 0)
                    {
                        long baseQ = q[3 * b + k], sum = unchecked(baseQ + d);
                        if (((baseQ ^ sum) & (d ^ sum)) < 0)
                            return Fail("a translation delta out of the 64-bit range", start);
                        d = sum;
                    }
                    sq[j + k] = d;
                }
            }
            else
            {
                sq[j] = q[3 * b];
                sq[j + 1] = q[3 * b + 1];
                sq[j + 2] = q[3 * b + 2];
            }
            if ((flags & FlagR) != 0)
            {
                if (len - pos < 4)
                    return Fail("the payload ends inside a value", pos);
                srot[i] = (uint)(p[pos] | p[pos + 1] << 8 | p[pos + 2] << 16 | p[pos + 3] << 24);
                pos += 4;
            }
            else
            {
                srot[i] = rotation[b];
            }
            if ((flags & FlagSUni) != 0)
            {
                if (len - pos < 4)
                    return Fail("the payload ends inside a value", pos);
                sscale[j] = sscale[j + 1] = sscale[j + 2] = FloatBits.FromLittle(p, pos);
                pos += 4;
            }
            else if ((flags & FlagS) != 0)
            {
                if (len - pos < 12)
                    return Fail("the payload ends inside a value", pos);
                for (int k = 0; k < 3; k++)
                    sscale[j + k] = FloatBits.FromLittle(p, pos + 4 * k);
                pos += 12;
            }
            else if (b >= 0)
            {
                sscale[j] = scale[3 * b];
                sscale[j + 1] = scale[3 * b + 1];
                sscale[j + 2] = scale[3 * b + 2];
            }
            else
            {
                sscale[j] = sscale[j + 1] = sscale[j + 2] = 1;
            }
            return true;
        }

        private void Keep(long id, int i)
        {
            int s;
            if (!index.TryGetValue(id, out s))
            {
                if (nfree > 0)
                {
                    s = free[--nfree];
                }
                else
                {
                    if (used == rotation.Length)
                    {
                        int cap = 2 * rotation.Length;
                        Array.Resize(ref q, 3 * cap);
                        Array.Resize(ref scale, 3 * cap);
                        Array.Resize(ref rotation, cap);
                        Array.Resize(ref hasQ, cap);
                        Array.Resize(ref free, cap);
                    }
                    s = used++;
                }
                index.Add(id, s);
            }
            int j = 3 * i;
            q[3 * s] = sq[j];
            q[3 * s + 1] = sq[j + 1];
            q[3 * s + 2] = sq[j + 2];
            scale[3 * s] = sscale[j];
            scale[3 * s + 1] = sscale[j + 1];
            scale[3 * s + 2] = sscale[j + 2];
            rotation[s] = srot[i];
            hasQ[s] = true;
        }

        private void Forget(long id)
        {
            int s;
            if (!index.TryGetValue(id, out s))
                return;
            index.Remove(id);
            free[nfree++] = s;
        }

        /// <summary>T * R * S of staged entry i into m at o, column-major.</summary>
        private void Rebuild(int i, float[] m, int o)
        {
            uint u = srot[i];
            int big = (int)(u >> 30), shift = 20;
            double sum = 0, x = 0, y = 0, z = 0, w = 0;
            for (int c = 0; c < 4; c++)
            {
                if (c == big)
                    continue;
                double v = Component[(u >> shift) & 1023];
                double f = (float)v;
                if (c == 0) x = f; else if (c == 1) y = f; else if (c == 2) z = f; else w = f;
                sum += v * v;
                shift -= 10;
            }
            double last = (float)Math.Sqrt(Math.Max(0.0, 1 - sum));
            if (big == 0) x = last; else if (big == 1) y = last; else if (big == 2) z = last; else w = last;
            double s = 2 / (x * x + y * y + z * z + w * w);
            int j = 3 * i;
            double s0 = sscale[j], s1 = sscale[j + 1], s2 = sscale[j + 2];
            m[o] = (float)((1 - s * (y * y + z * z)) * s0);
            m[o + 1] = (float)(s * (x * y + w * z) * s0);
            m[o + 2] = (float)(s * (x * z - w * y) * s0);
            m[o + 3] = 0;
            m[o + 4] = (float)(s * (x * y - w * z) * s1);
            m[o + 5] = (float)((1 - s * (x * x + z * z)) * s1);
            m[o + 6] = (float)(s * (y * z + w * x) * s1);
            m[o + 7] = 0;
            m[o + 8] = (float)(s * (x * z + w * y) * s2);
            m[o + 9] = (float)(s * (y * z - w * x) * s2);
            m[o + 10] = (float)((1 - s * (x * x + y * y)) * s2);
            m[o + 11] = 0;
            m[o + 12] = (float)(OriginX + (double)sq[j] * Step);
            m[o + 13] = (float)(OriginY + (double)sq[j + 1] * Step);
            m[o + 14] = (float)(OriginZ + (double)sq[j + 2] * Step);
            m[o + 15] = 1;
        }
    }
}

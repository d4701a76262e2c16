// A packed payload encoder written from the contract ("Packed frames"), for the decoder's tests:
// entries in increasing id, each an id gap, flags and the parts they name; then the removed.
using System;
using System.Collections.Generic;

namespace ScenedTests
{
    public sealed class PackedEncoder
    {
        private readonly List<byte> bytes = new List<byte>();
        private long lastId;
        private int count;
        private readonly List<byte> entries = new List<byte>();

        public void Varint(List<byte> o, ulong v)
        {
            while (v >= 0x80)
            {
                o.Add((byte)(v | 0x80));
                v >>= 7;
            }
            o.Add((byte)v);
        }

        public static ulong Zigzag(long n)
        {
            return (ulong)(n << 1) ^ (ulong)(n >> 63);
        }

        private static void U32(List<byte> o, uint u)
        {
            o.Add((byte)u);
            o.Add((byte)(u >> 8));
            o.Add((byte)(u >> 16));
            o.Add((byte)(u >> 24));
        }

        private static void F32(List<byte> o, float f)
        {
            U32(o, BitConverter.ToUInt32(BitConverter.GetBytes(f), 0));
        }

        /// <summary>An entry: translation q (absolute, or a delta when delta), a rotation's smallest
        /// three, a uniform or a three-part scale, each only when given.</summary>
        public void Entry(long id, long[] q, bool delta, uint? rotation, float? uniform, float[] scale)
        {
            Varint(entries, (ulong)(id - lastId));
            lastId = id;
            count++;
            int flags = (q != null ? 1 : 0) | (delta ? 2 : 0) | (rotation.HasValue ? 4 : 0) | (uniform.HasValue ? 8 : 0) | (scale != null ? 16 : 0);
            entries.Add((byte)flags);
            if (q != null)
                foreach (long v in q)
                    Varint(entries, Zigzag(v));
            if (rotation.HasValue)
                U32(entries, rotation.Value);
            if (uniform.HasValue)
                F32(entries, uniform.Value);
            if (scale != null)
                foreach (float f in scale)
                    F32(entries, f);
        }

        public void Raw(long id, float[] m)
        {
            Varint(entries, (ulong)(id - lastId));
            lastId = id;
            count++;
            entries.Add(32);
            foreach (float f in m)
                F32(entries, f);
        }

        public byte[] Finish(IList<long> removed)
        {
            bytes.Clear();
            Varint(bytes, (ulong)count);
            bytes.AddRange(entries);
            Varint(bytes, (ulong)removed.Count);
            long prev = 0;
            foreach (long id in removed)
            {
                Varint(bytes, (ulong)(id - prev));
                prev = id;
            }
            return bytes.ToArray();
        }

        /// <summary>The smallest three of a unit quaternion (x, y, z, w), as the contract says.</summary>
        public static uint SmallestThree(double[] q)
        {
            int big = 0;
            for (int i = 1; i < 4; i++)
                if (Math.Abs(q[i]) > Math.Abs(q[big]))
                    big = i;
            double sign = q[big] < 0 ? -1 : 1;
            uint u = (uint)big << 30;
            int shift = 20;
            for (int i = 0; i < 4; i++)
            {
                if (i == big)
                    continue;
                double k = Math.Round((q[i] * sign * Math.Sqrt(2) + 1) * 511.5);
                u |= (uint)Math.Max(0, Math.Min(1023, k)) << shift;
                shift -= 10;
            }
            return u;
        }
    }
}

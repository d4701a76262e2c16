using System;
using System.Collections.Generic;

namespace Scened
{
    /// <summary>World matrices by entity: an index from entity to slot, the slots' entities and one
    /// float array of 16 floats a slot. Arrays grow by doubling and are kept, so a mirror in
    /// steady state allocates nothing; removing swaps the last slot into the hole.</summary>
    internal sealed class Mirror
    {
        private readonly Dictionary<long, int> slotOf = new Dictionary<long, int>();
        private long[] ids = new long[64];
        private float[] m = new float[64 * 16];
        private int count;

        public int Count { get { return count; } }

        public float[] Matrices { get { return m; } }

        public long EntityAt(int slot)
        {
            return ids[slot];
        }

        public bool Has(long id)
        {
            return slotOf.ContainsKey(id);
        }

        public bool TryGet(long id, float[] dst, int offset)
        {
            int s;
            if (!slotOf.TryGetValue(id, out s))
                return false;
            Array.Copy(m, 16 * s, dst, offset, 16);
            return true;
        }

        /// <summary>Room for n more slots without growing.</summary>
        public void Reserve(int n)
        {
            int need = count + n;
            if (need <= ids.Length)
                return;
            int cap = ids.Length;
            while (cap < need)
                cap *= 2;
            Array.Resize(ref ids, cap);
            Array.Resize(ref m, 16 * cap);
        }

        /// <summary>The offset in Matrices of id's matrix, with a new slot at the end when it has none.</summary>
        public int Put(long id)
        {
            int s;
            if (!slotOf.TryGetValue(id, out s))
            {
                Reserve(1);
                s = count++;
                ids[s] = id;
                slotOf.Add(id, s);
            }
            return 16 * s;
        }

        public bool Remove(long id)
        {
            int s;
            if (!slotOf.TryGetValue(id, out s))
                return false;
            int last = count - 1;
            if (s != last)
            {
                long moved = ids[last];
                ids[s] = moved;
                slotOf[moved] = s;
                Array.Copy(m, 16 * last, m, 16 * s, 16);
            }
            slotOf.Remove(id);
            count--;
            return true;
        }

        public void Clear()
        {
            slotOf.Clear();
            count = 0;
        }
    }
}

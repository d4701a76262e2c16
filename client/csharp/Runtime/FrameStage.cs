using System;

namespace Scened
{
    /// <summary>A frame read in full before any of it is applied: its entities with their world
    /// matrices (16 floats each) and its removed entities. One per client, reused from frame to
    /// frame, so a frame that turns out bad leaves the mirror as it was.</summary>
    internal sealed class FrameStage
    {
        public long[] Ids = new long[64];
        public float[] M = new float[64 * 16];
        public int N;
        public long[] Removed = new long[16];
        public int NRemoved;
        public byte[] Bytes = new byte[1024]; // a base64 field's bytes
        public byte[] Tail = new byte[32];    // the last bytes of "ms"

        public void Reset()
        {
            N = NRemoved = 0;
        }

        public void ReserveEntries(int n)
        {
            if (n <= Ids.Length)
                return;
            int cap = Ids.Length;
            while (cap < n)
                cap *= 2;
            Ids = new long[cap];
            M = new float[16 * cap];
        }

        /// <summary>Room for one more entry; its matrix goes at M[16 * N].</summary>
        public void GrowForOne()
        {
            if (N < Ids.Length)
                return;
            Array.Resize(ref Ids, 2 * Ids.Length);
            Array.Resize(ref M, 2 * M.Length);
        }

        public void AddRemoved(long id)
        {
            if (NRemoved == Removed.Length)
                Array.Resize(ref Removed, 2 * Removed.Length);
            Removed[NRemoved++] = id;
        }

        public void ReserveBytes(int n)
        {
            if (n <= Bytes.Length)
                return;
            int cap = Bytes.Length;
            while (cap < n)
                cap *= 2;
            Bytes = new byte[cap];
        }
    }
}

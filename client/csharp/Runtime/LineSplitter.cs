using System;

namespace Scened
{
    /// <summary>Cuts a connection's bytes into lines. A line that lies within one chunk is handed
    /// over where it is; one that spans chunks is gathered in a buffer kept for the next.</summary>
    internal sealed class LineSplitter
    {
        private byte[] pending = new byte[4096];
        private int pendingLen;

        public interface IHandler
        {
            void Line(Connection c, byte[] b, int off, int len);
        }

        public void Feed(Connection c, byte[] buf, int len, IHandler h)
        {
            int start = 0;
            while (start < len)
            {
                int nl = start;
                while (nl < len && buf[nl] != (byte)'\n')
                    nl++;
                if (nl == len)
                {
                    Append(buf, start, len - start);
                    return;
                }
                if (pendingLen == 0)
                {
                    Emit(c, buf, start, nl - start, h);
                }
                else
                {
                    Append(buf, start, nl - start);
                    int n = pendingLen;
                    pendingLen = 0;
                    Emit(c, pending, 0, n, h);
                }
                start = nl + 1;
            }
        }

        private static void Emit(Connection c, byte[] b, int off, int len, IHandler h)
        {
            if (len > 0 && b[off + len - 1] == '\r')
                len--;
            if (len > 0)
                h.Line(c, b, off, len);
        }

        private void Append(byte[] b, int off, int len)
        {
            if (pendingLen + len > pending.Length)
            {
                int cap = pending.Length;
                while (cap < pendingLen + len)
                    cap *= 2;
                Array.Resize(ref pending, cap);
            }
            Buffer.BlockCopy(b, off, pending, pendingLen, len);
            pendingLen += len;
        }
    }
}

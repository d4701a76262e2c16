using System;
using System.Globalization;
using System.Text;

namespace Scened
{
    /// <summary>Reads JSON values straight from the UTF-8 bytes of a line, without building
    /// objects: how frames are read without allocating. Every method leaves Pos after what it
    /// read and returns false on anything else (Pos is then unspecified).</summary>
    internal struct JsonScan
    {
        public byte[] B;
        public int Pos;
        public int End;

        private static readonly double[] Pow10 = MakePow10();

        private static double[] MakePow10()
        {
            double[] p = new double[23];
            p[0] = 1;
            for (int i = 1; i < p.Length; i++)
                p[i] = p[i - 1] * 10; // exact up to 1e22
            return p;
        }

        public JsonScan(byte[] b, int pos, int end)
        {
            B = b;
            Pos = pos;
            End = end;
        }

        public void Ws()
        {
            while (Pos < End)
            {
                byte c = B[Pos];
                if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
                    return;
                Pos++;
            }
        }

        /// <summary>Skips white space; true (and skips it) when the next byte is c.</summary>
        public bool Take(byte c)
        {
            Ws();
            if (Pos < End && B[Pos] == c)
            {
                Pos++;
                return true;
            }
            return false;
        }

        /// <summary>A string: the offset and length of what is between its quotes, and whether it
        /// holds an escape.</summary>
        public bool Str(out int start, out int len, out bool escaped)
        {
            start = len = 0;
            escaped = false;
            if (!Take((byte)'"'))
                return false;
            start = Pos;
            while (Pos < End)
            {
                byte c = B[Pos];
                if (c == '"')
                {
                    len = Pos - start;
                    Pos++;
                    return true;
                }
                if (c == '\\')
                {
                    escaped = true;
                    Pos++;
                }
                else if (c < 0x20)
                {
                    return false;
                }
                Pos++;
            }
            return false;
        }

        /// <summary>A string that holds base64 (which has no quote or escape to skip): found with a
        /// search for its closing quote rather than byte by byte. Its characters are checked when
        /// it is decoded.</summary>
        public bool Base64Str(out int start, out int len)
        {
            start = len = 0;
            if (!Take((byte)'"'))
                return false;
            start = Pos;
            int q = Array.IndexOf(B, (byte)'"', Pos, End - Pos);
            if (q < 0)
                return false;
            len = q - start;
            Pos = q + 1;
            return true;
        }

        /// <summary>Whether the len bytes at start are the ASCII text s.</summary>
        public bool Is(int start, int len, byte[] s)
        {
            if (len != s.Length)
                return false;
            for (int i = 0; i < len; i++)
                if (B[start + i] != s[i])
                    return false;
            return true;
        }

        /// <summary>true, false.</summary>
        public bool Bool(out bool v)
        {
            v = false;
            Ws();
            if (End - Pos >= 4 && B[Pos] == 't' && B[Pos + 1] == 'r' && B[Pos + 2] == 'u' && B[Pos + 3] == 'e')
            {
                Pos += 4;
                v = true;
                return true;
            }
            if (End - Pos >= 5 && B[Pos] == 'f' && B[Pos + 1] == 'a' && B[Pos + 2] == 'l' && B[Pos + 3] == 's' && B[Pos + 4] == 'e')
            {
                Pos += 5;
                return true;
            }
            return false;
        }

        /// <summary>An integer written without fraction or exponent, within a long.</summary>
        public bool Long(out long v)
        {
            v = 0;
            Ws();
            bool neg = Pos < End && B[Pos] == '-';
            if (neg)
                Pos++;
            int start = Pos;
            ulong m = 0;
            while (Pos < End && B[Pos] >= '0' && B[Pos] <= '9')
            {
                if (Pos - start >= 19)
                    return false;
                m = m * 10 + (ulong)(B[Pos] - '0');
                Pos++;
            }
            if (Pos == start || (B[start] == '0' && Pos - start > 1))
                return false;
            if (Pos < End && (B[Pos] == '.' || B[Pos] == 'e' || B[Pos] == 'E'))
                return false;
            v = neg ? -(long)m : (long)m;
            return true;
        }

        /// <summary>A JSON number as the nearest double: exact arithmetic where the digits and the
        /// exponent allow it (every float32 the daemon writes), double.Parse otherwise.</summary>
        public bool Number(out double v)
        {
            v = 0;
            Ws();
            int start = Pos;
            bool neg = Pos < End && B[Pos] == '-';
            if (neg)
                Pos++;
            ulong m = 0;
            int exp = 0, sig = 0;
            bool inexact = false;
            int intStart = Pos;
            while (Pos < End && B[Pos] >= '0' && B[Pos] <= '9')
            {
                Digit(B[Pos] - '0', ref m, ref sig, ref exp, ref inexact, false);
                Pos++;
            }
            if (Pos == intStart || (B[intStart] == '0' && Pos - intStart > 1))
                return false;
            if (Pos < End && B[Pos] == '.')
            {
                Pos++;
                int fracStart = Pos;
                while (Pos < End && B[Pos] >= '0' && B[Pos] <= '9')
                {
                    Digit(B[Pos] - '0', ref m, ref sig, ref exp, ref inexact, true);
                    Pos++;
                }
                if (Pos == fracStart)
                    return false;
            }
            if (Pos < End && (B[Pos] == 'e' || B[Pos] == 'E'))
            {
                Pos++;
                bool eneg = false;
                if (Pos < End && (B[Pos] == '+' || B[Pos] == '-'))
                    eneg = B[Pos++] == '-';
                int expStart = Pos, e = 0;
                while (Pos < End && B[Pos] >= '0' && B[Pos] <= '9')
                {
                    if (e < 100000)
                        e = e * 10 + (B[Pos] - '0');
                    Pos++;
                }
                if (Pos == expStart)
                    return false;
                exp += eneg ? -e : e;
            }
            if (m == 0)
            {
                v = neg ? -0.0 : 0.0;
                return true;
            }
            if (!inexact && m <= (1UL << 53) && exp >= -22 && exp <= 22)
            {
                // one correctly rounded operation on exact operands: the correctly rounded double
                v = exp >= 0 ? m * Pow10[exp] : m / Pow10[-exp];
                if (neg)
                    v = -v;
                return true;
            }
            string text = Encoding.ASCII.GetString(B, start, Pos - start);
            return double.TryParse(text, NumberStyles.Float, CultureInfo.InvariantCulture, out v);
        }

        private static void Digit(int d, ref ulong m, ref int sig, ref int exp, ref bool inexact, bool fraction)
        {
            if (m == 0 && d == 0)
            {
                if (fraction)
                    exp--;
                return;
            }
            if (sig < 19)
            {
                m = m * 10 + (ulong)d;
                sig++;
                if (fraction)
                    exp--;
            }
            else
            {
                if (d != 0)
                    inexact = true;
                if (!fraction)
                    exp++;
            }
        }

        /// <summary>Skips one value of any kind (strings with their escapes, nested arrays and
        /// objects), checking only that brackets and quotes close.</summary>
        public bool Skip()
        {
            Ws();
            if (Pos >= End)
                return false;
            byte c = B[Pos];
            if (c == '"')
            {
                int s, l;
                bool e;
                return Str(out s, out l, out e);
            }
            if (c != '{' && c != '[')
            {
                // a number or a literal: up to the next delimiter
                int start = Pos;
                while (Pos < End)
                {
                    c = B[Pos];
                    if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n')
                        break;
                    Pos++;
                }
                return Pos > start;
            }
            int depth = 0;
            while (Pos < End)
            {
                c = B[Pos];
                if (c == '"')
                {
                    int s, l;
                    bool e;
                    if (!Str(out s, out l, out e))
                        return false;
                    continue;
                }
                if (c == '{' || c == '[')
                    depth++;
                else if (c == '}' || c == ']')
                    depth--;
                Pos++;
                if (depth == 0)
                    return true;
            }
            return false;
        }
    }
}

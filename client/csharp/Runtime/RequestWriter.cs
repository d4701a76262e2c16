using System;
using System.Collections.Generic;
using System.Globalization;
using System.Numerics;
using System.Text;
using Newtonsoft.Json.Linq;

namespace Scened
{
    /// <summary>Writes a request line, <c>{"cmd":CMD,...fields}\n</c>, as UTF-8 into one buffer that
    /// is reused from request to request.</summary>
    internal sealed class RequestWriter
    {
        public byte[] Buf = new byte[4096];
        public int Len;

        /// <summary>The line of cmd with fields (a "cmd" among them is left out).</summary>
        public void Request(string cmd, JObject fields)
        {
            Len = 0;
            Ascii("{\"cmd\":");
            Str(cmd);
            if (fields != null)
            {
                foreach (KeyValuePair<string, JToken> p in fields)
                {
                    if (p.Key == "cmd")
                        continue;
                    Byte((byte)',');
                    Str(p.Key);
                    Byte((byte)':');
                    Value(p.Value);
                }
            }
            Ascii("}\n");
        }

        private static readonly byte[] B64Bytes = Encoding.ASCII.GetBytes("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
        private readonly byte[] raw = new byte[66]; // a matrix's 64 bytes, and 2 of padding

        private static readonly byte[] EntityKey = Encoding.ASCII.GetBytes(",\"entity\":"),
            MatrixKey = Encoding.ASCII.GetBytes(",\"matrix_b64\":\""), MatrixEnd = Encoding.ASCII.GetBytes("\"}\n");
        private string lastCmd, lastWorld;     // the head of the last SetMatrix line: {"cmd":..,"world":..
        private byte[] head = new byte[0];

        /// <summary>The line of cmd (transform.set_local or set_world) of entity in world with
        /// matrix m[offset..offset+16] as matrix_b64, written straight from the floats.</summary>
        public void SetMatrix(string cmd, string world, long entity, float[] m, int offset)
        {
            if (!ReferenceEquals(cmd, lastCmd) || !ReferenceEquals(world, lastWorld))
            {
                Len = 0;
                Ascii("{\"cmd\":");
                Str(cmd);
                Ascii(",\"world\":");
                Str(world);
                head = new byte[Len];
                Buffer.BlockCopy(Buf, 0, head, 0, Len);
                lastCmd = cmd;
                lastWorld = world;
            }
            Len = 0;
            Room(head.Length + EntityKey.Length + 20 + MatrixKey.Length + 88 + MatrixEnd.Length);
            Bytes(head);
            Bytes(EntityKey);
            Long(entity);
            Bytes(MatrixKey);
            FloatBits f = default(FloatBits);
            for (int k = 0; k < 16; k++)
            {
                f.F = m[offset + k];
                raw[4 * k] = (byte)f.U;
                raw[4 * k + 1] = (byte)(f.U >> 8);
                raw[4 * k + 2] = (byte)(f.U >> 16);
                raw[4 * k + 3] = (byte)(f.U >> 24);
            }
            raw[64] = raw[65] = 0;
            byte[] o = Buf, alphabet = B64Bytes;
            int at = Len;
            for (int i = 0; i < 66; i += 3)
            {
                int x = raw[i] << 16 | raw[i + 1] << 8 | raw[i + 2];
                o[at] = alphabet[x >> 18];
                o[at + 1] = alphabet[(x >> 12) & 63];
                o[at + 2] = alphabet[(x >> 6) & 63];
                o[at + 3] = alphabet[x & 63];
                at += 4;
            }
            o[at - 2] = o[at - 1] = (byte)'='; // 64 bytes: 21 groups and one of a single byte
            Len = at;
            Bytes(MatrixEnd);
        }

        private void Bytes(byte[] b)
        {
            Buffer.BlockCopy(b, 0, Buf, Len, b.Length);
            Len += b.Length;
        }

        private void Room(int n)
        {
            if (Len + n <= Buf.Length)
                return;
            int cap = Buf.Length;
            while (cap < Len + n)
                cap *= 2;
            Array.Resize(ref Buf, cap);
        }

        private void Byte(byte b)
        {
            Room(1);
            Buf[Len++] = b;
        }

        private void Ascii(string s)
        {
            Room(s.Length);
            for (int i = 0; i < s.Length; i++)
                Buf[Len++] = (byte)s[i];
        }

        private void Long(long v)
        {
            Room(20);
            if (v < 0)
            {
                Buf[Len++] = (byte)'-';
                if (v == long.MinValue)
                {
                    Ascii("9223372036854775808");
                    return;
                }
                v = -v;
            }
            int start = Len;
            do
            {
                Buf[Len++] = (byte)('0' + v % 10);
                v /= 10;
            } while (v != 0);
            Array.Reverse(Buf, start, Len - start);
        }

        private void Str(string s)
        {
            Room(2 + 6 * s.Length);
            Buf[Len++] = (byte)'"';
            for (int i = 0; i < s.Length; i++)
            {
                char c = s[i];
                if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\')
                {
                    Buf[Len++] = (byte)c;
                }
                else if (c == '"' || c == '\\')
                {
                    Buf[Len++] = (byte)'\\';
                    Buf[Len++] = (byte)c;
                }
                else if (c < 0x20)
                {
                    const string hex = "0123456789abcdef";
                    Buf[Len++] = (byte)'\\';
                    Buf[Len++] = (byte)'u';
                    Buf[Len++] = (byte)'0';
                    Buf[Len++] = (byte)'0';
                    Buf[Len++] = (byte)hex[c >> 4];
                    Buf[Len++] = (byte)hex[c & 15];
                }
                else if (c < 0x800)
                {
                    Buf[Len++] = (byte)(0xc0 | c >> 6);
                    Buf[Len++] = (byte)(0x80 | (c & 63));
                }
                else if (char.IsHighSurrogate(c) && i + 1 < s.Length && char.IsLowSurrogate(s[i + 1]))
                {
                    int cp = char.ConvertToUtf32(c, s[++i]);
                    Buf[Len++] = (byte)(0xf0 | cp >> 18);
                    Buf[Len++] = (byte)(0x80 | ((cp >> 12) & 63));
                    Buf[Len++] = (byte)(0x80 | ((cp >> 6) & 63));
                    Buf[Len++] = (byte)(0x80 | (cp & 63));
                }
                else if (char.IsSurrogate(c))
                {
                    throw new ArgumentException("a string with a lone surrogate cannot be sent as UTF-8");
                }
                else
                {
                    Buf[Len++] = (byte)(0xe0 | c >> 12);
                    Buf[Len++] = (byte)(0x80 | ((c >> 6) & 63));
                    Buf[Len++] = (byte)(0x80 | (c & 63));
                }
            }
            Buf[Len++] = (byte)'"';
        }

        private void Double(double d)
        {
            if (double.IsNaN(d) || double.IsInfinity(d))
                throw new ArgumentException("JSON has no non-finite numbers (" + d + ")");
            if (d == Math.Floor(d) && Math.Abs(d) < 1e15)
            {
                Long((long)d);
                return;
            }
            // "R" has missed the round trip on some runtimes: G17 always makes it
            string r = d.ToString("R", CultureInfo.InvariantCulture);
            if (double.Parse(r, CultureInfo.InvariantCulture) != d)
                r = d.ToString("G17", CultureInfo.InvariantCulture);
            Ascii(r);
        }

        private void Value(JToken t)
        {
            if (t == null)
            {
                Ascii("null");
                return;
            }
            switch (t.Type)
            {
                case JTokenType.Object:
                    {
                        Byte((byte)'{');
                        bool first = true;
                        foreach (KeyValuePair<string, JToken> p in (JObject)t)
                        {
                            if (!first)
                                Byte((byte)',');
                            first = false;
                            Str(p.Key);
                            Byte((byte)':');
                            Value(p.Value);
                        }
                        Byte((byte)'}');
                        return;
                    }
                case JTokenType.Array:
                    {
                        JArray a = (JArray)t;
                        Byte((byte)'[');
                        for (int i = 0; i < a.Count; i++)
                        {
                            if (i > 0)
                                Byte((byte)',');
                            Value(a[i]);
                        }
                        Byte((byte)']');
                        return;
                    }
                case JTokenType.Integer:
                    {
                        object v = ((JValue)t).Value;
                        if (v is BigInteger)
                            Ascii(((BigInteger)v).ToString(CultureInfo.InvariantCulture));
                        else if (v is ulong)
                            Ascii(((ulong)v).ToString(CultureInfo.InvariantCulture));
                        else
                            Long(Convert.ToInt64(v, CultureInfo.InvariantCulture));
                        return;
                    }
                case JTokenType.Float:
                    {
                        object v = ((JValue)t).Value;
                        if (v is decimal)
                            Ascii(((decimal)v).ToString(CultureInfo.InvariantCulture));
                        else
                            Double(Convert.ToDouble(v, CultureInfo.InvariantCulture));
                        return;
                    }
                case JTokenType.String:
                    Str((string)t);
                    return;
                case JTokenType.Boolean:
                    Ascii((bool)t ? "true" : "false");
                    return;
                case JTokenType.Null:
                case JTokenType.Undefined:
                    Ascii("null");
                    return;
                case JTokenType.Bytes:
                    Str(Convert.ToBase64String((byte[])((JValue)t).Value));
                    return;
                default:
                    {
                        // dates, GUIDs, URIs, time spans: their text
                        JValue jv = t as JValue;
                        if (jv == null)
                            throw new ArgumentException("a " + t.Type + " cannot be sent");
                        Str(Convert.ToString(jv.Value, CultureInfo.InvariantCulture));
                        return;
                    }
            }
        }
    }
}

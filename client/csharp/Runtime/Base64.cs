using System;
using System.Runtime.InteropServices;

namespace Scened
{
    /// <summary>Float bits without BitConverter's byte arrays (no allocation, any host order).</summary>
    [StructLayout(LayoutKind.Explicit)]
    internal struct FloatBits
    {
        [FieldOffset(0)] public uint U;
        [FieldOffset(0)] public float F;

        public static float FromLittle(byte[] b, int at)
        {
            FloatBits v = default(FloatBits);
            v.U = (uint)(b[at] | b[at + 1] << 8 | b[at + 2] << 16 | b[at + 3] << 24);
            return v.F;
        }
    }

    /// <summary>Standard base64 with padding (RFC 4648 section 4), strict: the exact length, the
    /// alphabet, the padding and no bits set past the last byte. Decodes from UTF-8 bytes of a
    /// line into caller's arrays, so that reading a frame allocates nothing.</summary>
    internal static class Base64
    {
        private const string Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        private static readonly int[] Values = MakeValues(); // -1: not in the alphabet

        private static int[] MakeValues()
        {
            int[] v = new int[256];
            for (int i = 0; i < 256; i++)
                v[i] = -1;
            for (int i = 0; i < 64; i++)
                v[Alphabet[i]] = i;
            return v;
        }

        /// <summary>The characters of the base64 of n bytes.</summary>
        public static int EncodedLength(int n)
        {
            return (n + 2) / 3 * 4;
        }

        /// <summary>The bytes held by len characters of base64 ending in src[at + len - 1], or -1
        /// when len is not a multiple of 4.</summary>
        public static int DecodedLength(byte[] src, int at, int len)
        {
            if (len % 4 != 0)
                return -1;
            if (len == 0)
                return 0;
            int pad = src[at + len - 1] == '=' ? (src[at + len - 2] == '=' ? 2 : 1) : 0;
            return len / 4 * 3 - pad;
        }

        /// <summary>Decodes len characters at src[at] into dst[0..]: false (dst partly written)
        /// when they are not exactly the strict base64 of DecodedLength bytes.</summary>
        public static bool Decode(byte[] src, int at, int len, byte[] dst)
        {
            int n = DecodedLength(src, at, len);
            if (n < 0 || dst.Length < n)
                return false;
            int full = n / 3, o = 0, i = at, bad = 0;
            int[] v = Values;
            for (int g = 0; g < full; g++, i += 4)
            {
                int a = v[src[i]], b = v[src[i + 1]], c = v[src[i + 2]], d = v[src[i + 3]];
                bad |= a | b | c | d;
                int x = a << 18 | b << 12 | c << 6 | d;
                dst[o++] = (byte)(x >> 16);
                dst[o++] = (byte)(x >> 8);
                dst[o++] = (byte)x;
            }
            int rest = n - 3 * full;
            if (rest == 1)
            {
                int a = v[src[i]], b = v[src[i + 1]];
                bad |= a | b;
                if (src[i + 2] != '=' || src[i + 3] != '=' || (b & 15) != 0)
                    return false;
                dst[o] = (byte)(a << 2 | b >> 4);
            }
            else if (rest == 2)
            {
                int a = v[src[i]], b = v[src[i + 1]], c = v[src[i + 2]];
                bad |= a | b | c;
                if (src[i + 3] != '=' || (c & 3) != 0)
                    return false;
                dst[o++] = (byte)(a << 2 | b >> 4);
                dst[o] = (byte)(b << 4 | c >> 2);
            }
            return bad >= 0;
        }

        /// <summary>Decodes len characters at src[at], the strict base64 of exactly 4 * floats bytes,
        /// into dst[0..floats) as little-endian float32, without a byte array between: blocks of 16
        /// characters make 3 floats, the last characters go through scratch (16 bytes at least).
        /// False (dst partly written) when they are not.</summary>
        public static bool DecodeFloats(byte[] src, int at, int len, float[] dst, int floats, byte[] scratch)
        {
            if (DecodedLength(src, at, len) != 4 * floats || dst.Length < floats)
                return false;
            int blocks = len >= 4 ? (len - 4) / 16 : 0; // the last group, which may be padded, is the tail's
            int[] v = Values;
            int bad = 0, i = at, f = 0;
            FloatBits fb = default(FloatBits);
            for (int k = 0; k < blocks; k++, i += 16)
            {
                int x0 = v[src[i]] << 18 | v[src[i + 1]] << 12 | v[src[i + 2]] << 6 | v[src[i + 3]];
                int x1 = v[src[i + 4]] << 18 | v[src[i + 5]] << 12 | v[src[i + 6]] << 6 | v[src[i + 7]];
                int x2 = v[src[i + 8]] << 18 | v[src[i + 9]] << 12 | v[src[i + 10]] << 6 | v[src[i + 11]];
                int x3 = v[src[i + 12]] << 18 | v[src[i + 13]] << 12 | v[src[i + 14]] << 6 | v[src[i + 15]];
                bad |= x0 | x1 | x2 | x3; // an invalid character is -1: negative whatever its place
                fb.U = (uint)(((x0 >> 16) & 255) | ((x0 >> 8) & 255) << 8 | (x0 & 255) << 16 | ((x1 >> 16) & 255) << 24);
                dst[f] = fb.F;
                fb.U = (uint)(((x1 >> 8) & 255) | (x1 & 255) << 8 | ((x2 >> 16) & 255) << 16 | ((x2 >> 8) & 255) << 24);
                dst[f + 1] = fb.F;
                fb.U = (uint)((x2 & 255) | ((x3 >> 16) & 255) << 8 | ((x3 >> 8) & 255) << 16 | (x3 & 255) << 24);
                dst[f + 2] = fb.F;
                f += 3;
            }
            if (bad < 0)
                return false;
            int rest = at + len - i;
            if (!Decode(src, i, rest, scratch))
                return false;
            for (int k = 0; f < floats; k += 4)
                dst[f++] = FloatBits.FromLittle(scratch, k);
            return true;
        }

        /// <summary>The base64 of count matrices of 16 floats from m[offset], little-endian float32.</summary>
        public static string EncodeMatrices(float[] m, int offset, int count)
        {
            int n = 64 * count;
            byte[] bytes = new byte[n];
            FloatBits f = default(FloatBits);
            for (int k = 0; k < 16 * count; k++)
            {
                f.F = m[offset + k];
                bytes[4 * k] = (byte)f.U;
                bytes[4 * k + 1] = (byte)(f.U >> 8);
                bytes[4 * k + 2] = (byte)(f.U >> 16);
                bytes[4 * k + 3] = (byte)(f.U >> 24);
            }
            char[] chars = new char[EncodedLength(n)];
            int o = 0, i = 0;
            for (; i + 3 <= n; i += 3)
            {
                int x = bytes[i] << 16 | bytes[i + 1] << 8 | bytes[i + 2];
                chars[o++] = Alphabet[x >> 18];
                chars[o++] = Alphabet[(x >> 12) & 63];
                chars[o++] = Alphabet[(x >> 6) & 63];
                chars[o++] = Alphabet[x & 63];
            }
            if (i < n)
            {
                int x = bytes[i] << 16 | (i + 1 < n ? bytes[i + 1] << 8 : 0);
                chars[o++] = Alphabet[x >> 18];
                chars[o++] = Alphabet[(x >> 12) & 63];
                chars[o++] = i + 1 < n ? Alphabet[(x >> 6) & 63] : '=';
                chars[o] = '=';
            }
            return new string(chars);
        }
    }
}

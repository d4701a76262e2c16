using System;

namespace Scened
{
    /// <summary>Matrices as the protocol writes them: 16 floats, column-major (elements 12, 13, 14
    /// are the translation), or the base64 of their little-endian float32 (88 characters).</summary>
    public static class ScenedMatrix
    {
        /// <summary>The base64 of m[offset..offset+16] for <c>matrix_b64</c>.</summary>
        public static string ToBase64(float[] m, int offset = 0)
        {
            if (m == null || m.Length - offset < 16 || offset < 0)
                throw new ArgumentException("a matrix is 16 floats");
            return Base64.EncodeMatrices(m, offset, 1);
        }

        /// <summary>Reads a base64 matrix (88 characters) into matrix16; false, changing nothing,
        /// when it is not one.</summary>
        public static bool TryFromBase64(string b64, float[] matrix16)
        {
            if (b64 == null || b64.Length != 88 || matrix16 == null || matrix16.Length < 16)
                return false;
            byte[] text = new byte[88], bytes = new byte[64];
            for (int i = 0; i < 88; i++)
            {
                char c = b64[i];
                if (c > 127)
                    return false;
                text[i] = (byte)c;
            }
            if (!Base64.Decode(text, 0, 88, bytes))
                return false;
            for (int k = 0; k < 16; k++)
                matrix16[k] = FloatBits.FromLittle(bytes, 4 * k);
            return true;
        }
    }
}

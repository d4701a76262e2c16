using System;

namespace Scened
{
    /// <summary>The top level of an event line, read from its bytes: which event, its sub, tick and
    /// full, and where its set, ids, ms, packed and removed values lie (-1: absent).</summary>
    internal struct EventLine
    {
        public bool Ok;      // it has "ok": a response, not an event
        public bool IsFrame; // "event":"frame"
        public bool HasSub;
        public long Sub;
        public long Tick;
        public bool Full;
        public int Set, Ids, Removed;
        public int Ms, MsLen, Packed, PackedLen;
    }

    /// <summary>Reads frame lines (json, b64 and packed) into a FrameStage without building JSON
    /// objects, as the C library reads b64 frames.</summary>
    internal static class FrameReader
    {
        private static readonly byte[] KEvent = Ascii("event"), KFrame = Ascii("frame"), KSub = Ascii("sub"),
            KTick = Ascii("tick"), KFull = Ascii("full"), KSet = Ascii("set"), KIds = Ascii("ids"), KMs = Ascii("ms"),
            KPacked = Ascii("packed"), KRemoved = Ascii("removed"), KOk = Ascii("ok"), KE = Ascii("e"), KM = Ascii("m");
        private static readonly byte[] EventPrefix = Ascii("{\"event\":");

        private static byte[] Ascii(string s)
        {
            byte[] b = new byte[s.Length];
            for (int i = 0; i < s.Length; i++)
                b[i] = (byte)s[i];
            return b;
        }

        /// <summary>Whether the line starts as the daemon starts its events.</summary>
        public static bool LooksLikeEvent(byte[] b, int off, int len)
        {
            if (len < EventPrefix.Length)
                return false;
            for (int i = 0; i < EventPrefix.Length; i++)
                if (b[off + i] != EventPrefix[i])
                    return false;
            return true;
        }

        /// <summary>The top-level members of an object line; false when it is not one.</summary>
        public static bool Scan(byte[] b, int off, int len, out EventLine e)
        {
            e = new EventLine { Set = -1, Ids = -1, Removed = -1, Ms = -1, Packed = -1 };
            JsonScan s = new JsonScan(b, off, off + len);
            if (!s.Take((byte)'{'))
                return false;
            if (s.Take((byte)'}'))
                return true;
            while (true)
            {
                int ks, kl, vs, vl;
                bool esc;
                if (!s.Str(out ks, out kl, out esc) || !s.Take((byte)':'))
                    return false;
                s.Ws();
                if (s.Is(ks, kl, KEvent))
                {
                    if (!s.Str(out vs, out vl, out esc))
                        return false;
                    e.IsFrame = s.Is(vs, vl, KFrame);
                }
                else if (s.Is(ks, kl, KSub))
                {
                    if (!s.Long(out e.Sub))
                        return false;
                    e.HasSub = true;
                }
                else if (s.Is(ks, kl, KTick))
                {
                    if (!s.Long(out e.Tick))
                        return false;
                }
                else if (s.Is(ks, kl, KFull))
                {
                    if (!s.Bool(out e.Full))
                        return false;
                }
                else if (s.Is(ks, kl, KMs) || s.Is(ks, kl, KPacked))
                {
                    bool ms = s.Is(ks, kl, KMs);
                    if (!s.Base64Str(out vs, out vl))
                        return false;
                    if (ms)
                    {
                        e.Ms = vs;
                        e.MsLen = vl;
                    }
                    else
                    {
                        e.Packed = vs;
                        e.PackedLen = vl;
                    }
                }
                else
                {
                    int at = s.Pos;
                    if (s.Is(ks, kl, KSet))
                        e.Set = at;
                    else if (s.Is(ks, kl, KIds))
                        e.Ids = at;
                    else if (s.Is(ks, kl, KRemoved))
                        e.Removed = at;
                    else if (s.Is(ks, kl, KOk))
                        e.Ok = true;
                    if (!s.Skip())
                        return false;
                }
                if (s.Take((byte)','))
                    continue;
                if (!s.Take((byte)'}'))
                    return false;
                s.Ws();
                return s.Pos == s.End;
            }
        }

        /// <summary>An array of entity ids at pos, each handed to add; an error or null.</summary>
        private static string IdArray(byte[] b, int pos, int end, FrameStage st, bool removed)
        {
            JsonScan s = new JsonScan(b, pos, end);
            if (!s.Take((byte)'['))
                return "an id list that is not an array";
            if (s.Take((byte)']'))
                return null;
            while (true)
            {
                long id;
                if (!s.Long(out id) || id <= 0)
                    return "an entity id that is not a positive integer";
                if (removed)
                {
                    st.AddRemoved(id);
                }
                else
                {
                    st.GrowForOne();
                    st.Ids[st.N++] = id;
                }
                if (s.Take((byte)','))
                    continue;
                return s.Take((byte)']') ? null : "an id list that does not close";
            }
        }

        /// <summary>A frame's "removed" into the stage; an error or null.</summary>
        public static string ReadRemoved(byte[] b, int end, ref EventLine e, FrameStage st)
        {
            return e.Removed < 0 ? null : IdArray(b, e.Removed, end, st, true);
        }

        /// <summary>A b64 frame's "ids" and "ms" into the stage; an error or null.</summary>
        public static string ReadB64(byte[] b, int end, ref EventLine e, FrameStage st)
        {
            string err = IdArray(b, e.Ids, end, st, false);
            if (err != null)
                return err;
            int bytes = 64 * st.N;
            if (e.MsLen != Base64.EncodedLength(bytes) || Base64.DecodedLength(b, e.Ms, e.MsLen) != bytes)
                return "\"ms\" is not the base64 of " + st.N + " matrices";
            if (!Base64.DecodeFloats(b, e.Ms, e.MsLen, st.M, 16 * st.N, st.Tail))
                return "\"ms\" is not base64";
            return null;
        }

        /// <summary>A json frame's "set" ([{"e":id,"m":[16 numbers]}...]) into the stage; an error or null.</summary>
        public static string ReadSet(byte[] b, int end, ref EventLine e, FrameStage st)
        {
            JsonScan s = new JsonScan(b, e.Set, end);
            if (!s.Take((byte)'['))
                return "\"set\" is not an array";
            if (s.Take((byte)']'))
                return null;
            while (true)
            {
                st.GrowForOne();
                int at = 16 * st.N;
                long id = 0;
                bool haveM = false;
                if (!s.Take((byte)'{'))
                    return "an entry of \"set\" that is not an object";
                while (true)
                {
                    int ks, kl;
                    bool esc;
                    if (!s.Str(out ks, out kl, out esc) || !s.Take((byte)':'))
                        return "an entry of \"set\" that does not parse";
                    if (s.Is(ks, kl, KE))
                    {
                        if (!s.Long(out id) || id <= 0)
                            return "an entity id that is not a positive integer";
                    }
                    else if (s.Is(ks, kl, KM))
                    {
                        if (!s.Take((byte)'['))
                            return "a matrix that is not an array";
                        for (int k = 0; k < 16; k++)
                        {
                            double v;
                            if ((k > 0 && !s.Take((byte)',')) || !s.Number(out v))
                                return "a matrix that is not 16 numbers";
                            st.M[at + k] = (float)v;
                        }
                        if (!s.Take((byte)']'))
                            return "a matrix that is not 16 numbers";
                        haveM = true;
                    }
                    else if (!s.Skip())
                    {
                        return "an entry of \"set\" that does not parse";
                    }
                    if (s.Take((byte)','))
                        continue;
                    if (!s.Take((byte)'}'))
                        return "an entry of \"set\" that does not close";
                    break;
                }
                if (id <= 0 || !haveM)
                    return "an entry of \"set\" without \"e\" or \"m\"";
                st.Ids[st.N++] = id;
                if (s.Take((byte)','))
                    continue;
                return s.Take((byte)']') ? null : "\"set\" does not close";
            }
        }

        /// <summary>A packed frame's payload (the base64 of "packed") into st.Bytes: its length, or -1.</summary>
        public static int PackedPayload(byte[] b, ref EventLine e, FrameStage st)
        {
            int n = Base64.DecodedLength(b, e.Packed, e.PackedLen);
            if (n < 0)
                return -1;
            st.ReserveBytes(n);
            return Base64.Decode(b, e.Packed, e.PackedLen, st.Bytes) ? n : -1;
        }
    }
}

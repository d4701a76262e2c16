using System;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;

namespace Scened
{
    /// <summary>A subscription to a world (its whole scope, a subtree with <c>root</c>, or a region with
    /// <c>near</c>) and the mirror of the world matrices its frames bring, kept in Poll: json, b64 and
    /// packed frames fill the same mirror. A full frame replaces the mirror; a delta sets and removes.
    /// Everything here is read and raised on the thread that calls <see cref="ScenedClient.Poll()"/>.</summary>
    public sealed class Subscription
    {
        private readonly ScenedClient client;
        private readonly Mirror mirror = new Mirror();
        private long[] changed = new long[64], removed = new long[16], previous = new long[64];
        private int nchanged, nremoved;

        internal Connection Conn;
        internal readonly JObject Request; // the subscribe fields, world included, for a move
        internal PackedState Packed;

        /// <summary>The daemon's id of this subscription (a new one after a move to another daemon).</summary>
        public long Id { get; internal set; }

        public string World { get; private set; }

        /// <summary>The tick of the last frame applied (0 before the first).</summary>
        public long Tick { get; private set; }

        /// <summary>Frames applied so far.</summary>
        public long Frames { get; private set; }

        /// <summary>Entities in the mirror.</summary>
        public int Count { get { return mirror.Count; } }

        /// <summary>Null while the subscription runs; then why it ended: <c>unsubscribed</c> (by
        /// <see cref="UnsubscribeAsync"/>), <c>world_destroyed</c>, <c>root_destroyed</c>,
        /// <c>center_destroyed</c>, <c>unauthorized</c>, <c>moved</c> (the world moved and
        /// subscribing on its new owner failed), <c>bad_frame</c> (see <see cref="Error"/>),
        /// <c>closed</c> (the connection).</summary>
        public string EndReason { get; private set; }

        /// <summary>What ended it, for <c>bad_frame</c>, <c>moved</c> and <c>closed</c>.</summary>
        public ScenedException Error { get; private set; }

        public bool IsActive { get { return EndReason == null; } }

        /// <summary>The packed step, or NaN when the frames are not packed.</summary>
        public double PackedStep { get { return Packed != null ? Packed.Step : double.NaN; } }

        /// <summary>Raised in Poll after each frame has been applied to the mirror.</summary>
        public event Action<Subscription> FrameReceived;

        /// <summary>Raised in Poll once, when the subscription ends (<see cref="EndReason"/>). When its
        /// scope is gone (world_destroyed, root_destroyed, center_destroyed) the mirror is empty by
        /// then, and <see cref="RemovedAt"/> lists what it held.</summary>
        public event Action<Subscription> Ended;

        internal Subscription(ScenedClient client, string world, JObject request)
        {
            this.client = client;
            World = world;
            Request = request;
        }

        /// <summary>Copies the world matrix of entity (16 floats, column-major) into matrix16; false
        /// when the mirror does not hold it.</summary>
        public bool TryGetWorld(long entity, float[] matrix16)
        {
            if (matrix16 == null || matrix16.Length < 16)
                throw new ArgumentException("a matrix is 16 floats");
            return mirror.TryGet(entity, matrix16, 0);
        }

        /// <summary>The entity in slot i of the mirror (0 to Count - 1); slots move when an entity is
        /// removed, so read them between frames.</summary>
        public long EntityAt(int i)
        {
            if ((uint)i >= (uint)mirror.Count)
                throw new ArgumentOutOfRangeException("i");
            return mirror.EntityAt(i);
        }

        /// <summary>The world matrix in slot i into matrix16.</summary>
        public void GetWorldAt(int i, float[] matrix16)
        {
            if ((uint)i >= (uint)mirror.Count)
                throw new ArgumentOutOfRangeException("i");
            Array.Copy(mirror.Matrices, 16 * i, matrix16, 0, 16);
        }

        /// <summary>Whether the last frame was full (it replaced the mirror).</summary>
        public bool LastFrameFull { get; private set; }

        /// <summary>The entities the last frame set (in FrameReceived: the frame just applied).</summary>
        public int ChangedCount { get { return nchanged; } }

        public long ChangedAt(int i)
        {
            if ((uint)i >= (uint)nchanged)
                throw new ArgumentOutOfRangeException("i");
            return changed[i];
        }

        /// <summary>The entities the last frame took out of the mirror: its <c>removed</c>, and after a
        /// full frame those it no longer holds.</summary>
        public int RemovedCount { get { return nremoved; } }

        public long RemovedAt(int i)
        {
            if ((uint)i >= (uint)nremoved)
                throw new ArgumentOutOfRangeException("i");
            return removed[i];
        }

        /// <summary>Sends <c>subscribe.update</c> with fields (<c>near</c>, <c>packed</c>: the protocol's);
        /// no full frame follows. A new packed grid applies from the frame after the answer.</summary>
        public Task<JObject> UpdateAsync(JObject fields)
        {
            return client.Update(this, fields);
        }

        /// <summary>Ends the subscription (at once: no frame is applied after this) and tells the daemon.</summary>
        public Task UnsubscribeAsync()
        {
            return client.Unsubscribe(this);
        }

        internal void Apply(FrameStage st, bool full, long tick)
        {
            nremoved = 0;
            int nprev = 0;
            if (full)
            {
                nprev = mirror.Count;
                if (previous.Length < nprev)
                    previous = new long[Math.Max(nprev, 2 * previous.Length)];
                for (int i = 0; i < nprev; i++)
                    previous[i] = mirror.EntityAt(i);
                mirror.Clear();
            }
            mirror.Reserve(st.N);
            if (changed.Length < st.N)
                changed = new long[Math.Max(st.N, 2 * changed.Length)];
            for (int i = 0; i < st.N; i++)
            {
                int at = mirror.Put(st.Ids[i]);
                Array.Copy(st.M, 16 * i, mirror.Matrices, at, 16);
                changed[i] = st.Ids[i];
            }
            nchanged = st.N;
            for (int i = 0; i < st.NRemoved; i++)
            {
                if (mirror.Remove(st.Removed[i]))
                    AddRemoved(st.Removed[i]);
            }
            for (int i = 0; i < nprev; i++)
            {
                if (!mirror.Has(previous[i]))
                    AddRemoved(previous[i]);
            }
            LastFrameFull = full;
            Tick = tick;
            Frames++;
            Action<Subscription> h = FrameReceived;
            if (h != null)
                client.Raise(h, this);
        }

        private void AddRemoved(long id)
        {
            if (nremoved == removed.Length)
                Array.Resize(ref removed, 2 * removed.Length);
            removed[nremoved++] = id;
        }

        /// <summary>Ends it once; dropMirror empties the mirror (its scope is gone). Returns
        /// whether it was still running.</summary>
        internal bool End(string reason, bool dropMirror, ScenedException error)
        {
            if (EndReason != null)
                return false;
            EndReason = reason;
            Error = error;
            if (Conn != null)
            {
                Subscription mine;
                if (Conn.Subs.TryGetValue(Id, out mine) && mine == this)
                    Conn.Subs.Remove(Id);
            }
            nchanged = 0;
            nremoved = 0;
            if (dropMirror)
            {
                for (int i = 0; i < mirror.Count; i++)
                    AddRemoved(mirror.EntityAt(i));
                mirror.Clear();
                if (Packed != null)
                    Packed.Clear();
            }
            Action<Subscription> h = Ended;
            if (h != null)
                client.Raise(h, this);
            return true;
        }
    }
}

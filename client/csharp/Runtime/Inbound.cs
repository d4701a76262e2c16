using System;
using System.Collections.Generic;
using System.Threading;

namespace Scened
{
    /// <summary>What the connections' reader threads received, in order, for the client's thread
    /// to take in Poll: chunks of bytes (from a pool of reused buffers) and closes.</summary>
    internal sealed class Inbound
    {
        public const int ChunkSize = 65536;
        private const int PoolMax = 64; // chunks kept for reuse; more are left to the collector

        public struct Item
        {
            public Connection Conn;
            public byte[] Buf; // null: the connection closed
            public int Len;
            public Exception Error;
        }

        private readonly object sync = new object();
        private Queue<Item> queue = new Queue<Item>();
        private readonly Stack<byte[]> pool = new Stack<byte[]>();
        private bool waiting;

        public bool Waiting
        {
            get
            {
                lock (sync)
                    return queue.Count > 0;
            }
        }

        public byte[] Rent()
        {
            lock (sync)
            {
                if (pool.Count > 0)
                    return pool.Pop();
            }
            return new byte[ChunkSize];
        }

        public void Return(byte[] chunk)
        {
            if (chunk.Length != ChunkSize)
                return;
            lock (sync)
            {
                if (pool.Count < PoolMax)
                    pool.Push(chunk);
            }
        }

        public void Push(Connection c, byte[] buf, int len)
        {
            Add(new Item { Conn = c, Buf = buf, Len = len });
        }

        public void PushClose(Connection c, Exception e)
        {
            Add(new Item { Conn = c, Error = e });
        }

        private void Add(Item item)
        {
            lock (sync)
            {
                queue.Enqueue(item);
                if (waiting)
                    Monitor.PulseAll(sync);
            }
        }

        /// <summary>Swaps what has arrived into drain (which must be empty), waiting up to
        /// waitMs for something when nothing has.</summary>
        public void Take(ref Queue<Item> drain, int waitMs)
        {
            lock (sync)
            {
                if (queue.Count == 0 && waitMs > 0)
                {
                    waiting = true;
                    Monitor.Wait(sync, waitMs);
                    waiting = false;
                }
                Queue<Item> t = queue;
                queue = drain;
                drain = t;
            }
        }

        /// <summary>Wakes a Take that waits (Dispose).</summary>
        public void Wake()
        {
            lock (sync)
                Monitor.PulseAll(sync);
        }
    }
}

using System;
using System.Collections.Generic;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using Newtonsoft.Json.Linq;

namespace Scened
{
    /// <summary>One TCP (or TLS) connection to one daemon. Its two threads only move bytes: the
    /// reader hands what arrives to the client's inbound queue, the writer sends what the
    /// client's thread appended; everything else (lines, answers, frames) happens in
    /// <see cref="ScenedClient.Poll()"/>.</summary>
    internal sealed class Connection
    {
        public readonly string Host;
        public readonly int Port;
        public readonly string Addr;

        // the Poll thread's own
        public readonly Queue<PendingCall> Awaiting = new Queue<PendingCall>();
        public readonly Dictionary<long, Subscription> Subs = new Dictionary<long, Subscription>();
        public readonly LineSplitter Lines = new LineSplitter();
        public bool Gone; // its close was handled
        public string MatricesForm = "json";
        public bool FollowerReads; // hello's answer had "follower_reads": true

        private readonly Inbound inbound;
        private readonly ScenedOptions options;
        private readonly Tls tls;
        private Socket socket;
        private Stream stream;

        // appended by the client's thread, sent by the writer
        private const int Linger = 16; // yields of the writer before it takes what was queued
        private readonly object outLock = new object();
        private byte[] outBuf = new byte[16384], spare = new byte[16384];
        private int outLen;
        private bool closing;

        public Connection(string host, int port, ScenedOptions options, Tls tls, Inbound inbound)
        {
            Host = host;
            Port = port;
            Addr = host.IndexOf(':') >= 0 ? "[" + host + "]:" + port : host + ":" + port;
            this.options = options;
            this.tls = tls;
            this.inbound = inbound;
        }

        /// <summary>Connects, says hello when a token, b64 matrices or follower reads are wanted,
        /// and starts the threads; throws a ScenedException (CLOSED, TIMEOUT, TLS, or hello's error).</summary>
        public void Open()
        {
            int ms = (int)Math.Min(int.MaxValue, Math.Max(1, options.Timeout.TotalMilliseconds));
            try
            {
                socket = ConnectSocket(ms);
                socket.NoDelay = true;
                socket.ReceiveTimeout = socket.SendTimeout = ms;
                Stream s = new NetworkStream(socket, true);
                stream = tls != null ? tls.Wrap(s, Host) : s;
                Hello();
                socket.ReceiveTimeout = socket.SendTimeout = 0;
            }
            catch (Exception e)
            {
                Close();
                if (e is ScenedException)
                    throw;
                if (e is IOException && e.InnerException is SocketException &&
                    ((SocketException)e.InnerException).SocketErrorCode == SocketError.TimedOut)
                    throw new ScenedException("TIMEOUT", Addr + " did not answer hello in time", null, e);
                throw new ScenedException("CLOSED", "cannot connect to " + Addr + ": " + e.Message, null, e);
            }
            lock (outLock)
            {
                if (closing)
                    throw new ScenedException("CLOSED", "the client was closed while connecting to " + Addr);
            }
            Thread reader = new Thread(ReadLoop) { IsBackground = true, Name = "scened reader " + Addr };
            Thread writer = new Thread(WriteLoop) { IsBackground = true, Name = "scened writer " + Addr };
            reader.Start();
            writer.Start();
        }

        private Socket ConnectSocket(int ms)
        {
            IPAddress[] addrs = Dns.GetHostAddresses(Host);
            Exception last = null;
            foreach (IPAddress a in addrs)
            {
                Socket sock = new Socket(a.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
                try
                {
                    IAsyncResult ar = sock.BeginConnect(a, Port, null, null);
                    if (!ar.AsyncWaitHandle.WaitOne(ms))
                    {
                        sock.Close();
                        throw new ScenedException("TIMEOUT", "connecting to " + Addr + " took longer than " + ms + " ms");
                    }
                    sock.EndConnect(ar);
                    return sock;
                }
                catch (SocketException e)
                {
                    sock.Close();
                    last = e;
                }
            }
            throw new ScenedException("CLOSED", "cannot connect to " + Addr + ": " +
                                      (last != null ? last.Message : "no address"), null, last);
        }

        /// <summary>hello with the token, the matrix form and follower reads, before any other
        /// request; its answer is read here, and anything after it goes to the inbound queue.
        /// Every connection says it, those opened to follow a MOVED too.</summary>
        private void Hello()
        {
            bool b64 = options.Matrices == MatrixForm.B64;
            if (options.Token == null && !b64 && !options.FollowerReads)
                return;
            JObject fields = new JObject();
            if (options.Token != null)
                fields["token"] = options.Token;
            if (b64)
                fields["matrices"] = "b64";
            if (options.FollowerReads)
                fields["follower_reads"] = true;
            RequestWriter w = new RequestWriter();
            w.Request("hello", fields);
            stream.Write(w.Buf, 0, w.Len);
            byte[] buf = new byte[4096];
            int len = 0, nl = -1;
            while (nl < 0)
            {
                if (len == buf.Length)
                    Array.Resize(ref buf, 2 * len);
                int n = stream.Read(buf, len, buf.Length - len);
                if (n <= 0)
                    throw new ScenedException("CLOSED", Addr + " closed the connection before answering hello");
                len += n;
                nl = Array.IndexOf(buf, (byte)'\n', 0, len);
            }
            JObject r = Json.Parse(Encoding.UTF8.GetString(buf, 0, nl));
            if (r == null || (r["ok"] == null))
                throw new ScenedException("CLOSED", Addr + " did not answer hello");
            if (!(bool)r["ok"])
                throw ScenedException.FromResponse(r);
            MatricesForm = (string)r["matrices"] ?? (b64 ? "b64" : "json");
            JToken fr = r["follower_reads"];
            FollowerReads = fr != null && fr.Type == JTokenType.Boolean && (bool)fr;
            if (nl + 1 < len)
            {
                byte[] rest = new byte[len - nl - 1];
                Array.Copy(buf, nl + 1, rest, 0, rest.Length);
                inbound.Push(this, rest, rest.Length);
            }
        }

        /// <summary>Queues a request's bytes; the writer sends them once connected.</summary>
        public void Send(byte[] b, int len)
        {
            lock (outLock)
            {
                if (closing)
                    return; // its call fails when the close is handled
                if (outLen + len > outBuf.Length)
                {
                    int cap = outBuf.Length;
                    while (cap < outLen + len)
                        cap *= 2;
                    Array.Resize(ref outBuf, cap);
                }
                Buffer.BlockCopy(b, 0, outBuf, outLen, len);
                bool wake = outLen == 0;
                outLen += len;
                if (wake)
                    Monitor.Pulse(outLock);
            }
        }

        private void WriteLoop()
        {
            try
            {
                while (true)
                {
                    int n;
                    lock (outLock)
                    {
                        while (outLen == 0 && !closing)
                            Monitor.Wait(outLock);
                        if (closing)
                            return;
                    }
                    // a burst of calls is being made: let it gather for a few microseconds, so that
                    // it goes out in one write rather than one write a call
                    for (int i = 0; i < Linger && Volatile.Read(ref outLen) < 16384; i++)
                        Thread.Yield();
                    lock (outLock)
                    {
                        byte[] t = outBuf;
                        outBuf = spare;
                        spare = t;
                        n = outLen;
                        outLen = 0;
                    }
                    stream.Write(spare, 0, n);
                }
            }
            catch (Exception e)
            {
                Fail(e);
            }
        }

        private void ReadLoop()
        {
            try
            {
                while (true)
                {
                    byte[] chunk = inbound.Rent();
                    int n = stream.Read(chunk, 0, chunk.Length);
                    if (n <= 0)
                    {
                        inbound.Return(chunk);
                        Fail(null);
                        return;
                    }
                    inbound.Push(this, chunk, n);
                }
            }
            catch (Exception e)
            {
                Fail(e);
            }
        }

        /// <summary>The connection ended (e null: the daemon closed it); the client hears of it
        /// once, after every byte that came before.</summary>
        public void Fail(Exception e)
        {
            bool first;
            lock (outLock)
            {
                first = !closing;
                closing = true;
                Monitor.PulseAll(outLock);
            }
            if (first)
            {
                inbound.PushClose(this, e);
                CloseSocket();
            }
        }

        /// <summary>Closes from the client's side (Dispose, or a connection it no longer wants).</summary>
        public void Close()
        {
            lock (outLock)
            {
                closing = true;
                Monitor.PulseAll(outLock);
            }
            CloseSocket();
        }

        private void CloseSocket()
        {
            try
            {
                if (stream != null)
                    stream.Dispose();
                else if (socket != null)
                    socket.Close();
            }
            catch (Exception)
            {
                // closing what is already broken
            }
        }
    }
}

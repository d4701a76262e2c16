// The processes the tests start: daemons (build/scened, SCENED_BIN) on port 0, a real etcd on
// free loopback ports, and certificates from scripts/tls-certs.sh. Every one is stopped at the
// end (run.sh also ends the whole process group).
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Text.RegularExpressions;
using System.Threading;

namespace ScenedTests
{
    public sealed class Daemon
    {
        public Process Proc;
        public int Port;
        public readonly StringBuilder Log = new StringBuilder();
        private readonly object sync = new object();

        public string LogText { get { lock (sync) return Log.ToString(); } }

        public void Stop()
        {
            Daemons.Stop(Proc);
        }

        public void Line(string s)
        {
            if (s == null)
                return;
            lock (sync)
            {
                Log.AppendLine(s);
                Monitor.PulseAll(sync);
            }
        }

        /// <summary>Waits until the log matches pattern; its first group.</summary>
        public string WaitFor(string pattern, int ms)
        {
            Regex re = new Regex(pattern);
            Stopwatch sw = Stopwatch.StartNew();
            lock (sync)
            {
                while (true)
                {
                    Match m = re.Match(Log.ToString());
                    if (m.Success)
                        return m.Groups[1].Value;
                    long left = ms - sw.ElapsedMilliseconds;
                    if (left <= 0 || Proc.HasExited)
                        throw new TestFailure("the daemon did not log /" + pattern + "/; its log:\n" + Log);
                    Monitor.Wait(sync, (int)Math.Min(left, 100));
                }
            }
        }
    }

    public static class Daemons
    {
        private static readonly List<Process> Started = new List<Process>();
        private static readonly List<string> Dirs = new List<string>();
        private static readonly Random PortRand = new Random();

        public static string Bin(string env, string fallback)
        {
            return Environment.GetEnvironmentVariable(env) ?? fallback;
        }

        public static string Repo { get { return Bin("SCENED_REPO", "."); } }

        private static Process Spawn(string file, IList<string> args, Action<string> line)
        {
            StringBuilder a = new StringBuilder();
            foreach (string s in args)
                a.Append(a.Length > 0 ? " " : "").Append('"').Append(s.Replace("\"", "\\\"")).Append('"');
            ProcessStartInfo si = new ProcessStartInfo(file, a.ToString())
            {
                UseShellExecute = false, RedirectStandardError = true, RedirectStandardOutput = true,
            };
            Process p = new Process { StartInfo = si };
            p.ErrorDataReceived += (o, e) => line(e.Data);
            p.OutputDataReceived += (o, e) => line(e.Data);
            p.Start();
            p.BeginErrorReadLine();
            p.BeginOutputReadLine();
            lock (Started)
                Started.Add(p);
            return p;
        }

        /// <summary>A daemon on a free port, with args (--http off unless args give --http).</summary>
        public static Daemon Start(params string[] args)
        {
            List<string> all = new List<string> { "--listen", "127.0.0.1:0", "--log-level", "info" };
            if (Array.IndexOf(args, "--http") < 0)
                all.AddRange(new[] { "--http", "off" });
            all.AddRange(args);
            Daemon d = new Daemon();
            d.Proc = Spawn(Bin("SCENED_BIN", "build/scened"), all, d.Line);
            d.Port = int.Parse(d.WaitFor(@"listening on 127\.0\.0\.1:(\d+)", T.Deadline));
            return d;
        }

        public static void Stop(Process p)
        {
            if (p == null)
                return;
            try
            {
                if (!p.HasExited)
                {
                    Process.Start(new ProcessStartInfo("kill", "-TERM " + p.Id) { UseShellExecute = false }).WaitForExit();
                    if (!p.WaitForExit(10000))
                        p.Kill();
                }
                p.WaitForExit();
            }
            catch (InvalidOperationException)
            {
                // it was never started or is reaped already
            }
        }

        public static void StopAll()
        {
            List<Process> all;
            lock (Started)
            {
                all = new List<Process>(Started);
                Started.Clear();
            }
            for (int i = all.Count - 1; i >= 0; i--)
                Stop(all[i]);
            foreach (string d in Dirs)
            {
                try
                {
                    Directory.Delete(d, true);
                }
                catch (IOException)
                {
                }
            }
        }

        public static string TempDir(string what)
        {
            string d = Path.Combine(Path.GetTempPath(), "scened-cs-" + what + "-" + Process.GetCurrentProcess().Id + "-" + Guid.NewGuid().ToString("N").Substring(0, 8));
            Directory.CreateDirectory(d);
            Dirs.Add(d);
            return d;
        }

        /// <summary>A loopback port nothing listens on, below the kernel's ephemeral range (as
        /// tests/fixtures/etcd.c picks etcd's), so no port-0 listener can take it meanwhile.</summary>
        public static int FreePort()
        {
            int low = 32768;
            try
            {
                low = int.Parse(File.ReadAllText("/proc/sys/net/ipv4/ip_local_port_range").Split('\t', ' ')[0]);
            }
            catch (Exception)
            {
            }
            if (low <= 2048)
                low = 32768;
            for (int i = 0; i < 1000; i++)
            {
                int port;
                lock (PortRand)
                    port = 1024 + PortRand.Next(low - 1024);
                TcpListener l = new TcpListener(IPAddress.Loopback, port);
                try
                {
                    l.Start();
                    l.Stop();
                    return port;
                }
                catch (SocketException)
                {
                }
            }
            throw new TestFailure("no free port");
        }

        /// <summary>The status line and body of GET path on 127.0.0.1:port, or null.</summary>
        public static string HttpGet(int port, string path)
        {
            try
            {
                using (TcpClient c = new TcpClient())
                {
                    c.Connect(IPAddress.Loopback, port);
                    NetworkStream s = c.GetStream();
                    byte[] req = Encoding.ASCII.GetBytes("GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
                    s.Write(req, 0, req.Length);
                    return new StreamReader(s).ReadToEnd();
                }
            }
            catch (Exception)
            {
                return null;
            }
        }

        /// <summary>A real etcd on free loopback ports with fast elections; its client URL.</summary>
        public static string StartEtcd()
        {
            string dir = TempDir("etcd");
            int port = FreePort(), peer = FreePort();
            string url = "http://127.0.0.1:" + port, peerUrl = "http://127.0.0.1:" + peer;
            Daemon log = new Daemon();
            log.Proc = Spawn("etcd", new[] { "--name", "t", "--data-dir", dir + "/data", "--listen-client-urls", url,
                "--advertise-client-urls", url, "--listen-peer-urls", peerUrl, "--initial-advertise-peer-urls", peerUrl,
                "--initial-cluster", "t=" + peerUrl, "--heartbeat-interval", "10", "--election-timeout", "100" }, s => { });
            Stopwatch sw = Stopwatch.StartNew();
            while (true)
            {
                string r = HttpGet(port, "/health");
                if (r != null && r.Contains("true"))
                    return url;
                if (sw.ElapsedMilliseconds > T.Deadline || log.Proc.HasExited)
                    throw new TestFailure("etcd did not start on " + url);
                Thread.Sleep(20);
            }
        }

        /// <summary>A CA and a server certificate (RSA: Mono's TLS takes no ECDSA) in a new directory.</summary>
        public static string MakeCerts()
        {
            string dir = TempDir("tls");
            ProcessStartInfo si = new ProcessStartInfo(Path.Combine(Repo, "scripts/tls-certs.sh"), "\"" + dir + "\"")
            {
                UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true,
            };
            si.EnvironmentVariables["TLS_CERT_KEY"] = "rsa";
            using (Process p = Process.Start(si))
            {
                string err = p.StandardError.ReadToEnd() + p.StandardOutput.ReadToEnd();
                p.WaitForExit();
                T.Check(p.ExitCode == 0, "scripts/tls-certs.sh failed: " + err);
            }
            return dir;
        }
    }
}

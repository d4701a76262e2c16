// TLS: a daemon with RSA certificates from scripts/tls-certs.sh (Mono's TLS takes no ECDSA);
// the client checks the daemon's certificate against TlsCaFile.
using System;
using System.Collections.Generic;
using System.IO;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Scened;

namespace ScenedTests
{
    public static class TlsTests
    {
        public static void Register()
        {
            Program.Add("tls/calls_and_frames", CallsAndFrames);
            Program.Add("tls/untrusted_refused", Untrusted);
        }

        private static Daemon Start(out string dir)
        {
            dir = Daemons.MakeCerts();
            return Daemons.Start("--tls-cert", Path.Combine(dir, "server.pem"), "--tls-key", Path.Combine(dir, "server.key"));
        }

        private static void CallsAndFrames()
        {
            string dir;
            Daemon d = Start(out dir);
            try
            {
                ScenedOptions o = new ScenedOptions { TlsCaFile = Path.Combine(dir, "ca.pem"), Matrices = MatrixForm.B64 };
                foreach (string host in new[] { "127.0.0.1", "localhost" })
                {
                    using (ScenedClient c = ScenedClient.Connect(host, d.Port, o))
                    {
                        string w = CallTests.NewWorld(c);
                        List<long> ids = FrameTests.Populate(c, w, new Random(Rand.Seed + 4), 5, 45);
                        Subscription s = T.Wait(c, c.SubscribeAsync(w, T.O("packed", T.O("step", 0.001))));
                        // requests and frames both ways at once
                        List<Task<JObject>> sets = new List<Task<JObject>>();
                        Random r = new Random(Rand.Seed + 5);
                        for (int i = 0; i < 2000; i++)
                            sets.Add(c.CallAsync("transform.set_local", FrameTests.Spec(r, T.O("world", w, "entity", ids[r.Next(ids.Count)]))));
                        foreach (Task<JObject> t in sets)
                            T.Wait(c, t);
                        Dictionary<long, float[]> truth = FrameTests.Truth(c, w, ids);
                        T.Until(c, () => FrameTests.Mirrors(s, truth, 0.001), "the mirror over TLS (" + host + ")");
                    }
                }
            }
            finally
            {
                d.Stop();
            }
        }

        private static void Untrusted()
        {
            string dir;
            Daemon d = Start(out dir);
            try
            {
                string other = Daemons.MakeCerts();
                try
                {
                    ScenedClient.Connect("127.0.0.1", d.Port, new ScenedOptions { TlsCaFile = Path.Combine(other, "ca.pem") }).Dispose();
                    T.Check(false, "another CA's certificate is refused");
                }
                catch (ScenedException e)
                {
                    T.Equal("TLS", e.Code, "code");
                }
                try
                {
                    ScenedClient.Connect("127.0.0.1", d.Port, new ScenedOptions { Tls = true }).Dispose();
                    T.Check(false, "a test CA is not among the system's");
                }
                catch (ScenedException e)
                {
                    T.Equal("TLS", e.Code, "code");
                }
                try
                {
                    ScenedClient.Connect("127.0.0.1", d.Port, new ScenedOptions { Matrices = MatrixForm.B64, Timeout = TimeSpan.FromSeconds(5) }).Dispose();
                    T.Check(false, "plain text on a TLS port gets no answer");
                }
                catch (ScenedException e)
                {
                    T.Check(e.Code == "CLOSED" || e.Code == "TIMEOUT", "closed or timed out: " + e.Code);
                }
            }
            finally
            {
                d.Stop();
            }
        }
    }
}

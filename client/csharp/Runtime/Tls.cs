using System;
using System.IO;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Authentication;
using System.Security.Cryptography.X509Certificates;
using System.Text;

namespace Scened
{
    /// <summary>TLS for a connection: SslStream with the daemon's certificate checked against the
    /// CA of <see cref="ScenedOptions.TlsCaFile"/> (or the system's), and the host name.</summary>
    internal sealed class Tls
    {
        private readonly X509Certificate2Collection cas; // null: the system's CAs

        public Tls(string caFile)
        {
            if (caFile != null)
                cas = ReadPem(caFile);
        }

        /// <summary>The certificates of a PEM file; at least one, else an exception.</summary>
        public static X509Certificate2Collection ReadPem(string path)
        {
            string text = File.ReadAllText(path, Encoding.ASCII);
            const string begin = "-----BEGIN CERTIFICATE-----", end = "-----END CERTIFICATE-----";
            X509Certificate2Collection certs = new X509Certificate2Collection();
            int at = 0;
            while ((at = text.IndexOf(begin, at, StringComparison.Ordinal)) >= 0)
            {
                int start = at + begin.Length, stop = text.IndexOf(end, start, StringComparison.Ordinal);
                if (stop < 0)
                    break;
                certs.Add(new X509Certificate2(Convert.FromBase64String(text.Substring(start, stop - start))));
                at = stop + end.Length;
            }
            if (certs.Count == 0)
                throw new ScenedException("TLS", path + " holds no PEM certificate");
            return certs;
        }

        public Stream Wrap(Stream plain, string host)
        {
            SslStream ssl = new SslStream(plain, false, Validate);
            try
            {
                ssl.AuthenticateAsClient(host, null, SslProtocols.Tls12, false);
            }
            catch (Exception e)
            {
                ssl.Dispose();
                if (e is IOException && e.InnerException is SocketException &&
                    ((SocketException)e.InnerException).SocketErrorCode == SocketError.TimedOut)
                    throw new ScenedException("TIMEOUT", "the TLS handshake with " + host + " timed out", null, e);
                throw new ScenedException("TLS", "the TLS handshake with " + host + " failed: " + e.Message, null, e);
            }
            return ssl;
        }

        private bool Validate(object sender, X509Certificate certificate, X509Chain chain, SslPolicyErrors errors)
        {
            if (cas == null)
                return errors == SslPolicyErrors.None;
            if (certificate == null || (errors & (SslPolicyErrors.RemoteCertificateNotAvailable |
                                                  SslPolicyErrors.RemoteCertificateNameMismatch)) != 0)
                return false;
            // the chain against our CA alone: an unknown root is allowed, and must then be ours
            using (X509Chain own = new X509Chain())
            {
                own.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck;
                own.ChainPolicy.VerificationFlags = X509VerificationFlags.AllowUnknownCertificateAuthority;
                own.ChainPolicy.ExtraStore.AddRange(cas);
                if (!own.Build(new X509Certificate2(certificate)))
                    return false;
                X509Certificate2 root = own.ChainElements[own.ChainElements.Count - 1].Certificate;
                foreach (X509Certificate2 ca in cas)
                {
                    if (ca.Thumbprint == root.Thumbprint)
                        return true;
                }
                return false;
            }
        }
    }
}

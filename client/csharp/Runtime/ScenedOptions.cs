using System;

namespace Scened
{
    /// <summary>How the daemon sends this client matrices (the <c>hello</c> field <c>matrices</c>).</summary>
    public enum MatrixForm
    {
        /// <summary>Arrays of 16 numbers (the protocol's default).</summary>
        Json,
        /// <summary>The base64 of 16 little-endian float32: exact to the bit and cheaper to read.</summary>
        B64,
    }

    /// <summary>How <see cref="ScenedClient.Connect"/> connects. Every member may be left out.</summary>
    public sealed class ScenedOptions
    {
        /// <summary>The daemon's token (<c>--auth-token</c>, or an access list's); sent in <c>hello</c>.</summary>
        public string Token { get; set; }

        /// <summary>How the daemon sends matrices; <see cref="MatrixForm.Json"/> by default.</summary>
        public MatrixForm Matrices { get; set; }

        /// <summary>Speak TLS (1.2). Without <see cref="TlsCaFile"/> the daemon's certificate is
        /// checked against the system's CAs.</summary>
        public bool Tls { get; set; }

        /// <summary>A PEM file of the CA that signed the daemon's certificate; implies <see cref="Tls"/>.
        /// The certificate must also name the host connected to.</summary>
        public string TlsCaFile { get; set; }

        /// <summary>How long connecting may take: the TCP connection, the TLS handshake and the
        /// <c>hello</c> answer (10 seconds by default).</summary>
        public TimeSpan Timeout { get; set; }

        /// <summary>Ask for reads from followers (<c>hello</c>'s <c>follower_reads</c>; false by
        /// default): in a cluster with replicas, a daemon that follows a world's group answers
        /// <c>transform.get</c>, <c>.children</c>, <c>.find</c>, <c>.relative</c> and <c>subscribe</c>
        /// from its copy, which may lag the owner by what is in flight, instead of <c>MOVED</c>;
        /// writes are still sent on to the owner. Said on every connection the client opens.</summary>
        public bool FollowerReads { get; set; }

        public ScenedOptions()
        {
            Matrices = MatrixForm.Json;
            Timeout = TimeSpan.FromSeconds(10);
        }

        internal ScenedOptions Copy()
        {
            return (ScenedOptions)MemberwiseClone();
        }
    }
}

using System;
using Newtonsoft.Json.Linq;

namespace Scened
{
    /// <summary>An error answer from the daemon, or a connection this client lost.</summary>
    /// <remarks><see cref="Code"/> is the protocol's error code (<c>NOT_FOUND</c>, <c>BAD_REQUEST</c>,
    /// <c>MOVED</c>, ...) for an answer, and one of the client's own for the rest: <c>CLOSED</c>
    /// (the connection is gone or could not be made), <c>TIMEOUT</c> (connecting took longer than
    /// <see cref="ScenedOptions.Timeout"/>), <c>TLS</c> (the handshake or the certificate failed),
    /// <c>BAD_FRAME</c> (a frame this client cannot read; see <see cref="Subscription.Error"/>).</remarks>
    public class ScenedException : Exception
    {
        /// <summary>The error code.</summary>
        public string Code { get; private set; }

        /// <summary>The whole error answer, or null for the client's own errors.</summary>
        public JObject Response { get; private set; }

        public ScenedException(string code, string message)
            : this(code, message, null, null)
        {
        }

        public ScenedException(string code, string message, JObject response, Exception inner)
            : base(code + ": " + message, inner)
        {
            Code = code;
            Response = response;
        }

        internal static ScenedException FromResponse(JObject response)
        {
            JObject err = response["error"] as JObject;
            string code = "INTERNAL", message = "error answer without an error object";
            if (err != null)
            {
                code = (string)err["code"] ?? code;
                message = (string)err["message"] ?? "";
            }
            return new ScenedException(code, message, response, null);
        }
    }
}

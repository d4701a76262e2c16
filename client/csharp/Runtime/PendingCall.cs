using System;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;

namespace Scened
{
    /// <summary>A request sent and not yet completed. Its answer is read in Poll; it completes, in
    /// the order the requests were made, once every earlier one has.</summary>
    internal sealed class PendingCall
    {
        public enum Kinds
        {
            Call,        // CallAsync: the answer
            Subscribe,   // SubscribeAsync: a Subscription made as the answer is read
            Update,      // Subscription.UpdateAsync: a new packed grid as the answer is read
            Unsubscribe, // Subscription.UnsubscribeAsync
            Resubscribe, // the client's own, after a "moved" event: no task
            SetMatrix,   // SetLocalAsync, SetWorldAsync: no JObject either way unless it fails
        }

        public Kinds Kind;
        public string Cmd;
        public JObject Fields;
        public long Entity;    // SetMatrix: the entity and a copy of its matrix
        public float[] Matrix;
        public string World; // where MOVED may send it; null: it stays where it was sent
        public int Hops;
        public Connection Conn;
        public Subscription Sub;
        public TaskCompletionSource<JObject> Task;
        public TaskCompletionSource<Subscription> SubTask;

        public bool Done;
        public JObject Result;
        public Exception Error;
    }
}

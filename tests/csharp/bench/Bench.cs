// The C# client's benchmark (scripts/bench-csharp.sh runs it under Mono beside scene-bench):
//   set_b64: transform.set_local with matrix_b64 from one connection, PIPELINE calls in flight
//            (as scene-bench -c 1 -P PIPELINE -t set_b64): calls/s
//   decode:  frames of 10,000 changed transforms (a root moved under 9,999 children), captured
//            from the daemon in each form, applied to a subscription's mirror again and again:
//            frames/s, matrices/s, and the bytes the heap grew per frame
// Usage: mono scened-bench.exe set_b64|decode --port P [--requests N] [--pipeline P] [--seconds S]
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Text;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Scened;

public static class Bench
{
    private static int port = 7878, requests = 200000, pipeline = 64;
    private static double seconds = 2;

    public static int Main(string[] args)
    {
        string test = args.Length > 0 ? args[0] : "";
        for (int i = 1; i + 1 < args.Length; i += 2)
        {
            if (args[i] == "--port") port = int.Parse(args[i + 1]);
            else if (args[i] == "--requests") requests = int.Parse(args[i + 1]);
            else if (args[i] == "--pipeline") pipeline = int.Parse(args[i + 1]);
            else if (args[i] == "--seconds") seconds = double.Parse(args[i + 1], System.Globalization.CultureInfo.InvariantCulture);
        }
        if (test == "set_b64")
            return SetB64(false);
        if (test == "set_b64_jobject")
            return SetB64(true);
        if (test == "decode")
            return Decode();
        Console.Error.WriteLine("usage: scened-bench.exe set_b64|decode --port P [--requests N] [--pipeline P] [--seconds S]");
        return 2;
    }

    private static JObject O(params object[] kv)
    {
        JObject o = new JObject();
        for (int i = 0; i < kv.Length; i += 2)
            o[(string)kv[i]] = JToken.FromObject(kv[i + 1]);
        return o;
    }

    private static T Wait<T>(ScenedClient c, Task<T> t)
    {
        Stopwatch sw = Stopwatch.StartNew();
        while (!t.IsCompleted)
        {
            if (sw.ElapsedMilliseconds > 30000)
                throw new TimeoutException("no answer in 30 s");
            c.Poll(10);
        }
        return t.GetAwaiter().GetResult();
    }

    private static string NewWorld(ScenedClient c, string what)
    {
        string w = "csbench-" + Process.GetCurrentProcess().Id + "-" + what;
        Wait(c, c.CallAsync("world.create", O("world", w)));
        return w;
    }

    /// <summary>PIPELINE calls in flight from one connection, each with a matrix that changes from
    /// call to call: SetLocalAsync (the matrix written as base64 straight into the request), or
    /// with jobject a CallAsync whose JObject holds ScenedMatrix.ToBase64's string, as an
    /// application would write either; their answers read in Poll.</summary>
    private static int SetB64(bool jobject)
    {
        using (ScenedClient c = ScenedClient.Connect("127.0.0.1", port))
        {
            string w = NewWorld(c, "set_b64");
            JArray ids = (JArray)Wait(c, c.CallAsync("entity.create", O("count", 1000)))["entities"];
            List<Task<JObject>> made = new List<Task<JObject>>();
            foreach (JToken e in ids)
                made.Add(c.CallAsync("transform.create", O("world", w, "entity", (long)e)));
            foreach (Task<JObject> t in made)
                Wait(c, t);
            long[] ents = new long[ids.Count];
            for (int i = 0; i < ents.Length; i++)
                ents[i] = (long)ids[i];
            float[] m = { 0.8f, 0.6f, 0, 0, -0.6f, 0.8f, 0, 0, 0, 0, 1, 0, 0, 2.25f, -3.125f, 1 };
            Queue<Task> inFlight = new Queue<Task>();
            long errors = 0;
            int issued = 0;
            Stopwatch sw = Stopwatch.StartNew();
            while (issued < requests || inFlight.Count > 0)
            {
                while (inFlight.Count < pipeline && issued < requests)
                {
                    m[12] = issued % 100000 + 0.5f;
                    if (jobject)
                    {
                        JObject f = new JObject();
                        f["world"] = w;
                        f["entity"] = ents[issued % ents.Length];
                        f["matrix_b64"] = ScenedMatrix.ToBase64(m);
                        inFlight.Enqueue(c.CallAsync("transform.set_local", f));
                    }
                    else
                    {
                        inFlight.Enqueue(c.SetLocalAsync(w, ents[issued % ents.Length], m));
                    }
                    issued++;
                }
                c.Poll(1);
                while (inFlight.Count > 0 && inFlight.Peek().IsCompleted)
                {
                    if (!inFlight.Dequeue().Status.Equals(TaskStatus.RanToCompletion))
                        errors++;
                }
            }
            double secs = sw.Elapsed.TotalSeconds;
            Wait(c, c.CallAsync("world.destroy", O("world", w)));
            Console.WriteLine("{\"test\":\"csharp_set_b64" + (jobject ? "_jobject" : "") + "\",\"pipeline\":" + pipeline + ",\"requests\":" + requests +
                              ",\"seconds\":" + secs.ToString("F3") + ",\"ops/s\":" + (requests / secs).ToString("F0") +
                              ",\"errors\":" + errors + "}");
            return errors == 0 ? 0 : 1;
        }
    }

    private sealed class Capture
    {
        public readonly List<byte[]> Lines = new List<byte[]>();

        public void Take(byte[] b, int off, int len)
        {
            byte[] copy = new byte[len];
            Array.Copy(b, off, copy, 0, len);
            Lines.Add(copy);
        }

        /// <summary>The first frame of sub holding n entities that is full (or not).</summary>
        public byte[] Frame(long sub, bool full, string key, int n)
        {
            string head = "{\"event\":\"frame\",\"sub\":" + sub + ",";
            foreach (byte[] l in Lines)
            {
                string s = Encoding.UTF8.GetString(l);
                if (s.StartsWith(head) && s.Contains(full ? "\"full\":true" : "\"full\":false") && s.Contains(key))
                    return l;
            }
            return null;
        }
    }

    /// <summary>Frames of 10,000 transforms in each form, captured and applied again and again.</summary>
    private static int Decode()
    {
        using (ScenedClient cb = ScenedClient.Connect("127.0.0.1", port, new ScenedOptions { Matrices = MatrixForm.B64 }))
        using (ScenedClient cj = ScenedClient.Connect("127.0.0.1", port))
        {
            const int n = 10000;
            string w = NewWorld(cb, "decode");
            long root = (long)Wait(cb, cb.CallAsync("transform.create", O("world", w)))["entity"];
            List<Task<JObject>> made = new List<Task<JObject>>();
            Random r = new Random(1);
            for (int i = 1; i < n; i++)
                made.Add(cb.CallAsync("transform.create", O("world", w, "parent", root,
                    "t", new[] { r.NextDouble() * 1000 - 500, r.NextDouble() * 10, r.NextDouble() * 1000 - 500 },
                    "r", new[] { 0, Math.Sin(i * 0.001), 0, Math.Cos(i * 0.001) })));
            foreach (Task<JObject> t in made)
                Wait(cb, t);
            Capture cap = new Capture();
            cb.LineTap = cap.Take;
            cj.LineTap = cap.Take;
            Subscription sb = Wait(cb, cb.SubscribeAsync(w));
            Subscription sp = Wait(cb, cb.SubscribeAsync(w, O("packed", O("step", 0.001))));
            Subscription sj = Wait(cj, cj.SubscribeAsync(w));
            Stopwatch sw = Stopwatch.StartNew();
            while (sb.Count < n || sp.Count < n || sj.Count < n)
            {
                if (sw.ElapsedMilliseconds > 30000)
                    throw new TimeoutException("the full frames did not come");
                cb.Poll(10);
                cj.Poll(0);
            }
            Wait(cb, cb.CallAsync("transform.set_local", O("world", w, "entity", root, "t", new[] { 1.5, 2, 3 },
                                                         "r", new[] { 0, 0.38268343, 0, 0.92387953 })));
            sw.Restart();
            while (sb.Frames < 2 || sp.Frames < 2 || sj.Frames < 2)
            {
                if (sw.ElapsedMilliseconds > 30000)
                    throw new TimeoutException("the delta frames did not come");
                cb.Poll(10);
                cj.Poll(0);
            }
            cb.LineTap = cj.LineTap = null;
            int status = 0;
            foreach (KeyValuePair<string, Subscription> form in new[] {
                new KeyValuePair<string, Subscription>("b64", sb), new KeyValuePair<string, Subscription>("packed", sp),
                new KeyValuePair<string, Subscription>("json", sj) })
            {
                Subscription s = form.Value;
                ScenedClient owner = s == sj ? cj : cb;
                string key = s == sb ? "\"ms\"" : s == sp ? "\"packed\"" : "\"set\"";
                byte[] line = cap.Frame(s.Id, false, key, n);
                if (line == null)
                {
                    Console.Error.WriteLine("no delta frame captured for " + form.Key);
                    status = 1;
                    continue;
                }
                for (int i = 0; i < 20; i++)
                    owner.FeedLine(s, line, 0, line.Length);
                int gcs = GC.CollectionCount(0);
                long heap = GC.GetTotalMemory(false);
                long frames = 0;
                sw.Restart();
                while (sw.Elapsed.TotalSeconds < seconds)
                {
                    for (int i = 0; i < 10; i++)
                        owner.FeedLine(s, line, 0, line.Length);
                    frames += 10;
                }
                double secs = sw.Elapsed.TotalSeconds;
                long grew = GC.GetTotalMemory(false) - heap;
                int collections = GC.CollectionCount(0) - gcs;
                if (!s.IsActive || s.ChangedCount != n)
                {
                    Console.Error.WriteLine(form.Key + ": the frame did not apply (" + s.EndReason + ")");
                    status = 1;
                }
                Console.WriteLine("{\"test\":\"csharp_decode\",\"form\":\"" + form.Key + "\",\"transforms\":" + n +
                                  ",\"frame_bytes\":" + line.Length + ",\"frames/s\":" + (frames / secs).ToString("F1") +
                                  ",\"matrices/s\":" + (frames * n / secs).ToString("F0") + ",\"gen0_collections\":" + collections +
                                  ",\"heap_growth_per_frame\":" + (collections == 0 ? (grew / (double)frames).ToString("F1") : "null") + "}");
            }
            Wait(cb, cb.CallAsync("world.destroy", O("world", w)));
            return status;
        }
    }
}

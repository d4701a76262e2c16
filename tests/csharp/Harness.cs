// The C# client's tests: each runs against real daemons (tests/csharp/run.sh builds and starts
// this program; it starts the daemons and etcd itself, on loopback ports). Prints one line a
// test and a closing "N passed, N failed"; exits 1 on any failure.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Scened;

namespace ScenedTests
{
    public sealed class TestFailure : Exception
    {
        public TestFailure(string message) : base(message) { }
    }

    public static class T
    {
        public const int Deadline = 15000; // ms: generous, the machine is shared

        public static void Check(bool cond, string what)
        {
            if (!cond)
                throw new TestFailure(what);
        }

        public static void Equal<V>(V expected, V actual, string what)
        {
            if (!EqualityComparer<V>.Default.Equals(expected, actual))
                throw new TestFailure(what + ": expected " + expected + ", got " + actual);
        }

        /// <summary>Polls c until task completes (its result), or fails after the deadline.</summary>
        public static R Wait<R>(ScenedClient c, Task<R> task, int ms = Deadline)
        {
            Stopwatch sw = Stopwatch.StartNew();
            while (!task.IsCompleted)
            {
                if (sw.ElapsedMilliseconds > ms)
                    throw new TestFailure("no answer within " + ms + " ms");
                c.Poll(20);
            }
            return task.GetAwaiter().GetResult();
        }

        public static void Wait(ScenedClient c, Task task, int ms = Deadline)
        {
            Stopwatch sw = Stopwatch.StartNew();
            while (!task.IsCompleted)
            {
                if (sw.ElapsedMilliseconds > ms)
                    throw new TestFailure("no answer within " + ms + " ms");
                c.Poll(20);
            }
            task.GetAwaiter().GetResult();
        }

        /// <summary>Waits, without polling, until bytes have arrived for c's Poll.</summary>
        public static void Arrive(ScenedClient c)
        {
            Stopwatch sw = Stopwatch.StartNew();
            while (!c.Arrived)
            {
                if (sw.ElapsedMilliseconds > Deadline)
                    throw new TestFailure("nothing arrived within " + Deadline + " ms");
                Thread.Sleep(1);
            }
        }

        /// <summary>Polls every client until cond holds, or fails naming what after the deadline.</summary>
        public static void Until(Func<bool> cond, string what, params ScenedClient[] cs)
        {
            Stopwatch sw = Stopwatch.StartNew();
            while (!cond())
            {
                if (sw.ElapsedMilliseconds > Deadline)
                    throw new TestFailure("not within " + Deadline + " ms: " + what);
                for (int i = 0; i < cs.Length; i++)
                    cs[i].Poll(i == 0 ? 10 : 0);
            }
        }

        /// <summary>Polls c until cond holds, or fails naming what after the deadline.</summary>
        public static void Until(ScenedClient c, Func<bool> cond, string what, int ms = Deadline)
        {
            Stopwatch sw = Stopwatch.StartNew();
            while (!cond())
            {
                if (sw.ElapsedMilliseconds > ms)
                    throw new TestFailure("not within " + ms + " ms: " + what);
                c.Poll(20);
            }
        }

        /// <summary>The ScenedException a call fails with (its code), or a failure when it succeeds.</summary>
        public static string ErrorCode<R>(ScenedClient c, Task<R> task)
        {
            try
            {
                Wait(c, task);
            }
            catch (ScenedException e)
            {
                return e.Code;
            }
            throw new TestFailure("the call succeeded");
        }

        public static JObject Call(ScenedClient c, string cmd, JObject fields = null)
        {
            return Wait(c, c.CallAsync(cmd, fields));
        }

        public static JObject O(params object[] kv)
        {
            JObject o = new JObject();
            for (int i = 0; i < kv.Length; i += 2)
                o[(string)kv[i]] = kv[i + 1] == null ? JValue.CreateNull() : JToken.FromObject(kv[i + 1]);
            return o;
        }

        public static float[] Matrix(JToken t)
        {
            float[] m = new float[16];
            if (t.Type == JTokenType.String)
                Check(ScenedMatrix.TryFromBase64((string)t, m), "a base64 matrix");
            else
                for (int i = 0; i < 16; i++)
                    m[i] = (float)(double)t[i];
            return m;
        }

        public static bool SameBits(float[] a, float[] b)
        {
            for (int i = 0; i < 16; i++)
                if (BitConverter.ToInt32(BitConverter.GetBytes(a[i]), 0) != BitConverter.ToInt32(BitConverter.GetBytes(b[i]), 0))
                    return false;
            return true;
        }
    }

    public static class Program
    {
        private static readonly List<KeyValuePair<string, Action>> Tests = new List<KeyValuePair<string, Action>>();

        public static void Add(string name, Action test)
        {
            Tests.Add(new KeyValuePair<string, Action>(name, test));
        }

        public static int Main(string[] args)
        {
            string filter = args.Length > 0 ? args[0] : "";
            int seed = Environment.GetEnvironmentVariable("SCENED_SEED") != null
                ? int.Parse(Environment.GetEnvironmentVariable("SCENED_SEED")) : Environment.TickCount & 0x7fffffff;
            Console.WriteLine("seed " + seed + " (SCENED_SEED=" + seed + " repeats it)");
            Rand.Seed = seed;
            CallTests.Register();
            FrameTests.Register();
            PackedTests.Register();
            TlsTests.Register();
            ClusterTests.Register();
            SampleTests.Register();
            int passed = 0, failed = 0;
            try
            {
                foreach (KeyValuePair<string, Action> t in Tests)
                {
                    if (filter != "" && !t.Key.Contains(filter))
                        continue;
                    Stopwatch sw = Stopwatch.StartNew();
                    try
                    {
                        t.Value();
                        passed++;
                        Console.WriteLine("ok   " + t.Key + " (" + sw.ElapsedMilliseconds + " ms)");
                    }
                    catch (Exception e)
                    {
                        failed++;
                        Console.WriteLine("FAIL " + t.Key + ": " + (e is TestFailure ? e.Message : e.ToString()));
                    }
                }
            }
            finally
            {
                Daemons.StopAll();
            }
            Console.WriteLine(passed + " passed, " + failed + " failed");
            return failed == 0 && passed > 0 ? 0 : 1;
        }
    }

    public static class Rand
    {
        public static int Seed;
    }
}

// The few UnityEngine types the sample (client/csharp/Samples~) uses, with Unity's meaning, so
// that the tests compile it and drive it as Unity's player loop would: a frame runs what was
// posted to the main thread's SynchronizationContext, then every behaviour's Update.
using System;
using System.Collections.Generic;
using System.Reflection;
using System.Threading;

namespace UnityEngine
{
    public class Object
    {
        public string name { get; set; }
        public bool destroyed;

        public static void Destroy(Object o)
        {
            if (o != null)
                o.destroyed = true;
        }

        public static T Instantiate<T>(T original) where T : Object
        {
            GameObject g = original as GameObject;
            if (g == null)
                throw new NotSupportedException("the stub instantiates GameObjects only");
            return (T)(Object)new GameObject(g.name);
        }
    }

    public class GameObject : Object
    {
        public Transform transform { get; private set; }
        public readonly List<MonoBehaviour> behaviours = new List<MonoBehaviour>();

        public GameObject() : this("New Game Object") { }

        public GameObject(string name)
        {
            this.name = name;
            transform = new Transform(this);
        }

        public T AddComponent<T>() where T : MonoBehaviour, new()
        {
            T b = new T();
            b.gameObject = this;
            behaviours.Add(b);
            return b;
        }
    }

    public class Component : Object
    {
        public GameObject gameObject { get; internal set; }
        public Transform transform { get { return gameObject.transform; } }
    }

    public class MonoBehaviour : Component { }

    public class Transform
    {
        public readonly GameObject gameObject;
        public Transform parent { get; private set; }
        public readonly List<Transform> children = new List<Transform>();
        public Vector3 localPosition { get; set; }
        public Quaternion localRotation { get; set; }
        public Vector3 localScale { get; set; }

        internal Transform(GameObject g)
        {
            gameObject = g;
            localRotation = new Quaternion(0, 0, 0, 1);
            localScale = new Vector3(1, 1, 1);
        }

        public void SetParent(Transform p, bool worldPositionStays)
        {
            if (parent != null)
                parent.children.Remove(this);
            parent = p;
            if (p != null)
                p.children.Add(this);
        }
    }

    public struct Vector3
    {
        public float x, y, z;

        public Vector3(float x, float y, float z)
        {
            this.x = x;
            this.y = y;
            this.z = z;
        }

        public float magnitude { get { return (float)Math.Sqrt((double)x * x + (double)y * y + (double)z * z); } }

        public static Vector3 operator /(Vector3 v, float d) { return new Vector3(v.x / d, v.y / d, v.z / d); }

        public static float Dot(Vector3 a, Vector3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }

        public static Vector3 Cross(Vector3 a, Vector3 b)
        {
            return new Vector3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
        }

        public Vector3 normalized { get { float m = magnitude; return new Vector3(x / m, y / m, z / m); } }
    }

    public struct Quaternion
    {
        public float x, y, z, w;

        public Quaternion(float x, float y, float z, float w)
        {
            this.x = x;
            this.y = y;
            this.z = z;
            this.w = w;
        }

        /// <summary>The rotation whose z axis is forward and whose y axis is up made orthogonal to it.</summary>
        public static Quaternion LookRotation(Vector3 forward, Vector3 upwards)
        {
            Vector3 f = forward.normalized;
            Vector3 r = Vector3.Cross(upwards, f).normalized;
            Vector3 u = Vector3.Cross(f, r);
            // the rotation matrix with columns r, u, f, as a quaternion
            double m00 = r.x, m10 = r.y, m20 = r.z, m01 = u.x, m11 = u.y, m21 = u.z, m02 = f.x, m12 = f.y, m22 = f.z;
            double tr = m00 + m11 + m22, qx, qy, qz, qw;
            if (tr > 0)
            {
                double s = Math.Sqrt(tr + 1) * 2;
                qw = s / 4; qx = (m21 - m12) / s; qy = (m02 - m20) / s; qz = (m10 - m01) / s;
            }
            else if (m00 > m11 && m00 > m22)
            {
                double s = Math.Sqrt(1 + m00 - m11 - m22) * 2;
                qw = (m21 - m12) / s; qx = s / 4; qy = (m01 + m10) / s; qz = (m02 + m20) / s;
            }
            else if (m11 > m22)
            {
                double s = Math.Sqrt(1 + m11 - m00 - m22) * 2;
                qw = (m02 - m20) / s; qx = (m01 + m10) / s; qy = s / 4; qz = (m12 + m21) / s;
            }
            else
            {
                double s = Math.Sqrt(1 + m22 - m00 - m11) * 2;
                qw = (m10 - m01) / s; qx = (m02 + m20) / s; qy = (m12 + m21) / s; qz = s / 4;
            }
            return new Quaternion((float)qx, (float)qy, (float)qz, (float)qw);
        }
    }

    public static class Debug
    {
        public static readonly List<string> Warnings = new List<string>();

        public static void LogWarning(object message)
        {
            Warnings.Add(message.ToString());
        }
    }

    public class TooltipAttribute : Attribute
    {
        public TooltipAttribute(string tooltip) { }
    }

    /// <summary>Unity's main thread: continuations posted to it run at the start of a frame.</summary>
    public sealed class PlayerLoop : SynchronizationContext
    {
        private readonly Queue<KeyValuePair<SendOrPostCallback, object>> posted = new Queue<KeyValuePair<SendOrPostCallback, object>>();

        public override void Post(SendOrPostCallback d, object state)
        {
            lock (posted)
                posted.Enqueue(new KeyValuePair<SendOrPostCallback, object>(d, state));
        }

        public override void Send(SendOrPostCallback d, object state)
        {
            throw new NotSupportedException();
        }

        private static void Call(MonoBehaviour b, string method)
        {
            MethodInfo m = b.GetType().GetMethod(method, BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic);
            if (m != null)
                m.Invoke(b, null);
        }

        public void Start(MonoBehaviour b) { Call(b, "Start"); }

        public void Destroy(MonoBehaviour b) { Call(b, "OnDestroy"); }

        /// <summary>One frame: what was posted, then Update.</summary>
        public void Frame(MonoBehaviour b)
        {
            while (true)
            {
                KeyValuePair<SendOrPostCallback, object> p;
                lock (posted)
                {
                    if (posted.Count == 0)
                        break;
                    p = posted.Dequeue();
                }
                p.Key(p.Value);
            }
            Call(b, "Update");
        }
    }
}

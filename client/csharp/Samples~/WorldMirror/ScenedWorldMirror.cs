using System.Collections.Generic;
using Newtonsoft.Json.Linq;
using Scened;
using UnityEngine;

/// <summary>Mirrors a scened world onto GameObjects: one child of this object per entity, its
/// local position, rotation and scale taken from the entity's world matrix at every frame.
/// Add it to an empty GameObject, set the daemon and the world, and press Play.</summary>
public class ScenedWorldMirror : MonoBehaviour
{
    public string host = "127.0.0.1";
    public int port = 7878;
    public string token = "";
    public string world = "main";
    [Tooltip("Packed frames on this grid (world units); 0 takes exact base64 matrices")]
    public float packedStep = 0.001f;
    [Tooltip("Optional: instantiated per entity (an empty GameObject otherwise)")]
    public GameObject prefab;
    [Tooltip("scened's matrices are right-handed (glTF, OpenGL); Unity is left-handed: flip z")]
    public bool rightHanded = true;

    private ScenedClient client;
    private Subscription sub;
    private readonly Dictionary<long, GameObject> objects = new Dictionary<long, GameObject>();
    private readonly float[] m = new float[16];

    /// <summary>The GameObjects by entity (read by tools and tests).</summary>
    public IDictionary<long, GameObject> Objects { get { return objects; } }

    public Subscription Subscription { get { return sub; } }

    private async void Start()
    {
        ScenedOptions options = new ScenedOptions { Matrices = MatrixForm.B64 };
        if (!string.IsNullOrEmpty(token))
            options.Token = token;
        try
        {
            client = await ScenedClient.ConnectAsync(host, port, options);
            JObject fields = new JObject();
            if (packedStep > 0)
                fields["packed"] = new JObject { { "step", packedStep } };
            sub = await client.SubscribeAsync(world, fields);
        }
        catch (ScenedException e)
        {
            Debug.LogWarning("scened: " + e.Message);
            return;
        }
        sub.FrameReceived += OnFrame;
        sub.Ended += OnEnded;
        Sync(); // frames that came before this line
    }

    private void Update()
    {
        if (client != null)
            client.Poll(); // frames reach OnFrame here, on the main thread
    }

    private void OnDestroy()
    {
        if (client != null)
            client.Dispose();
        client = null;
    }

    private void OnFrame(Subscription s)
    {
        for (int i = 0; i < s.RemovedCount; i++)
            Drop(s.RemovedAt(i));
        for (int i = 0; i < s.ChangedCount; i++)
        {
            long e = s.ChangedAt(i);
            if (s.TryGetWorld(e, m))
                Place(e);
        }
    }

    private void OnEnded(Subscription s)
    {
        Debug.LogWarning("scened: the subscription to " + world + " ended: " + s.EndReason);
        if (s.Count == 0)
        {
            foreach (GameObject go in objects.Values)
                Destroy(go);
            objects.Clear();
        }
    }

    /// <summary>Every entity of the mirror, and none that it no longer holds.</summary>
    private void Sync()
    {
        HashSet<long> held = new HashSet<long>();
        for (int i = 0; i < sub.Count; i++)
        {
            long e = sub.EntityAt(i);
            held.Add(e);
            sub.GetWorldAt(i, m);
            Place(e);
        }
        List<long> gone = new List<long>();
        foreach (long e in objects.Keys)
            if (!held.Contains(e))
                gone.Add(e);
        foreach (long e in gone)
            Drop(e);
    }

    private void Drop(long e)
    {
        GameObject go;
        if (objects.TryGetValue(e, out go))
        {
            Destroy(go);
            objects.Remove(e);
        }
    }

    /// <summary>The matrix in m onto entity e's GameObject (made when it has none).</summary>
    private void Place(long e)
    {
        GameObject go;
        if (!objects.TryGetValue(e, out go))
        {
            go = prefab != null ? Instantiate(prefab) : new GameObject();
            go.name = "entity " + e;
            go.transform.SetParent(transform, false);
            objects.Add(e, go);
        }
        if (rightHanded)
        {
            // S * M * S with S = diag(1, 1, -1, 1): negate what mixes z with x or y
            m[2] = -m[2]; m[6] = -m[6]; m[8] = -m[8]; m[9] = -m[9]; m[14] = -m[14];
        }
        Vector3 x = new Vector3(m[0], m[1], m[2]), y = new Vector3(m[4], m[5], m[6]), z = new Vector3(m[8], m[9], m[10]);
        float sx = x.magnitude, sy = y.magnitude, sz = z.magnitude;
        if (Vector3.Dot(Vector3.Cross(x, y), z) < 0)
            sx = -sx; // a mirror: the x axis flipped
        Transform t = go.transform;
        t.localPosition = new Vector3(m[12], m[13], m[14]);
        if (sy > 0 && sz > 0)
            t.localRotation = Quaternion.LookRotation(z / sz, y / sy);
        t.localScale = new Vector3(sx, sy, sz);
    }
}

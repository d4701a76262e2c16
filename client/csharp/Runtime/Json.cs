using System.IO;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace Scened
{
    internal static class Json
    {
        /// <summary>A line as a JObject, strings kept as strings (no dates made of them); null
        /// when it is not a JSON object.</summary>
        public static JObject Parse(string text)
        {
            try
            {
                using (JsonTextReader r = new JsonTextReader(new StringReader(text)))
                {
                    r.DateParseHandling = DateParseHandling.None;
                    r.FloatParseHandling = FloatParseHandling.Double;
                    JToken t = JToken.ReadFrom(r);
                    return t as JObject;
                }
            }
            catch (JsonException)
            {
                return null;
            }
        }
    }
}

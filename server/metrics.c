#include "metrics.h"

#include "server.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const double bounds[SCN_HIST_BUCKETS] = {1e-6,   2.5e-6, 5e-6,   1e-5,   2.5e-5, 5e-5,
                                                1e-4,   2.5e-4, 5e-4,   1e-3,   2.5e-3, 5e-3,
                                                1e-2,   5e-2,   2.5e-1, 1.0};

void scn_hist_observe(scn_hist *h, double seconds) {
  int i = 0;
  while (i < SCN_HIST_BUCKETS - 1 && seconds > bounds[i])
    i++;
  if (seconds > bounds[SCN_HIST_BUCKETS - 1])
    i = SCN_HIST_BUCKETS; /* only in +Inf */
  if (i < SCN_HIST_BUCKETS)
    h->buckets[i]++;
  h->count++;
  h->sum += seconds;
}

uint64_t scn_rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  unsigned long size, resident = 0;
  if (fscanf(f, "%lu %lu", &size, &resident) != 2)
    resident = 0;
  fclose(f);
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void header(scn_buf *b, const char *name, const char *type, const char *help) {
  scn_buf_adds(b, "# HELP ");
  scn_buf_adds(b, name);
  scn_buf_addc(b, ' ');
  scn_buf_adds(b, help);
  scn_buf_adds(b, "\n# TYPE ");
  scn_buf_adds(b, name);
  scn_buf_addc(b, ' ');
  scn_buf_adds(b, type);
  scn_buf_addc(b, '\n');
}

static void sample(scn_buf *b, const char *name, const char *labels, double v) {
  scn_buf_adds(b, name);
  if (labels && labels[0]) {
    scn_buf_addc(b, '{');
    scn_buf_adds(b, labels);
    scn_buf_addc(b, '}');
  }
  scn_buf_addc(b, ' ');
  scn_buf_add_double(b, v);
  scn_buf_addc(b, '\n');
}

static void metric(scn_buf *b, const char *name, const char *type, const char *help, double v) {
  header(b, name, type, help);
  sample(b, name, NULL, v);
}

/* A label value with Prometheus escaping (backslash, quote, newline). */
static void label_value(char *out, size_t n, const char *v) {
  size_t k = 0;
  for (; *v && k + 3 < n; v++) {
    if (*v == '\\' || *v == '"') {
      out[k++] = '\\';
      out[k++] = *v;
    } else if (*v == '\n') {
      out[k++] = '\\';
      out[k++] = 'n';
    } else {
      out[k++] = *v;
    }
  }
  out[k] = '\0';
}

static void histogram(scn_buf *b, const char *name, const char *help, const scn_hist *h) {
  header(b, name, "histogram", help);
  char bucket[128], labels[64];
  snprintf(bucket, sizeof bucket, "%s_bucket", name);
  uint64_t cumulative = 0;
  for (int i = 0; i < SCN_HIST_BUCKETS; i++) {
    cumulative += h->buckets[i];
    snprintf(labels, sizeof labels, "le=\"%g\"", bounds[i]);
    sample(b, bucket, labels, (double)cumulative);
  }
  sample(b, bucket, "le=\"+Inf\"", (double)h->count);
  char sum[128], count[128];
  snprintf(sum, sizeof sum, "%s_sum", name);
  snprintf(count, sizeof count, "%s_count", name);
  sample(b, sum, NULL, h->sum);
  sample(b, count, NULL, (double)h->count);
}

/* Per-world series only while the number of worlds is small enough to keep cardinality sane. */
#define PER_WORLD_MAX 100

void scn_metrics_render(scn_server *srv, scn_buf *b) {
  scn_counters *k = &srv->counters;
  char labels[256], v[160];

  header(b, "scened_build_info", "gauge", "Version and protocol of this daemon.");
  snprintf(labels, sizeof labels, "version=\"%s\",protocol=\"%d\"", SCN_VERSION, SCN_PROTOCOL);
  sample(b, "scened_build_info", labels, 1);
  metric(b, "scened_uptime_seconds", "gauge", "Seconds since the daemon started.",
         (double)(uv_now(srv->loop) - srv->start_ms) / 1000.0);
  metric(b, "scened_ready", "gauge", "1 when the daemon accepts commands.",
         srv->ready && !srv->stopping ? 1 : 0);
  metric(b, "scened_resident_memory_bytes", "gauge", "Resident set size of the daemon.",
         (double)scn_rss_bytes());

  size_t nworlds = scn_world_count(srv->scene);
  metric(b, "scened_worlds", "gauge", "Worlds hosted.", (double)nworlds);
  metric(b, "scened_entities", "gauge", "Entities alive.", (double)scn_entity_count(srv->scene));
  metric(b, "scened_transforms", "gauge", "Transforms in all worlds.",
         (double)scn_scene_transform_count(srv->scene));
  if (nworlds <= PER_WORLD_MAX) {
    header(b, "scened_world_transforms", "gauge", "Transforms per world.");
    for (size_t i = 0; i < nworlds; i++) {
      scn_world *w = scn_world_at(srv->scene, i);
      label_value(v, sizeof v, scn_world_name(w));
      snprintf(labels, sizeof labels, "world=\"%s\"", v);
      sample(b, "scened_world_transforms", labels, (double)scn_world_transform_count(w));
    }
  }

  metric(b, "scened_connections", "gauge", "Protocol connections open.", (double)srv->nconns);
  metric(b, "scened_connections_total", "counter", "Protocol connections accepted.",
         (double)k->connections_total);
  header(b, "scened_limit_rejections_total", "counter",
         "Requests or connections refused by a configured limit.");
#define SCN_LIMIT_SAMPLE(name)                                                                 \
  sample(b, "scened_limit_rejections_total", "limit=\"" #name "\"",                           \
         (double)k->limit_hits[SCN_LIMIT_##name]);
  SCN_LIMITS(SCN_LIMIT_SAMPLE)
#undef SCN_LIMIT_SAMPLE

  header(b, "scened_commands_total", "counter", "Requests handled, by command.");
  for (unsigned i = 0; i < scn_command_count; i++) {
    snprintf(labels, sizeof labels, "command=\"%s\"", scn_commands[i].name);
    sample(b, "scened_commands_total", labels, (double)k->by_command[i]);
  }
  header(b, "scened_command_errors_total", "counter", "Error responses, by error code.");
#define SCN_ERROR_SAMPLE(name)                                                                 \
  sample(b, "scened_command_errors_total", "code=\"" #name "\"", (double)k->errors[SCN_W_##name]);
  SCN_WIRE_ERRORS(SCN_ERROR_SAMPLE)
#undef SCN_ERROR_SAMPLE
  histogram(b, "scened_command_duration_seconds", "Time to handle one request.",
            &k->command_time);
  histogram(b, "scened_tick_duration_seconds", "Time of one tick: propagation and frames.",
            &k->tick_time);

  scn_world_stats total = {0};
  for (size_t i = 0; i < nworlds; i++) {
    scn_world_stats s;
    scn_world_get_stats(scn_world_at(srv->scene, i), &s);
    total.flushes += s.flushes;
    total.recomputed += s.recomputed;
    total.changed += s.changed;
    total.relayouts += s.relayouts;
  }
  /* Worlds destroyed so far still count. */
  total.flushes += k->gone_worlds.flushes;
  total.recomputed += k->gone_worlds.recomputed;
  total.changed += k->gone_worlds.changed;
  total.relayouts += k->gone_worlds.relayouts;
  metric(b, "scened_propagations_total", "counter", "Propagation passes that had work.",
         (double)total.flushes);
  metric(b, "scened_matrices_recomputed_total", "counter", "World matrices recomputed.",
         (double)total.recomputed);
  metric(b, "scened_matrices_changed_total", "counter",
         "Recomputed world matrices whose value changed.", (double)total.changed);
  metric(b, "scened_relayouts_total", "counter", "Re-sorts of a world's arrays.",
         (double)total.relayouts);

  metric(b, "scened_subscriptions", "gauge", "Stream subscriptions open.", (double)srv->nsubs);
  metric(b, "scened_lagging_subscriptions", "gauge",
         "Subscriptions whose frames are dropped until their connection drains.",
         (double)scn_stream_lagging(srv));
  metric(b, "scened_frames_sent_total", "counter", "Stream frames queued to subscribers.",
         (double)k->stream.frames);
  metric(b, "scened_frame_bytes_total", "counter", "Bytes of stream frames queued.",
         (double)k->stream.frame_bytes);
  metric(b, "scened_frame_matrices_total", "counter", "Matrices in stream frames queued.",
         (double)k->stream.matrices);
  metric(b, "scened_frame_encodes_total", "counter",
         "Frame bodies encoded (each shared by every subscriber that needs it).",
         (double)k->stream.encodes);
  metric(b, "scened_stream_lags_total", "counter", "Times a subscription started lagging.",
         (double)k->stream.lags);
  metric(b, "scened_stream_resyncs_total", "counter",
         "Times a lagging subscription was resynchronised with a full frame.",
         (double)k->stream.resyncs);
  metric(b, "scened_bytes_received_total", "counter", "Protocol bytes read.",
         (double)k->bytes_in);
  metric(b, "scened_bytes_sent_total", "counter", "Protocol bytes written.",
         (double)k->bytes_out);
  metric(b, "scened_http_requests_total", "counter", "HTTP requests served.",
         (double)k->http_requests);
}

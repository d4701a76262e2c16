#include "ops/metrics.h"

#include "server.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const double bounds[SCN_HIST_BUCKETS] = {1e-6, 2.5e-6, 5e-6,   1e-5, 2.5e-5, 5e-5,
                                                1e-4, 2.5e-4, 5e-4,   1e-3, 2.5e-3, 5e-3,
                                                1e-2, 5e-2,   2.5e-1, 1.0};

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

/* ---- one list of figures, two renderings ----------------------------------------------------
 * The figures are enumerated once (emit_figures) into a sink; the Prometheus sink writes the
 * text exposition for /metrics, the JSON sink writes the same figures for info. */

typedef scn_metrics_sink sink;
struct scn_metrics_sink {
  /* A family starts (name without the scened_ prefix, type, help), then its samples. */
  void (*family)(sink *k, const char *name, const char *type, const char *help);
  /* label: NULL for an unlabeled sample, else name and value. */
  void (*sample)(sink *k, const char *label, const char *value, double v);
  void (*sample2)(sink *k, const char *l1, const char *v1, const char *l2, const char *v2,
                  double v);
  void (*histogram)(sink *k, const scn_hist *h);
  void (*end_family)(sink *k);
  scn_buf *out;
  const char *name;          /* current family */
  int samples;               /* in the current family (JSON) */
  int families;              /* so far (JSON) */
  const scn_acl_rule *asker; /* the worlds it may see are named (NULL: all) */
};

void scn_metric_family(sink *k, const char *name, const char *type, const char *help) {
  k->family(k, name, type, help);
}
void scn_metric_sample(sink *k, const char *label, const char *value, double v) {
  k->sample(k, label, value, v);
}
void scn_metric_sample2(sink *k, const char *l1, const char *v1, const char *l2, const char *v2,
                        double v) {
  k->sample2(k, l1, v1, l2, v2, v);
}
void scn_metric_end(sink *k) { k->end_family(k); }

bool scn_metric_shows_world(const sink *k, const char *world) {
  return !k->asker || scn_acl_allows_world(k->asker, world);
}

void scn_metric(sink *k, const char *name, const char *type, const char *help, double v) {
  k->family(k, name, type, help);
  k->sample(k, NULL, NULL, v);
  k->end_family(k);
}

void scn_metric_hist(sink *k, const char *name, const char *help, const scn_hist *h) {
  k->family(k, name, "histogram", help);
  k->histogram(k, h);
  k->end_family(k);
}

/* A counter family with one sample per command, from counts indexed by command id. */
static void per_command(sink *k, const char *name, const char *help,
                        const uint64_t counts[SCN_COMMAND_COUNT]) {
  k->family(k, name, "counter", help);
  for (unsigned i = 0; i < SCN_COMMAND_COUNT; i++)
    k->sample(k, "command", scn_commands[i].name, (double)counts[i]);
  k->end_family(k);
}

static void emit_figures(scn_server *srv, sink *k) {
  scn_counters *c = &srv->counters;
  char proto[16];
  snprintf(proto, sizeof proto, "%d", SCN_PROTOCOL);
  k->family(k, "build_info", "gauge", "Version and protocol of this daemon.");
  k->sample(k, "version", SCN_VERSION, 1);
  k->end_family(k);
  scn_metric(k, "uptime_seconds", "gauge", "Seconds since the daemon started.",
             (double)(uv_now(srv->loop) - srv->start_ms) / 1000.0);
  scn_metric(k, "ready", "gauge", "1 when the daemon accepts commands.", srv->stopping ? 0 : 1);
  scn_metric(k, "resident_memory_bytes", "gauge", "Resident set size of the daemon.",
             (double)scn_rss_bytes());

  size_t nworlds = scn_world_count(srv->scene);
  scn_metric(k, "worlds", "gauge", "Worlds hosted.", (double)nworlds);
  scn_metric(k, "entities", "gauge", "Entities alive.", (double)scn_entity_count(srv->scene));
  scn_metric(k, "transforms", "gauge", "Transforms in all worlds.",
             (double)scn_scene_transform_count(srv->scene));
  if (nworlds <= SCN_METRICS_PER_WORLD_MAX) {
    k->family(k, "world_transforms", "gauge", "Transforms per world.");
    for (size_t i = 0; i < nworlds; i++) {
      scn_world *w = scn_world_at(srv->scene, i);
      if (scn_metric_shows_world(k, scn_world_name(w)))
        k->sample(k, "world", scn_world_name(w), (double)scn_world_transform_count(w));
    }
    k->end_family(k);
  }

  scn_metric(k, "connections", "gauge", "Protocol connections open.", (double)srv->nconns);
  scn_metric(k, "connections_total", "counter", "Protocol connections accepted.",
             (double)c->connections_total);
  k->family(k, "limit_rejections_total", "counter",
            "Requests or connections refused by a configured limit.");
#define SCN_LIMIT_SAMPLE(name)                                                                     \
  k->sample(k, "limit", #name, (double)c->limit_hits[SCN_LIMIT_##name]);
  SCN_LIMITS(SCN_LIMIT_SAMPLE)
#undef SCN_LIMIT_SAMPLE
  k->end_family(k);

  per_command(k, "commands_total", "Requests handled, by command.", c->by_command);
  k->family(k, "command_errors_total", "counter", "Error responses, by error code.");
#define SCN_ERROR_SAMPLE(name) k->sample(k, "code", #name, (double)c->errors[SCN_W_##name]);
  SCN_WIRE_ERRORS(SCN_ERROR_SAMPLE)
#undef SCN_ERROR_SAMPLE
  k->end_family(k);
  per_command(k, "unauthorized_total", "UNAUTHORIZED answers, by command.", c->unauthorized);
  scn_metric_hist(k, "command_duration_seconds", "Time to handle one request.", &c->command_time);
  scn_metric_hist(k, "tick_duration_seconds", "Time of one tick: propagation and frames.",
                  &c->tick_time);

  scn_world_stats total = c->gone_worlds; /* destroyed worlds still count */
  for (size_t i = 0; i < nworlds; i++) {
    scn_world_stats s;
    scn_world_get_stats(scn_world_at(srv->scene, i), &s);
    total.flushes += s.flushes;
    total.recomputed += s.recomputed;
    total.changed += s.changed;
    total.relayouts += s.relayouts;
  }
  scn_metric(k, "propagations_total", "counter", "Propagation passes that had work.",
             (double)total.flushes);
  scn_metric(k, "matrices_recomputed_total", "counter", "World matrices recomputed.",
             (double)total.recomputed);
  scn_metric(k, "matrices_changed_total", "counter",
             "Recomputed world matrices whose value changed.", (double)total.changed);
  scn_metric(k, "relayouts_total", "counter", "Re-sorts of a world's arrays.",
             (double)total.relayouts);

  scn_metric(k, "bytes_received_total", "counter", "Protocol bytes read.", (double)c->bytes_in);
  scn_metric(k, "bytes_sent_total", "counter", "Protocol bytes written.", (double)c->bytes_out);
  scn_metric(k, "http_requests_total", "counter", "HTTP requests served.",
             (double)c->http_requests);

  /* then every module's own */
  scn_hooks_collect_stats(srv, k);
}

/* ---- Prometheus text -------------------------------------------------------------------- */

static void prom_family(sink *k, const char *name, const char *type, const char *help) {
  scn_buf *b = k->out;
  k->name = name;
  scn_buf_adds(b, "# HELP scened_");
  scn_buf_adds(b, name);
  scn_buf_addc(b, ' ');
  scn_buf_adds(b, help);
  scn_buf_adds(b, "\n# TYPE scened_");
  scn_buf_adds(b, name);
  scn_buf_addc(b, ' ');
  scn_buf_adds(b, type);
  scn_buf_addc(b, '\n');
}

/* A label value with Prometheus escaping (backslash, quote, newline). */
static void add_label_value(scn_buf *b, const char *v) {
  for (; *v; v++) {
    if (*v == '\\' || *v == '"')
      scn_buf_addc(b, '\\');
    if (*v == '\n') {
      scn_buf_adds(b, "\\n");
      continue;
    }
    scn_buf_addc(b, *v);
  }
}

static void prom_line(scn_buf *b, const char *name, const char *suffix, const char *label,
                      const char *value, double v) {
  scn_buf_adds(b, "scened_");
  scn_buf_adds(b, name);
  scn_buf_adds(b, suffix);
  if (label) {
    scn_buf_addc(b, '{');
    scn_buf_adds(b, label);
    scn_buf_adds(b, "=\"");
    add_label_value(b, value);
    scn_buf_adds(b, "\"}");
  }
  scn_buf_addc(b, ' ');
  scn_buf_add_double(b, v);
  scn_buf_addc(b, '\n');
}

static void prom_sample(sink *k, const char *label, const char *value, double v) {
  prom_line(k->out, k->name, "", label, value, v);
}

static void prom_sample2(sink *k, const char *l1, const char *v1, const char *l2, const char *v2,
                         double v) {
  scn_buf *b = k->out;
  scn_buf_adds(b, "scened_");
  scn_buf_adds(b, k->name);
  scn_buf_addc(b, '{');
  scn_buf_adds(b, l1);
  scn_buf_adds(b, "=\"");
  add_label_value(b, v1);
  scn_buf_adds(b, "\",");
  scn_buf_adds(b, l2);
  scn_buf_adds(b, "=\"");
  add_label_value(b, v2);
  scn_buf_adds(b, "\"} ");
  scn_buf_add_double(b, v);
  scn_buf_addc(b, '\n');
}

static void prom_histogram(sink *k, const scn_hist *h) {
  uint64_t cumulative = 0;
  char le[32];
  for (int i = 0; i < SCN_HIST_BUCKETS; i++) {
    cumulative += h->buckets[i];
    snprintf(le, sizeof le, "%g", bounds[i]);
    prom_line(k->out, k->name, "_bucket", "le", le, (double)cumulative);
  }
  prom_line(k->out, k->name, "_bucket", "le", "+Inf", (double)h->count);
  prom_line(k->out, k->name, "_sum", NULL, NULL, h->sum);
  prom_line(k->out, k->name, "_count", NULL, NULL, (double)h->count);
}

static void prom_end(sink *k) { (void)k; }

void scn_metrics_render(scn_server *srv, scn_buf *out) {
  sink k = {.family = prom_family,
            .sample = prom_sample,
            .sample2 = prom_sample2,
            .histogram = prom_histogram,
            .end_family = prom_end,
            .out = out};
  emit_figures(srv, &k);
}

/* ---- JSON --------------------------------------------------------------------------------
 * An unlabeled figure is "name":v; a labeled family is "name":{"label value":v,...}; a
 * histogram is "name":{"count":n,"sum":s,"buckets":{"le":cumulative,...}}. */

static void json_family(sink *k, const char *name, const char *type, const char *help) {
  (void)type, (void)help;
  k->name = name;
  k->samples = 0;
  scn_buf_adds(k->out, k->families++ ? ",\"" : "\"");
  scn_buf_adds(k->out, name);
  scn_buf_adds(k->out, "\":");
}

static void json_sample(sink *k, const char *label, const char *value, double v) {
  if (label) {
    scn_buf_addc(k->out, k->samples++ ? ',' : '{');
    scn_buf_add_json_string(k->out, value, strlen(value));
    scn_buf_addc(k->out, ':');
  } else {
    k->samples = -1; /* a single value: nothing to close */
  }
  scn_buf_add_double(k->out, v);
}

static void json_sample2(sink *k, const char *l1, const char *v1, const char *l2, const char *v2,
                         double v) {
  (void)l1, (void)l2;
  scn_buf key = {0};
  scn_buf_adds(&key, v1);
  scn_buf_addc(&key, '/');
  scn_buf_adds(&key, v2);
  scn_buf_addc(k->out, k->samples++ ? ',' : '{');
  if (key.failed)
    k->out->failed = true;
  else
    scn_buf_add_json_string(k->out, key.data, key.len);
  scn_buf_addc(k->out, ':');
  scn_buf_add_double(k->out, v);
  scn_buf_free(&key);
}

static void json_histogram(sink *k, const scn_hist *h) {
  scn_buf *b = k->out;
  scn_buf_adds(b, "{\"count\":");
  scn_buf_add_u64(b, h->count);
  scn_buf_adds(b, ",\"sum\":");
  scn_buf_add_double(b, h->sum);
  scn_buf_adds(b, ",\"buckets\":{");
  uint64_t cumulative = 0;
  char le[32];
  for (int i = 0; i < SCN_HIST_BUCKETS; i++) {
    cumulative += h->buckets[i];
    snprintf(le, sizeof le, i ? ",\"%g\":" : "\"%g\":", bounds[i]);
    scn_buf_adds(b, le);
    scn_buf_add_u64(b, cumulative);
  }
  scn_buf_adds(b, "}}");
  k->samples = -1;
}

static void json_end(sink *k) {
  if (k->samples > 0)
    scn_buf_addc(k->out, '}');
  else if (k->samples == 0)
    scn_buf_adds(k->out, "{}");
}

void scn_metrics_json(scn_server *srv, scn_buf *out, const scn_acl_rule *rule) {
  sink k = {.family = json_family,
            .sample = json_sample,
            .sample2 = json_sample2,
            .histogram = json_histogram,
            .end_family = json_end,
            .out = out,
            .asker = rule};
  scn_buf_addc(out, '{');
  emit_figures(srv, &k);
  scn_buf_addc(out, '}');
}

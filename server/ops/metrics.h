/* Operational figures rendered two ways from one enumeration: Prometheus text for /metrics and
 * JSON fields for info. The daemon's own figures come first; every module that keeps figures
 * adds its own through the server's collect_stats hook, writing them into the sink it is
 * given, so this file knows nothing of the modules. */
#ifndef SCN_METRICS_H
#define SCN_METRICS_H

#include "buf.h"
#include "ops/acl.h"
#include "wire.h" /* the limits (SCN_LIMITS) */

#include <stdbool.h>
#include <stdint.h>

#define SCN_HIST_BUCKETS 16

/* Fixed buckets (seconds) from 1 microsecond to 1 second, about 2.5x apart. */
typedef struct scn_hist {
  uint64_t buckets[SCN_HIST_BUCKETS]; /* not cumulative */
  uint64_t count;
  double sum;
} scn_hist;

void scn_hist_observe(scn_hist *h, double seconds);

/* Where figures are written: a family (name without the scened_ prefix, Prometheus type,
 * help), then its samples, then its end. */
typedef struct scn_metrics_sink scn_metrics_sink;
void scn_metric_family(scn_metrics_sink *k, const char *name, const char *type, const char *help);
/* label NULL: an unlabeled sample; else the label's name and value. */
void scn_metric_sample(scn_metrics_sink *k, const char *label, const char *value, double v);
/* A sample with two labels (Prometheus {l1="v1",l2="v2"}; in JSON the key "v1/v2"). */
void scn_metric_sample2(scn_metrics_sink *k, const char *l1, const char *v1, const char *l2,
                        const char *v2, double v);
void scn_metric_end(scn_metrics_sink *k);
/* Whether a figure of this world may be named to whoever asked (info under --acl names only
 * the worlds the token's prefixes cover; /metrics names every world). */
bool scn_metric_shows_world(const scn_metrics_sink *k, const char *world);
/* Per-world figures are given only while there are at most this many worlds, so that a daemon
 * with many small worlds does not explode a scraper's series. */
#define SCN_METRICS_PER_WORLD_MAX 100
/* A family of one unlabeled sample. */
void scn_metric(scn_metrics_sink *k, const char *name, const char *type, const char *help,
                double v);
/* A family of one histogram. */
void scn_metric_hist(scn_metrics_sink *k, const char *name, const char *help, const scn_hist *h);

struct scn_server;
/* Appends the whole /metrics page. */
void scn_metrics_render(struct scn_server *srv, scn_buf *out);
/* Appends the same figures as one JSON object (for info); the per-world figures name only the
 * worlds the asker's rule covers (NULL: no access list, every world). */
void scn_metrics_json(struct scn_server *srv, scn_buf *out, const scn_acl_rule *rule);
/* Resident set size of this process in bytes (0 when unknown). */
uint64_t scn_rss_bytes(void);

#endif

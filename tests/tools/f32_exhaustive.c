/*
 * Exhaustive check of scn_f32_format() over all 2^32 binary32 bit patterns.
 *
 * For every finite pattern: the output reads back through strtof() to the
 * same bits, is a valid JSON number and fits SCN_F32_FMT_MAX.  On a sample
 * (--shortest-every N, default 16; 1 = every pattern, 0 = off) it also checks
 * that no decimal with fewer significant digits reads back (shortest), that
 * the output is the closest decimal of its length that reads back, and that
 * the notation (plain vs exponent) follows the documented rule.
 *
 * usage: f32_exhaustive [--threads N] [--start HEX] [--end HEX]
 *                       [--shortest-every N]
 * --end is inclusive.  Exits non-zero if anything failed.
 *
 * build: cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -Iproto \
 *           tests/tools/f32_exhaustive.c proto/f32fmt.c -lpthread
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "f32fmt.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNK_BITS 20
#define MAX_REPORTED 50

struct decimal {
  uint64_t mant; /* no trailing zeros unless zero */
  int exp10;     /* value = mant * 10^exp10 */
  int ndigits;
};

static uint64_t opt_start;
static uint64_t opt_end = UINT64_C(0xffffffff); /* inclusive */
static unsigned opt_threads = 2;
static unsigned opt_shortest_every = 16;

static atomic_uint_fast64_t next_chunk;
static atomic_uint_fast64_t total_checked;
static atomic_uint_fast64_t total_failed;
static atomic_uint_fast64_t total_shortest;
static atomic_uint workers_done;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned reported;

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t float_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static void report(uint32_t u, const char *out, const char *why) {
  pthread_mutex_lock(&report_lock);
  if (reported < MAX_REPORTED)
    fprintf(stderr, "FAIL %08" PRIx32 " (%.9g): \"%s\": %s\n", u, (double)bits_to_float(u), out,
            why);
  reported++;
  pthread_mutex_unlock(&report_lock);
}

/* JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_json_number(const char *s) {
  if (*s == '-')
    s++;
  if (*s == '0') {
    s++;
  } else if (*s >= '1' && *s <= '9') {
    while (*s >= '0' && *s <= '9')
      s++;
  } else {
    return 0;
  }
  if (*s == '.') {
    s++;
    if (!(*s >= '0' && *s <= '9'))
      return 0;
    while (*s >= '0' && *s <= '9')
      s++;
  }
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-')
      s++;
    if (!(*s >= '0' && *s <= '9'))
      return 0;
    while (*s >= '0' && *s <= '9')
      s++;
  }
  return *s == '\0';
}

/* Parses an unsigned decimal (plain or exponent form) exactly. */
static int parse_decimal(const char *s, struct decimal *d) {
  char digits[64];
  int nd = 0, exp10 = 0, seen_point = 0;

  for (; (*s >= '0' && *s <= '9') || *s == '.'; s++) {
    if (*s == '.') {
      seen_point = 1;
      continue;
    }
    if (seen_point)
      exp10--;
    if (nd == 0 && *s == '0')
      continue;
    if (nd >= (int)sizeof digits)
      return 0;
    digits[nd++] = *s;
  }
  if (*s == 'e' || *s == 'E')
    exp10 += atoi(s + 1);
  while (nd > 0 && digits[nd - 1] == '0') {
    nd--;
    exp10++;
  }
  if (nd > 19)
    return 0;
  d->mant = 0;
  for (int i = 0; i < nd; i++)
    d->mant = d->mant * 10 + (uint64_t)(digits[i] - '0');
  d->exp10 = nd ? exp10 : 0;
  d->ndigits = nd;
  return 1;
}

static struct decimal normalize(uint64_t mant, int exp10) {
  struct decimal d = {mant, exp10, 0};
  while (d.mant != 0 && d.mant % 10 == 0) {
    d.mant /= 10;
    d.exp10++;
  }
  for (uint64_t m = d.mant; m != 0; m /= 10)
    d.ndigits++;
  return d;
}

static int same_decimal(struct decimal a, struct decimal b) {
  return a.mant == b.mant && (a.mant == 0 || a.exp10 == b.exp10);
}

static int reads_back(uint64_t mant, int exp10, float target) {
  char buf[48];
  snprintf(buf, sizeof buf, "%" PRIu64 "e%d", mant, exp10);
  return float_to_bits(strtof(buf, NULL)) == float_to_bits(target);
}

static uint64_t pow10_u64(int n) {
  uint64_t p = 1;
  while (n-- > 0)
    p *= 10;
  return p;
}

/*
 * The correctly rounded decimal with `digits` significant digits (glibc's
 * printf rounds exactly, ties to even), as mantissa M and scale exponent.
 */
static void rounded(float a, int digits, uint64_t *m, int *scale) {
  char buf[48];
  struct decimal d;
  snprintf(buf, sizeof buf, "%.*e", digits - 1, (double)a);
  parse_decimal(buf, &d);
  /* Re-expand to exactly `digits` digits. */
  *m = d.mant;
  *scale = d.exp10;
  while (*m < pow10_u64(digits - 1)) {
    *m *= 10;
    (*scale)--;
  }
}

/*
 * Shortest: no decimal with n - 1 significant digits reads back (that covers
 * all shorter ones too).  The interval of reals reading back is convex and
 * contains a, so it suffices to try the (n-1)-digit neighbours of a: the
 * rounded value M and M +- 1, plus the finer grid just below a power of 10.
 */
static const char *check_shortest(float a, struct decimal got) {
  int n = got.ndigits;
  if (n <= 1)
    return NULL;
  uint64_t m;
  int sc;
  rounded(a, n - 1, &m, &sc);
  if (reads_back(m, sc, a) || reads_back(m - 1, sc, a) || reads_back(m + 1, sc, a))
    return "not shortest";
  if (m == pow10_u64(n - 2) && reads_back(10 * m - 1, sc - 1, a))
    return "not shortest (below power of 10)";
  return NULL;
}

/* Closest: among n-digit decimals that read back, the one nearest to a. */
static const char *check_closest(float a, struct decimal got) {
  int n = got.ndigits;
  uint64_t m;
  int sc;
  struct decimal want;

  rounded(a, n, &m, &sc);
  if (reads_back(m, sc, a)) {
    want = normalize(m, sc);
  } else {
    /* Nearest n-digit value lies outside; take the one on the other side. */
    char buf[48];
    snprintf(buf, sizeof buf, "%" PRIu64 "e%d", m, sc);
    if (strtod(buf, NULL) > (double)a)
      want = m == pow10_u64(n - 1) ? normalize(10 * m - 1, sc - 1) : normalize(m - 1, sc);
    else
      want = normalize(m + 1, sc);
  }
  return same_decimal(want, got) ? NULL : "not the closest shortest";
}

/* Plain notation iff the leading digit's exponent is in [-6, 20]. */
static const char *check_style(const char *out, struct decimal got) {
  int lead = got.exp10 + got.ndigits - 1;
  int plain = lead >= -6 && lead <= 20;
  int has_exp = strchr(out, 'e') != NULL;
  return plain == !has_exp ? NULL : "wrong notation";
}

static const char *check_thoroughly(uint32_t u, const char *out) {
  const char *digits = out + (out[0] == '-');
  float a = bits_to_float(u & 0x7fffffffu);
  struct decimal got;

  if (!parse_decimal(digits, &got))
    return "unparsable";
  if (got.mant == 0)
    return strcmp(out, (u >> 31) ? "-0" : "0") ? "bad zero" : NULL;
  const char *why = check_shortest(a, got);
  if (!why)
    why = check_closest(a, got);
  if (!why)
    why = check_style(digits, got);
  return why;
}

static int sampled(uint32_t u) {
  if (opt_shortest_every == 0)
    return 0;
  /* Mix the bits so the sample is not biased towards trailing zeros. */
  uint32_t h = u * UINT32_C(0x9e3779b1);
  h ^= h >> 15;
  h *= UINT32_C(0x85ebca6b);
  h ^= h >> 13;
  return h % opt_shortest_every == 0;
}

/* Returns the reason for a failure, or NULL. */
static const char *check_one(uint32_t u, char *out, int thorough) {
  float v = bits_to_float(u);
  size_t len = scn_f32_format(v, out);
  char *end;

  if (len >= SCN_F32_FMT_MAX || strlen(out) != len)
    return "bad length";
  if (!is_json_number(out))
    return "not a JSON number";
  if ((out[0] == '-') != (int)(u >> 31))
    return "wrong sign";
  float back = strtof(out, &end);
  if (*end != '\0' || float_to_bits(back) != u)
    return "does not round-trip";
  return thorough ? check_thoroughly(u, out) : NULL;
}

static void *worker(void *arg) {
  char out[SCN_F32_FMT_MAX];
  uint64_t nchunks = ((opt_end - opt_start) >> CHUNK_BITS) + 1;

  (void)arg;
  for (;;) {
    uint64_t chunk = atomic_fetch_add(&next_chunk, 1);
    if (chunk >= nchunks)
      break;
    uint64_t lo = opt_start + (chunk << CHUNK_BITS);
    uint64_t hi = lo + (UINT64_C(1) << CHUNK_BITS) - 1;
    if (hi > opt_end)
      hi = opt_end;
    uint64_t checked = 0, failed = 0, thorough = 0;
    for (uint64_t x = lo; x <= hi; x++) {
      uint32_t u = (uint32_t)x;
      if ((u & 0x7f800000u) == 0x7f800000u)
        continue; /* NaN / Inf */
      int deep = sampled(u);
      const char *why = check_one(u, out, deep);
      checked++;
      thorough += (uint64_t)deep;
      if (why) {
        failed++;
        report(u, out, why);
      }
    }
    atomic_fetch_add(&total_checked, checked);
    atomic_fetch_add(&total_failed, failed);
    atomic_fetch_add(&total_shortest, thorough);
  }
  atomic_fetch_add(&workers_done, 1);
  return NULL;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_u64(const char *s, int base, uint64_t max, uint64_t *out) {
  char *end;
  if (!s || !*s)
    return 0;
  unsigned long long v = strtoull(s, &end, base);
  if (*end != '\0' || v > max || s[0] == '-')
    return 0;
  *out = v;
  return 1;
}

static int parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t x;
    if (!strcmp(a, "--threads") && parse_u64(val, 10, 256, &x) && x > 0)
      opt_threads = (unsigned)x;
    else if (!strcmp(a, "--start") && parse_u64(val, 16, 0xffffffffu, &x))
      opt_start = x;
    else if (!strcmp(a, "--end") && parse_u64(val, 16, 0xffffffffu, &x))
      opt_end = x;
    else if (!strcmp(a, "--shortest-every") && parse_u64(val, 10, 0xffffffffu, &x))
      opt_shortest_every = (unsigned)x;
    else
      return 0;
  }
  return opt_start <= opt_end;
}

int main(int argc, char **argv) {
  if (!parse_args(argc, argv)) {
    fprintf(stderr,
            "usage: %s [--threads N] [--start HEX] [--end HEX] "
            "[--shortest-every N]\n",
            argv[0]);
    return 2;
  }

  pthread_t *threads = calloc(opt_threads, sizeof *threads);
  if (!threads) {
    perror("calloc");
    return 2;
  }
  double t0 = now_seconds();
  unsigned started = 0;
  for (; started < opt_threads; started++) {
    if (pthread_create(&threads[started], NULL, worker, NULL) != 0) {
      perror("pthread_create");
      break;
    }
  }
  if (started == 0)
    return 2;

  double total = (double)(opt_end - opt_start + 1);
  double last = t0;
  while (atomic_load(&workers_done) < started) {
    struct timespec nap = {0, 100 * 1000 * 1000};
    nanosleep(&nap, NULL);
    double t = now_seconds();
    if (t - last >= 10.0) {
      last = t;
      uint64_t done = atomic_load(&next_chunk) << CHUNK_BITS;
      double frac = (double)done / total;
      fprintf(stderr,
              "f32_exhaustive: ~%.1f%% (%" PRIu64 " checked, "
              "%" PRIu64 " failed) after %.0f s\n",
              100.0 * (frac > 1.0 ? 1.0 : frac), (uint64_t)atomic_load(&total_checked),
              (uint64_t)atomic_load(&total_failed), t - t0);
    }
  }
  for (unsigned i = 0; i < started; i++)
    pthread_join(threads[i], NULL);
  free(threads);

  uint64_t checked = atomic_load(&total_checked);
  uint64_t failed = atomic_load(&total_failed);
  fprintf(stderr,
          "f32_exhaustive: %.1f s, %u threads, range %08" PRIx64 "..%08" PRIx64
          ", shortest/closest checked on %" PRIu64 "\n",
          now_seconds() - t0, started, opt_start, opt_end, (uint64_t)atomic_load(&total_shortest));
  printf("f32_exhaustive: %" PRIu64 " checked, %" PRIu64 " failed\n", checked, failed);
  return failed != 0 || started != opt_threads;
}

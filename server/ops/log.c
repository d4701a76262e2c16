/* logfmt lines on stderr: ts=... level=... msg="..." key=value ... */
#include "ops/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static int min_level = SCN_LOG_INFO;

void scn_log_set_level(int level) { min_level = level; }

void scn_log(int level, const char *msg, const char *fmt, ...) {
  if (level == SCN_LOG_NOTICE)
    level = SCN_LOG_INFO;
  else if (level < min_level)
    return;
  static const char *names[] = {"debug", "info", "warn", "error"};
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  char line[1024];
  int n = snprintf(line, sizeof line, "ts=%s.%03ldZ level=%s msg=\"%s\"", when,
                   ts.tv_nsec / 1000000, names[level], msg);
  if (fmt && fmt[0] && n > 0 && (size_t)n < sizeof line) {
    line[n++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
  }
  fprintf(stderr, "%s\n", line);
}

/* Written here rather than shared with the daemon: scenectl only needs it for a few dozen short
 * names, so the plain (la + 2) x (lb + 2) table is enough. */
#include "ctl_suggest.h"

#include "wire.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char fold(char c) { return (unsigned char)tolower((unsigned char)c); }

static int min2(int a, int b) { return a < b ? a : b; }

/* The unrestricted distance (Lowrance and Wagner): unlike the optimal string alignment
 * variant, an edit may fall between two transposed characters ("ca" to "abc" is 2, not 3). */
int ctl_distance(const char *a, const char *b, int limit) {
  size_t la = strlen(a), lb = strlen(b);
  if ((la > lb ? la - lb : lb - la) > (size_t)limit)
    return limit + 1; /* at least one edit per character of difference */
  size_t w = lb + 2;
  int *d = malloc((la + 2) * w * sizeof *d);
  if (!d)
    return limit + 1;
  size_t last_row[256] = {0}; /* per character: the last row of a where it was seen */
  int inf = (int)(la + lb);
  d[0] = inf;
  for (size_t i = 0; i <= la; i++) {
    d[(i + 1) * w] = inf;
    d[(i + 1) * w + 1] = (int)i;
  }
  for (size_t j = 0; j <= lb; j++) {
    d[j + 1] = inf;
    d[w + j + 1] = (int)j;
  }
  for (size_t i = 1; i <= la; i++) {
    size_t last_col = 0; /* the last column of b in this row where a[i - 1] matched */
    for (size_t j = 1; j <= lb; j++) {
      size_t i1 = last_row[fold(b[j - 1])], j1 = last_col;
      int cost = 1;
      if (fold(a[i - 1]) == fold(b[j - 1])) {
        cost = 0;
        last_col = j;
      }
      int best = min2(d[i * w + j] + cost, min2(d[(i + 1) * w + j] + 1, d[i * w + j + 1] + 1));
      int swap = d[i1 * w + j1] + (int)(i - i1 - 1) + 1 + (int)(j - j1 - 1);
      d[(i + 1) * w + j + 1] = min2(best, swap);
    }
    last_row[fold(a[i - 1])] = i;
  }
  int dist = d[(la + 1) * w + lb + 1];
  free(d);
  return dist > limit ? limit + 1 : dist;
}

/* Keeps name in out when it is as near as the nearest so far (*best), or nearer. */
static void consider(const char *word, const char *name, int *best, const char **out, int *n) {
  int dist = ctl_distance(word, name, CTL_SUGGEST_DISTANCE);
  if (dist > *best)
    return;
  if (dist < *best) {
    *best = dist;
    *n = 0;
  }
  if (*n < CTL_SUGGEST_MAX)
    out[(*n)++] = name;
}

int ctl_suggest(const char *word, const char *const *extra, const char **out) {
  int best = CTL_SUGGEST_DISTANCE, n = 0;
  for (unsigned i = 0; i < scn_command_count; i++)
    consider(word, scn_commands[i].name, &best, out, &n);
  for (; extra && *extra; extra++)
    consider(word, *extra, &best, out, &n);
  return n;
}

int ctl_suggest_text(const char *word, const char *const *extra, char *out, size_t cap) {
  const char *names[CTL_SUGGEST_MAX];
  int n = ctl_suggest(word, extra, names);
  size_t len = 0;
  if (cap)
    out[0] = '\0';
  for (int i = 0; i < n && len < cap; i++) {
    const char *sep = i == 0 ? "; did you mean " : i == n - 1 ? " or " : ", ";
    int k = snprintf(out + len, cap - len, "%s\"%s\"%s", sep, names[i], i == n - 1 ? "?" : "");
    len += k > 0 ? (size_t)k : 0;
  }
  return n;
}

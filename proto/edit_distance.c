#include "edit_distance.h"

#include <string.h>

#define LONGEST 63

unsigned scn_edit_distance(const char *a, const char *b, unsigned max) {
  size_t n = strnlen(a, LONGEST + 1), m = strnlen(b, LONGEST + 1);
  if (n > LONGEST || m > LONGEST || (n > m ? n - m : m - n) > max)
    return max + 1;
  /* Three rows of the table: the one before the previous one is what a swap reads. */
  unsigned rows[3][LONGEST + 1];
  unsigned *before = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= m; j++)
    prev[j] = (unsigned)j;
  for (size_t i = 1; i <= n; i++) {
    cur[0] = (unsigned)i;
    unsigned row_min = cur[0];
    for (size_t j = 1; j <= m; j++) {
      unsigned cost = a[i - 1] != b[j - 1];
      unsigned d = prev[j - 1] + cost;
      if (prev[j] + 1 < d)
        d = prev[j] + 1;
      if (cur[j - 1] + 1 < d)
        d = cur[j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && before[j - 2] + 1 < d)
        d = before[j - 2] + 1;
      cur[j] = d;
      if (d < row_min)
        row_min = d;
    }
    if (row_min > max)
      return max + 1; /* every path through this row is already too long */
    unsigned *t = before;
    before = prev;
    prev = cur;
    cur = t;
  }
  return prev[m] > max ? max + 1 : prev[m];
}

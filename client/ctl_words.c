#include "ctl_words.h"

#include <ctype.h>
#include <stdbool.h>

int ctl_split_words(char *s, char **words, int max) {
  int n = 0;
  while (*s && n < max) {
    while (isspace((unsigned char)*s))
      s++;
    if (!*s)
      break;
    words[n++] = s;
    int depth = 0;
    bool quoted = false;
    for (; *s; s++) {
      if (quoted) {
        if (*s == '\\' && s[1])
          s++;
        else if (*s == '"')
          quoted = false;
      } else if (*s == '"') {
        quoted = true;
      } else if (*s == '[' || *s == '{') {
        depth++;
      } else if ((*s == ']' || *s == '}') && depth > 0) {
        depth--;
      } else if (isspace((unsigned char)*s) && depth == 0) {
        break;
      }
    }
    if (*s)
      *s++ = '\0';
  }
  return n;
}

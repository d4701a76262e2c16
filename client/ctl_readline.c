/* readline's completion interface hands its generator no context, so the candidates of the
 * current Tab live in a file-scope variable; the prompt is single-threaded. */
#include "ctl_readline.h"

#include "ctl_complete.h"

#include <ctype.h>
#include <editline/readline.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ctl_completions candidates;

static char *next_candidate(const char *text, int state) {
  static int next;
  (void)text; /* the candidates already begin with it */
  if (state == 0)
    next = 0;
  return next < candidates.count ? strdup(candidates.items[next++]) : NULL;
}

static char **complete(const char *text, int start, int end) {
  (void)end;
  rl_attempted_completion_over = 1; /* no file names when nothing matches */
  const char *line = rl_line_buffer ? rl_line_buffer : "";
  size_t len = strlen(line), at = start > 0 ? (size_t)start : 0;
  char *before = strndup(line, at < len ? at : len);
  if (!before)
    return NULL;
  ctl_complete(before, text, &candidates);
  free(before);
  /* A command name is followed by a space; "key=" by its value. */
  rl_completion_append_character = candidates.fields ? '\0' : ' ';
  return candidates.count ? rl_completion_matches(text, next_candidate) : NULL;
}

void ctl_readline_init(void) {
  rl_readline_name = "scenectl";
  rl_attempted_completion_function = complete;
}

char *ctl_readline(const char *prompt) {
  char *line = readline(prompt);
  bool words = false;
  for (const char *s = line; s && *s && !words; s++)
    words = !isspace((unsigned char)*s);
  if (words)
    add_history(line);
  return line;
}

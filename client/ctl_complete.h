/* Tab completion at scenectl's prompt, as data: what may complete the word under the cursor,
 * from the command table. The line editor's glue is ctl_readline.c. */
#ifndef SCN_CTL_COMPLETE_H
#define SCN_CTL_COMPLETE_H

#include <stdbool.h>

#define CTL_COMPLETE_MAX 64
#define CTL_COMPLETE_LEN 48

typedef struct ctl_completions {
  int count;
  bool fields; /* the candidates are "key=": no space goes after one, a value follows */
  char items[CTL_COMPLETE_MAX][CTL_COMPLETE_LEN];
} ctl_completions;

/* The words the prompt takes beside the command table's (NULL-terminated). */
extern const char *const ctl_prompt_words[];

/* Fills out with the candidates for word, whose line so far (everything before it) is before:
 * - the first word: the command names, then the prompt's own words (help, quit, exit);
 * - the word after "help": the command names;
 * - a later word of a command in the table: "key=" for each of its fields, required then
 *   optional, but those already given on the line;
 * each beginning with word, in that order. Nothing after a JSON request, an unknown command,
 * inside a quoted or bracketed value or right after "key=" (a value, not a new word). */
void ctl_complete(const char *before, const char *word, ctl_completions *out);

#endif

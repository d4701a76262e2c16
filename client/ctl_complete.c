#include "ctl_complete.h"

#include "ctl_words.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ctl_prompt_words[] = {"help", "quit", "exit", NULL};

static void add(ctl_completions *out, const char *word, const char *name, const char *suffix) {
  if (out->count == CTL_COMPLETE_MAX || strncmp(name, word, strlen(word)) != 0)
    return;
  snprintf(out->items[out->count++], CTL_COMPLETE_LEN, "%s%s", name, suffix);
}

static void add_commands(ctl_completions *out, const char *word) {
  for (unsigned i = 0; i < scn_command_count; i++)
    add(out, word, scn_commands[i].name, "");
}

/* True when one of words is "key=..." for this key. */
static bool given(char **words, int n, const char *key) {
  size_t len = strlen(key);
  for (int i = 0; i < n; i++)
    if (strncmp(words[i], key, len) == 0 && words[i][len] == '=')
      return true;
  return false;
}

static void add_fields(ctl_completions *out, const char *word, const scn_command_info *c,
                       char **words, int n) {
  out->fields = true;
  scn_fieldset sets[2] = {c->required, c->optional};
  for (int s = 0; s < 2; s++)
    for (int f = 0; f < SCN_FIELD_COUNT; f++) {
      const char *key = scn_field_name((scn_field)f);
      if ((sets[s] & ((scn_fieldset)1 << f)) && !given(words, n, key))
        add(out, word, key, "=");
    }
}

void ctl_complete(const char *before, const char *word, ctl_completions *out) {
  out->count = 0;
  out->fields = false;
  size_t len = strlen(before);
  char *copy = malloc(len + 1), *words[128];
  if (!copy)
    return;
  memcpy(copy, before, len + 1);
  int n = ctl_split_words(copy, words, 128);
  /* The last word reaching the end of before: word continues it (an open quote or bracket, or
   * "key=" with the value to come), so it is not a word of its own. */
  bool fresh = n == 0 || (size_t)(words[n - 1] - copy) + strlen(words[n - 1]) < len;
  if (!fresh || n == 128) {
    /* nothing */
  } else if (n == 0) {
    add_commands(out, word);
    for (const char *const *w = ctl_prompt_words; *w; w++)
      add(out, word, *w, "");
  } else if (strcmp(words[0], "help") == 0) {
    if (n == 1)
      add_commands(out, word);
  } else {
    const scn_command_info *c = scn_command_find(words[0]);
    if (c)
      add_fields(out, word, c, words + 1, n - 1);
  }
  free(copy);
}

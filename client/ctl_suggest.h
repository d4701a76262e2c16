/* "Did you mean": the commands nearest to a mistyped one, by Damerau-Levenshtein distance. */
#ifndef SCN_CTL_SUGGEST_H
#define SCN_CTL_SUGGEST_H

#include <stddef.h>

/* How far a name may be from the word typed and still be suggested, in edits. */
#define CTL_SUGGEST_DISTANCE 2
/* How many names a suggestion offers at most (those tied at the least distance). */
#define CTL_SUGGEST_MAX 3

/* The Damerau-Levenshtein distance between a and b: the fewest insertions, deletions,
 * substitutions and transpositions of two adjacent characters that turn one into the other,
 * letters compared regardless of case (a word in the wrong case is near its name). Returns
 * limit + 1 when the distance is over limit, and when memory runs out. */
int ctl_distance(const char *a, const char *b, int limit);

/* The names nearest to word, at most CTL_SUGGEST_DISTANCE edits away, among the command table's
 * and those of extra (NULL-terminated; NULL for none): up to CTL_SUGGEST_MAX of them, ties in
 * the table's order then extra's, into out. Returns how many. */
int ctl_suggest(const char *word, const char *const *extra, const char **out);

/* The suggestion as text, "; did you mean "a"?" or "; did you mean "a" or "b"?", or "" when
 * there is none; returns the number of names in it. */
int ctl_suggest_text(const char *word, const char *const *extra, char *out, size_t cap);

#endif

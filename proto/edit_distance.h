/* How far apart two short names are, for "did you mean" suggestions (request fields in the
 * daemon's errors and in scenectl's warnings). */
#ifndef SCN_EDIT_DISTANCE_H
#define SCN_EDIT_DISTANCE_H

/* The Damerau-Levenshtein distance between the byte strings a and b, in its optimal string
 * alignment form: the fewest insertions, deletions, substitutions and swaps of two adjacent
 * bytes that turn a into b, no substring edited twice ("partal" -> "partial" is 1, "wrold" ->
 * "world" is 1). Distances over max come back as max + 1, as do strings over 63 bytes (the
 * names compared are far shorter), so a long key costs nothing. */
unsigned scn_edit_distance(const char *a, const char *b, unsigned max);

#endif

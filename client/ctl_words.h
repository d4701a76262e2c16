/* The words of a scenectl prompt line: split on spaces outside double quotes and brackets, so
 * t=[1, 2, 3] and name="a b" each stay one word. The prompt and its Tab completion split alike. */
#ifndef SCN_CTL_WORDS_H
#define SCN_CTL_WORDS_H

/* Splits s in place (a '\0' after each word) into at most max words; returns how many. A word
 * still inside quotes or brackets at the end of s runs to the end of s. */
int ctl_split_words(char *s, char **words, int max);

#endif

/* scenectl's prompt line editor: libedit's readline, with Tab completing command and field
 * names (ctl_complete.h). */
#ifndef SCN_CTL_READLINE_H
#define SCN_CTL_READLINE_H

/* Sets up completion; call once before the first ctl_readline. */
void ctl_readline_init(void);

/* The next line typed (malloc'd, the caller frees it), or NULL at the end of input. A line
 * with more than blanks goes into the history. */
char *ctl_readline(const char *prompt);

#endif

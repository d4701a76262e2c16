/* logfmt lines on stderr: ts=... level=... msg="..." key=value ... */
#ifndef SCN_LOG_H
#define SCN_LOG_H

/* SCN_LOG_NOTICE prints as info at every level: lines that scripts wait for (listening on). */
enum { SCN_LOG_DEBUG, SCN_LOG_INFO, SCN_LOG_WARN, SCN_LOG_ERROR, SCN_LOG_NOTICE };

void scn_log(int level, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void scn_log_set_level(int level);

#endif

/* scenectl's check of a request's members against its command's fields in the command table
 * (proto/wire.h), before it is sent. */
#ifndef SCN_CTL_FIELDS_H
#define SCN_CTL_FIELDS_H

#include <cjson/cJSON.h>
#include <stdio.h>

/* Writes a warning to out for each member of req (a request with its "cmd") that its command
 * does not take, worded as the daemon's refusal, with the field it likely misspells:
 *   scenectl: warning: transform.set_local: unknown field "partal" (did you mean "partial"?)
 * The request is still sent, so the daemon's answer decides (one of another version may take
 * other fields). Nothing is written for a command the table does not know: the daemon names
 * that. Returns the number of members warned about. */
int ctl_fields_warn(const cJSON *req, FILE *out);

#endif

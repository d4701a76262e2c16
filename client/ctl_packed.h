/* scenectl's arguments for packed frames: packed=STEP (the step alone), packed='{...}' (the
 * protocol's object) and the short forms packed.step=S and packed.origin=x,y,z, all merged into
 * one "packed" object of a subscribe or subscribe.update request. */
#ifndef SCN_CTL_PACKED_H
#define SCN_CTL_PACKED_H

#include <cjson/cJSON.h>
#include <stdbool.h>

/* True when arg is one of the forms above (whether its value is good or not). */
bool ctl_packed_arg(const char *arg);

/* Merges arg into req's "packed" object (made when absent; a member given again is replaced).
 * -1 with the reason on stderr when the value is malformed. */
int ctl_packed_add(cJSON *req, const char *arg);

#endif

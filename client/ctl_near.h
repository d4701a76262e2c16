/* scenectl's arguments for a near region: near='{...}' (the protocol's object) and the short
 * forms near.point=x,y,z, near.entity=E, near.radius=R, near.margin=M and
 * near.bands=r:hz,r:hz, all merged into one "near" object of a request. */
#ifndef SCN_CTL_NEAR_H
#define SCN_CTL_NEAR_H

#include <cjson/cJSON.h>
#include <stdbool.h>

/* True when arg is one of the forms above (whether its value is good or not). */
bool ctl_near_arg(const char *arg);

/* Merges arg into req's "near" object (made when absent; a member given again is replaced;
 * near=null makes it null, for subscribe.update). -1 with the reason on stderr when the value
 * is malformed. */
int ctl_near_add(cJSON *req, const char *arg);

/* What the short forms are made of (for ctl_packed.c as well): a finite number spanning [s, end)
 * exactly, and "x,y,z" as an array of three numbers (NULL when malformed). */
bool ctl_number_in(const char *s, const char *end, double *out);
cJSON *ctl_point(const char *s);

#endif

/* scenectl's near arguments, parsed strictly: a shell user's typo is a usage error here rather
 * than a string the daemon refuses, or a number read from half of one. */
#include "ctl_near.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ctl_near_arg(const char *arg) {
  return strncmp(arg, "near=", 5) == 0 || strncmp(arg, "near.", 5) == 0;
}

/* A finite number spanning [s, end) exactly. */
bool ctl_number_in(const char *s, const char *end, double *out) {
  char text[64];
  size_t len = (size_t)(end - s);
  if (len == 0 || len >= sizeof text || isspace((unsigned char)*s))
    return false;
  memcpy(text, s, len);
  text[len] = '\0';
  char *stop;
  errno = 0;
  *out = strtod(text, &stop);
  return *stop == '\0' && errno != ERANGE && isfinite(*out);
}

static bool number(const char *s, double *out) { return ctl_number_in(s, s + strlen(s), out); }

cJSON *ctl_point(const char *s) {
  double v[3];
  for (int i = 0; i < 3; i++) {
    const char *end = i < 2 ? strchr(s, ',') : s + strlen(s);
    if (!end || !ctl_number_in(s, end, &v[i]))
      return NULL;
    s = end + 1;
  }
  return cJSON_CreateDoubleArray(v, 3);
}

/* "r:hz,r:hz,...": [{"radius":r,"hz":hz},...], NULL when malformed. */
static cJSON *bands(const char *s) {
  cJSON *list = cJSON_CreateArray();
  for (bool more = list != NULL; more;) {
    const char *colon = strchr(s, ':'), *end = strchr(s, ',');
    more = end != NULL;
    if (!end)
      end = s + strlen(s);
    double radius, hz;
    cJSON *band = NULL;
    if (!colon || colon > end || !ctl_number_in(s, colon, &radius) ||
        !ctl_number_in(colon + 1, end, &hz) || !(band = cJSON_CreateObject()) ||
        !cJSON_AddNumberToObject(band, "radius", radius) ||
        !cJSON_AddNumberToObject(band, "hz", hz) || !cJSON_AddItemToArray(list, band)) {
      cJSON_Delete(band);
      cJSON_Delete(list);
      return NULL;
    }
    s = end + 1;
  }
  return list;
}

/* "E": an entity id (digits only), NULL otherwise. */
static cJSON *entity(const char *s) {
  double id;
  if (!*s || strspn(s, "0123456789") != strlen(s) || !number(s, &id))
    return NULL;
  return cJSON_CreateNumber(id);
}

static cJSON *scalar(const char *s) {
  double v;
  return number(s, &v) ? cJSON_CreateNumber(v) : NULL;
}

typedef struct short_form {
  const char *key;
  cJSON *(*parse)(const char *value);
  const char *expected;
} short_form;

static const short_form forms[] = {
    {"point", ctl_point, "three numbers x,y,z"},
    {"entity", entity, "an entity id"},
    {"radius", scalar, "a number"},
    {"margin", scalar, "a number"},
    {"bands", bands, "radius:hz pairs, comma-separated (10:60,50:10)"},
};

/* req's "near" object, made when absent or null (a later argument wins); NULL when out of
 * memory. */
static cJSON *near_of(cJSON *req) {
  cJSON *near = cJSON_GetObjectItemCaseSensitive(req, "near");
  if (cJSON_IsObject(near))
    return near;
  cJSON_DeleteItemFromObjectCaseSensitive(req, "near");
  return cJSON_AddObjectToObject(req, "near");
}

static void set_member(cJSON *near, const char *key, cJSON *value) {
  cJSON_DeleteItemFromObjectCaseSensitive(near, key);
  cJSON_AddItemToObject(near, key, value);
}

/* near='{...}': its members merged into the region; near=null: null (subscribe.update's "no
 * region"). */
static int add_object(cJSON *req, const char *arg, const char *text) {
  cJSON *given = cJSON_Parse(text);
  if (cJSON_IsNull(given)) {
    cJSON_DeleteItemFromObjectCaseSensitive(req, "near");
    cJSON_AddItemToObject(req, "near", given);
    return 0;
  }
  cJSON *near = cJSON_IsObject(given) ? near_of(req) : NULL;
  if (!near) {
    fprintf(stderr,
            "scenectl: near must be a JSON object such as '{\"entity\":5,\"radius\":10}', got "
            "\"%s\"\n",
            arg);
    cJSON_Delete(given);
    return -1;
  }
  while (given->child) {
    cJSON *m = cJSON_DetachItemViaPointer(given, given->child);
    cJSON_DeleteItemFromObjectCaseSensitive(near, m->string);
    cJSON_AddItemToObject(near, m->string, m);
  }
  cJSON_Delete(given);
  return 0;
}

int ctl_near_add(cJSON *req, const char *arg) {
  if (strncmp(arg, "near=", 5) == 0)
    return add_object(req, arg, arg + 5);
  const char *key = arg + 5, *eq = strchr(key, '=');
  size_t klen = eq ? (size_t)(eq - key) : strlen(key);
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    if (strlen(forms[i].key) != klen || strncmp(forms[i].key, key, klen) != 0)
      continue;
    cJSON *value = eq ? forms[i].parse(eq + 1) : NULL, *near = value ? near_of(req) : NULL;
    if (!near) {
      fprintf(stderr, "scenectl: near.%s takes %s, got \"%s\"\n", forms[i].key, forms[i].expected,
              arg);
      cJSON_Delete(value);
      return -1;
    }
    set_member(near, forms[i].key, value);
    return 0;
  }
  fprintf(stderr,
          "scenectl: unknown near field in \"%s\" (near.point, near.entity, near.radius, "
          "near.margin, near.bands)\n",
          arg);
  return -1;
}

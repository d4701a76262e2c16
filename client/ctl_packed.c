/* scenectl's packed arguments, parsed strictly as the near ones are (ctl_near.c): a typo is a
 * usage error here, not a request the daemon refuses. */
#include "ctl_packed.h"

#include "ctl_near.h"

#include <stdio.h>
#include <string.h>

bool ctl_packed_arg(const char *arg) {
  return strncmp(arg, "packed=", 7) == 0 || strncmp(arg, "packed.", 7) == 0;
}

/* req's "packed" object, made when absent; NULL when out of memory. */
static cJSON *packed_of(cJSON *req) {
  cJSON *packed = cJSON_GetObjectItemCaseSensitive(req, "packed");
  if (cJSON_IsObject(packed))
    return packed;
  cJSON_DeleteItemFromObjectCaseSensitive(req, "packed");
  return cJSON_AddObjectToObject(req, "packed");
}

static int set_member(cJSON *req, const char *key, cJSON *value) {
  cJSON *packed = value ? packed_of(req) : NULL;
  if (!packed) {
    cJSON_Delete(value);
    return -1;
  }
  cJSON_DeleteItemFromObjectCaseSensitive(packed, key);
  cJSON_AddItemToObject(packed, key, value);
  return 0;
}

static cJSON *step_of(const char *s) {
  double v;
  return ctl_number_in(s, s + strlen(s), &v) ? cJSON_CreateNumber(v) : NULL;
}

/* packed='{...}': its members merged into the object. */
static int add_object(cJSON *req, const char *arg, cJSON *given) {
  cJSON *packed = cJSON_IsObject(given) ? packed_of(req) : NULL;
  if (!packed) {
    fprintf(stderr,
            "scenectl: packed takes a step (packed=0.001) or a JSON object such as "
            "'{\"step\":0.001,\"origin\":[0,0,0]}', got \"%s\"\n",
            arg);
    cJSON_Delete(given);
    return -1;
  }
  while (given->child) {
    cJSON *m = cJSON_DetachItemViaPointer(given, given->child);
    cJSON_DeleteItemFromObjectCaseSensitive(packed, m->string);
    cJSON_AddItemToObject(packed, m->string, m);
  }
  cJSON_Delete(given);
  return 0;
}

int ctl_packed_add(cJSON *req, const char *arg) {
  if (strncmp(arg, "packed=", 7) == 0) {
    const char *value = arg + 7;
    if (*value == '{')
      return add_object(req, arg, cJSON_Parse(value));
    if (set_member(req, "step", step_of(value)) == 0)
      return 0;
    return add_object(req, arg, NULL);
  }
  const char *key = arg + 7, *eq = strchr(key, '=');
  if (eq && eq - key == 4 && strncmp(key, "step", 4) == 0) {
    if (set_member(req, "step", step_of(eq + 1)) == 0)
      return 0;
    fprintf(stderr, "scenectl: packed.step takes a number, got \"%s\"\n", arg);
    return -1;
  }
  if (eq && eq - key == 6 && strncmp(key, "origin", 6) == 0) {
    if (set_member(req, "origin", ctl_point(eq + 1)) == 0)
      return 0;
    fprintf(stderr, "scenectl: packed.origin takes three numbers x,y,z, got \"%s\"\n", arg);
    return -1;
  }
  fprintf(stderr, "scenectl: unknown packed field in \"%s\" (packed.step, packed.origin)\n", arg);
  return -1;
}

#include "ctl_fields.h"

#include "wire.h"

int ctl_fields_warn(const cJSON *req, FILE *out) {
  const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd");
  const scn_command_info *c = cJSON_IsString(cmd) ? scn_command_find(cmd->valuestring) : NULL;
  if (!c)
    return 0;
  scn_fieldset taken = scn_command_takes(c);
  int warned = 0;
  for (const cJSON *m = req->child; m; m = m->next) {
    scn_field f = scn_field_find(m->string);
    if (f < SCN_FIELD_COUNT && (taken & ((scn_fieldset)1 << f)))
      continue;
    char text[256];
    scn_unknown_field_text(m->string, taken, text, sizeof text);
    fprintf(out, "scenectl: warning: %s: %s\n", c->name, text);
    warned++;
  }
  return warned;
}

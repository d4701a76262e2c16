#include "scn_core.h"

const char *scn_err_name(int err) {
  switch (err) {
#define SCN_ERR_NAME(name, code, msg)                                                              \
  case code:                                                                                       \
    return #name;
    SCN_ERRORS(SCN_ERR_NAME)
#undef SCN_ERR_NAME
  }
  return "UNKNOWN";
}

const char *scn_err_message(int err) {
  switch (err) {
#define SCN_ERR_MSG(name, code, msg)                                                               \
  case code:                                                                                       \
    return msg;
    SCN_ERRORS(SCN_ERR_MSG)
#undef SCN_ERR_MSG
  }
  return "unknown error";
}

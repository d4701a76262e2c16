#include "ops/config.h"

#include "wire.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum kind {
  K_ADDR,
  K_UINT,
  K_SIZE,
  K_HZ,
  K_STRING,
  K_LEVEL,
  K_FSYNC,
  K_INTEREST,
  K_SECONDS,
  K_BOOL,
  K_DURABILITY
} kind;

/* X(flag, field, kind, default, min, max, help) */
#define SETTINGS(X)                                                                                \
  X("listen", listen, K_ADDR, "127.0.0.1:7878", 0, 0,                                              \
    "protocol address HOST:PORT (port 0: any free port)")                                          \
  X("http", http, K_ADDR, "127.0.0.1:7879", 0, 0,                                                  \
    "HTTP address for /metrics, /healthz, /readyz, the staging view and /ws (HOST:PORT, port 0: "  \
    "any free port; off: none)")                                                                   \
  X("tick-hz", tick_hz, K_HZ, "60", 1, 1000, "stream ticks per second")                            \
  X("auth-token", auth_token, K_STRING, "", 0, 255,                                                \
    "token every connection must give in hello (empty: none)")                                     \
  X("max-line", max_line, K_SIZE, "1048576", 64, 1073741824, "longest request line in bytes")      \
  X("max-clients", max_clients, K_UINT, "10000", 1, 1000000, "connections at once")                \
  X("max-worlds", max_worlds, K_UINT, "1024", 1, 1000000, "worlds at once")                        \
  X("max-transforms", max_transforms, K_UINT, "10000000", 1, 4000000000, "transforms per world")   \
  X("output-limit", output_limit, K_SIZE, "67108864", 4096, 17179869184,                           \
    "bytes queued for one connection beyond which its requests get LIMIT and its streams lag")     \
  X("data", data_dir, K_STRING, "", 0, 4095,                                                       \
    "snapshot and journal directory, loaded at start (empty: nothing persisted)")                  \
  X("fsync", fsync, K_FSYNC, "everysec", 0, 2,                                                     \
    "journal flush: always (before each reply), everysec, or no")                                  \
  X("interest", interest, K_INTEREST, "grid", 0, 1,                                                \
    "how subscriptions by distance find their transforms: grid (the spatial index) or naive "      \
    "(every transform tested, a reference for benchmarks)")                                        \
  X("save-interval", save_interval, K_SECONDS, "300", 0, 31536000,                                 \
    "seconds between automatic snapshots when something changed (0: only at shutdown and on "      \
    "save)")                                                                                       \
  X("recover", recover, K_BOOL, "false", 0, 1,                                                     \
    "start from damaged data, keeping what is valid (flag without a value)")                       \
  X("log-level", log_level, K_LEVEL, "info", 0, 3, "debug, info, warn or error")                   \
  X("www", www, K_STRING, "", 0, 4095,                                                             \
    "directory of the staging view served on the HTTP port (empty: www next to the executable)")   \
  X("ws-origins", ws_origins, K_STRING, "", 0, 1023,                                               \
    "browser origins allowed to open /ws besides the daemon's own pages, comma-separated (*: "     \
    "any)")                                                                                        \
  X("tls-cert", tls_cert, K_STRING, "", 0, 4095,                                                   \
    "PEM certificate (with its chain): both ports speak TLS (HTTPS and wss:// on the HTTP port)")  \
  X("tls-key", tls_key, K_STRING, "", 0, 4095, "PEM private key of --tls-cert")                    \
  X("tls-ca", tls_ca, K_STRING, "", 0, 4095,                                                       \
    "PEM CA certificates: every client must present a certificate signed by one of them")          \
  X("tls-handshake-timeout", tls_handshake_timeout, K_SECONDS, "10", 0.05, 3600,                   \
    "seconds a client has to complete the TLS handshake before it is closed")                      \
  X("acl", acl, K_STRING, "", 0, 4095,                                                             \
    "access list file: one rule per line, TOKEN_SHA256 RIGHTS PREFIXES (SIGHUP reloads it)")       \
  X("cluster", cluster, K_STRING, "", 0, 2047,                                                     \
    "etcd endpoints (http://HOST:PORT or https://HOST:PORT, comma-separated): share the worlds "   \
    "with other daemons (needs --data, the directory they all share)")                             \
  X("etcd-ca", etcd_ca, K_STRING, "", 0, 4095,                                                     \
    "PEM CA certificates one of which must have signed etcd's certificate (https:// --cluster; "   \
    "empty: the system's store)")                                                                  \
  X("etcd-cert", etcd_cert, K_STRING, "", 0, 4095,                                                 \
    "PEM client certificate presented to etcd, for its --client-cert-auth (https:// --cluster)")   \
  X("etcd-key", etcd_key, K_STRING, "", 0, 4095, "PEM private key of --etcd-cert (unencrypted)")   \
  X("node", node, K_STRING, "", 0, 64,                                                             \
    "this daemon's name in the cluster (empty: derived from the advertised address)")              \
  X("advertise", advertise, K_STRING, "", 0, 127,                                                  \
    "HOST:PORT where clients reach this daemon in the cluster (empty: the listen address)")        \
  X("lease-ttl", lease_ttl, K_SECONDS, "5", 1, 3600,                                               \
    "seconds the cluster's lease lives without renewal (renewed every third of it)")               \
  X("replicas", replicas, K_UINT, "0", 0, SCN_REPLICAS_MAX,                                        \
    "followers kept live for each group on other daemons, each daemon with its own --data (0: "    \
    "the daemons share one --data; needs --cluster)")                                              \
  X("durability", durability, K_DURABILITY, "sync", 0, 1,                                          \
    "with --replicas: sync (a change is answered once the in-sync followers have it) or async "    \
    "(at once)")                                                                                   \
  X("replica-timeout", replica_timeout_ms, K_UINT, "1000", 1, 3600000,                             \
    "milliseconds a follower may take to confirm a change before it leaves the in-sync set")       \
  X("cluster-token", cluster_token, K_STRING, "", 0, 255,                                          \
    "with --replicas: the token a follower gives its group's owner in hello (empty: "              \
    "--auth-token); with --acl its rule needs the cluster right")                                  \
  X("cluster-ca", cluster_ca, K_STRING, "", 0, 4095,                                               \
    "with --replicas and --tls-cert: PEM CA certificates one of which signed the other daemons' "  \
    "certificates, which a follower checks when it dials its group's owner (empty: --tls-ca, "     \
    "else the system's store)")                                                                    \
  X("replica-backlog", replica_backlog, K_SIZE, "8388608", 4096, 17179869184,                      \
    "bytes of a group's recent changes its owner keeps for followers that fall behind (beyond "    \
    "them a follower gets a whole copy)")

typedef struct setting {
  const char *flag;
  kind kind;
  const char *def;
  double min, max;
  const char *help;
  size_t offset;
} setting;

static const setting settings[] = {
#define SETTING_ROW(flag, field, kind, def, min, max, help)                                        \
  {flag, kind, def, min, max, help, offsetof(scn_config, field)},
    SETTINGS(SETTING_ROW)
#undef SETTING_ROW
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

static const char *levels[] = {"debug", "info", "warn", "error"};
static const char *fsyncs[] = {"always", "everysec", "no"};
static const char *interests[] = {"grid", "naive"};
static const char *durabilities[] = {"sync", "async"};

const char *scn_log_level_name(int level) {
  return level >= 0 && level <= 3 ? levels[level] : "info";
}

static bool parse_addr(const char *v, scn_addr *a) {
  const char *colon = strrchr(v, ':');
  if (!colon || colon == v || (size_t)(colon - v) >= sizeof a->host)
    return false;
  char *end;
  errno = 0;
  long port = strtol(colon + 1, &end, 10);
  if (errno || *end || end == colon + 1 || port < 0 || port > 65535)
    return false;
  memcpy(a->host, v, (size_t)(colon - v));
  a->host[colon - v] = '\0';
  /* [::1]:7878 */
  if (a->host[0] == '[') {
    size_t n = strlen(a->host);
    if (n < 3 || a->host[n - 1] != ']')
      return false;
    memmove(a->host, a->host + 1, n - 2);
    a->host[n - 2] = '\0';
  }
  /* A numeric address or a name: scn_config_load resolves the value that wins. */
  if (!a->host[0])
    return false;
  a->port = (int)port;
  a->off = false;
  return true;
}

/* The addresses of a host (a name or a numeric address), once, at start, so that a name that
 * does not resolve is a bad setting like any other: one line, exit 2, nothing bound. */
static bool resolve_addr(scn_addr *a, const char *flag, char *err, size_t errlen) {
  if (a->off)
    return true;
  char service[8];
  snprintf(service, sizeof service, "%d", a->port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV},
                  *res;
  int rc = getaddrinfo(a->host, service, &hints, &res);
  if (rc != 0) {
    snprintf(err, errlen, "--%s: cannot resolve \"%s\": %s", flag, a->host,
             rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    return false;
  }
  a->count = 0;
  for (const struct addrinfo *ai = res; ai && a->count < SCN_ADDR_RESOLVED_MAX; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof a->resolved[0])
      continue;
    struct sockaddr_storage sa = {0};
    memcpy(&sa, ai->ai_addr, ai->ai_addrlen);
    bool seen = false;
    for (int k = 0; k < a->count && !seen; k++)
      seen = memcmp(&a->resolved[k], &sa, sizeof sa) == 0;
    if (!seen)
      a->resolved[a->count++] = sa;
  }
  freeaddrinfo(res);
  if (a->count == 0) {
    snprintf(err, errlen, "--%s: \"%s\" resolves to no address", flag, a->host);
    return false;
  }
  return true;
}

/* Sizes accept a k, m or g suffix (powers of 1024). */
static bool parse_number(const char *v, bool size, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (errno || end == v || !isfinite(d))
    return false;
  if (size && *end) {
    switch (tolower((unsigned char)*end)) {
    case 'k':
      d *= 1024;
      break;
    case 'm':
      d *= 1024 * 1024;
      break;
    case 'g':
      d *= 1024.0 * 1024 * 1024;
      break;
    default:
      return false;
    }
    end++;
    if (*end == 'b' || *end == 'B')
      end++;
  }
  if (*end)
    return false;
  *out = d;
  return true;
}

static bool apply(scn_config *c, const setting *s, const char *v, const char *origin, char *err,
                  size_t errlen) {
  void *field = (char *)c + s->offset;
  double d;
  switch (s->kind) {
  case K_ADDR:
    if (strcmp(s->flag, "http") == 0 && strcmp(v, "off") == 0) {
      ((scn_addr *)field)->off = true;
      return true;
    }
    if (parse_addr(v, field))
      return true;
    snprintf(err, errlen,
             "%s: invalid value for %s: \"%s\" (expected HOST:PORT, such as 127.0.0.1:7878, "
             "[::1]:7878 or localhost:7878)",
             origin, s->flag, v);
    return false;
  case K_STRING:
    /* An empty token would quietly turn access control off (a variable that expanded empty). */
    if (strcmp(s->flag, "auth-token") == 0 && !*v && strcmp(origin, "default") != 0) {
      snprintf(err, errlen, "%s: the auth token must not be empty (leave it unset for none)",
               origin);
      return false;
    }
    if (strlen(v) <= (size_t)s->max) {
      strcpy(field, v);
      return true;
    }
    snprintf(err, errlen, "%s: value for %s is longer than %.0f bytes", origin, s->flag, s->max);
    return false;
  case K_LEVEL:
    for (int i = 0; i < 4; i++)
      if (strcmp(v, levels[i]) == 0) {
        *(int *)field = i;
        return true;
      }
    snprintf(err, errlen, "%s: invalid value for %s: \"%s\" (expected debug, info, warn or error)",
             origin, s->flag, v);
    return false;
  case K_FSYNC:
    for (int i = 0; i < 3; i++)
      if (strcmp(v, fsyncs[i]) == 0) {
        *(int *)field = i;
        return true;
      }
    snprintf(err, errlen, "%s: invalid value for %s: \"%s\" (expected always, everysec or no)",
             origin, s->flag, v);
    return false;
  case K_INTEREST:
    for (int i = 0; i < 2; i++)
      if (strcmp(v, interests[i]) == 0) {
        *(int *)field = i;
        return true;
      }
    snprintf(err, errlen, "%s: invalid value for %s: \"%s\" (expected grid or naive)", origin,
             s->flag, v);
    return false;
  case K_DURABILITY:
    for (int i = 0; i < 2; i++)
      if (strcmp(v, durabilities[i]) == 0) {
        *(int *)field = i;
        return true;
      }
    snprintf(err, errlen, "%s: invalid value for %s: \"%s\" (expected sync or async)", origin,
             s->flag, v);
    return false;
  case K_BOOL:
    if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes")) {
      *(bool *)field = true;
      return true;
    }
    if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no")) {
      *(bool *)field = false;
      return true;
    }
    snprintf(err, errlen, "%s: invalid value for %s: \"%s\" (expected true or false)", origin,
             s->flag, v);
    return false;
  case K_SECONDS:
  case K_UINT:
  case K_SIZE:
  case K_HZ:
    if (!parse_number(v, s->kind == K_SIZE, &d) || d < s->min || d > s->max ||
        (s->kind != K_HZ && s->kind != K_SECONDS && d != floor(d))) {
      snprintf(err, errlen, "%s: invalid value for %s: \"%s\" (expected %s from %g to %.0f)",
               origin, s->flag, v,
               s->kind == K_HZ || s->kind == K_SECONDS ? "a number" : "an integer", s->min, s->max);
      return false;
    }
    if (s->kind == K_HZ || s->kind == K_SECONDS)
      *(double *)field = d;
    else
      *(uint64_t *)field = (uint64_t)d;
    return true;
  }
  return false;
}

static void env_name(const setting *s, char *out, size_t n) {
  size_t k = (size_t)snprintf(out, n, "SCENED_");
  for (const char *p = s->flag; *p && k + 1 < n; p++)
    out[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
  out[k] = '\0';
}

static void print_help(void) {
  printf("usage: scened [--FLAG VALUE | --FLAG=VALUE]...\n\n"
         "scened %s: a multi-world scene server speaking newline-delimited JSON (protocol %d).\n\n",
         SCN_VERSION, SCN_PROTOCOL);
  for (size_t i = 0; i < NSETTINGS; i++) {
    char env[64];
    env_name(&settings[i], env, sizeof env);
    printf("  --%-16s %s\n  %-18s default %s; env %s\n", settings[i].flag, settings[i].help, "",
           settings[i].def[0] ? settings[i].def : "(none)", env);
  }
  printf("  --%-16s read settings from FILE (key = value lines, keys as the flags)\n  %-18s env "
         "SCENED_CONFIG; precedence: flag > environment > file > default\n",
         "config FILE", "");
  printf("  --%-16s print the version and exit\n  --%-16s print this help and exit\n", "version",
         "help");
}

/* Flags use dashes; a config file may write tick_hz for tick-hz. */
static const setting *find_setting(const char *flag) {
  char name[64];
  size_t n = 0;
  for (; flag[n] && n + 1 < sizeof name; n++)
    name[n] = flag[n] == '_' ? '-' : flag[n];
  name[n] = '\0';
  for (size_t i = 0; i < NSETTINGS; i++)
    if (strcmp(settings[i].flag, name) == 0)
      return &settings[i];
  return NULL;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1]))
    *--e = '\0';
  return s;
}

/* key = value lines; # starts a comment line; values may be "quoted". */
static bool load_file(scn_config *c, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
    return false;
  }
  char line[1024];
  int lineno = 0;
  bool ok = true;
  while (ok && fgets(line, sizeof line, f)) {
    lineno++;
    char *s = trim(line);
    if (!*s || *s == '#')
      continue;
    char *eq = strchr(s, '=');
    char origin[600];
    snprintf(origin, sizeof origin, "%s:%d", path, lineno);
    if (!eq) {
      snprintf(err, errlen, "%s: expected key = value", origin);
      ok = false;
      break;
    }
    *eq = '\0';
    char *key = trim(s), *value = trim(eq + 1);
    size_t vlen = strlen(value);
    if (vlen >= 2 && value[0] == '"' && value[vlen - 1] == '"') {
      value[vlen - 1] = '\0';
      value++;
    }
    const setting *st = find_setting(key);
    if (!st || !strcmp(key, "config")) {
      snprintf(err, errlen, "%s: unknown setting \"%s\"", origin, key);
      ok = false;
    } else {
      ok = apply(c, st, value, origin, err, errlen);
    }
  }
  fclose(f);
  return ok;
}

/* The config file named by --config (or SCENED_CONFIG), NULL when none. */
static const char *config_path(int argc, char **argv) {
  const char *path = getenv("SCENED_CONFIG");
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
      path = argv[i + 1];
    else if (strncmp(argv[i], "--config=", 9) == 0)
      path = argv[i] + 9;
  }
  return path && *path ? path : NULL;
}

/* Settings that only make sense together, or not at all. */
static bool check_combinations(const scn_config *c, char *err, size_t errlen) {
  if (!c->tls_cert[0] != !c->tls_key[0]) {
    snprintf(err, errlen, "%s",
             c->tls_cert[0] ? "--tls-cert needs --tls-key (its private key)"
                            : "--tls-key needs --tls-cert");
    return false;
  }
  if (c->tls_ca[0] && !c->tls_cert[0]) {
    snprintf(err, errlen,
             "--tls-ca needs --tls-cert and --tls-key (client certificates are "
             "checked only over TLS)");
    return false;
  }
  if (!c->etcd_cert[0] != !c->etcd_key[0]) {
    snprintf(err, errlen, "%s",
             c->etcd_cert[0] ? "--etcd-cert needs --etcd-key (its private key)"
                             : "--etcd-key needs --etcd-cert");
    return false;
  }
  if ((c->etcd_ca[0] || c->etcd_cert[0]) && !c->cluster[0]) {
    snprintf(err, errlen, "%s needs --cluster with https:// endpoints (etcd over TLS)",
             c->etcd_ca[0] ? "--etcd-ca" : "--etcd-cert");
    return false;
  }
  /* Followers keep their copy in their own directory, and find their owner through etcd. */
  if (c->replicas > 0 && !c->cluster[0]) {
    snprintf(err, errlen,
             "--replicas needs --cluster (the followers of a group are other daemons "
             "of the cluster)");
    return false;
  }
  if (c->replicas > 0 && !c->data_dir[0]) {
    snprintf(err, errlen, "--replicas needs --data DIR (this daemon's own directory)");
    return false;
  }
  /* A follower's link speaks TLS when the daemons' ports do. */
  if (c->cluster_ca[0] && !c->tls_cert[0]) {
    snprintf(err, errlen,
             "--cluster-ca needs --tls-cert (the daemons' links speak TLS when their ports do)");
    return false;
  }
  if (c->replicas > 0 && c->acl[0] && !c->cluster_token[0]) {
    snprintf(err, errlen,
             "--replicas with --acl needs --cluster-token (the token followers give their "
             "group's owner; its rule needs the cluster right)");
    return false;
  }
  if (c->acl[0] && c->auth_token[0]) {
    snprintf(err, errlen,
             "--acl and --auth-token cannot be used together (give the token a rule "
             "in the access list instead)");
    return false;
  }
  return true;
}

scn_config_result scn_config_load(scn_config *c, int argc, char **argv, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  /* --help and --version answer whatever the rest of the configuration says (a flag's
   * value that happens to read "-h" is not one of them). */
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--", 2) == 0 && !strchr(argv[i], '=')) {
      const setting *s = find_setting(argv[i] + 2);
      if ((s && s->kind != K_BOOL) || strcmp(argv[i], "--config") == 0) {
        i++;
        continue;
      }
    }
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      print_help();
      return SCN_CONFIG_EXIT_OK;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf("scened %s (protocol %d)\n", SCN_VERSION, SCN_PROTOCOL);
      return SCN_CONFIG_EXIT_OK;
    }
  }
  for (size_t i = 0; i < NSETTINGS; i++)
    if (!apply(c, &settings[i], settings[i].def, "default", err, errlen))
      return SCN_CONFIG_EXIT_BAD;
  c->max_entity_create = 100000;
  const char *file = config_path(argc, argv);
  if (file && !load_file(c, file, err, errlen))
    return SCN_CONFIG_EXIT_BAD;
  for (size_t i = 0; i < NSETTINGS; i++) {
    char env[64];
    env_name(&settings[i], env, sizeof env);
    const char *v = getenv(env);
    if (v && !apply(c, &settings[i], v, env, err, errlen))
      return SCN_CONFIG_EXIT_BAD;
  }
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strncmp(arg, "--", 2) != 0) {
      snprintf(err, errlen, "unexpected argument \"%s\" (see --help)", arg);
      return SCN_CONFIG_EXIT_BAD;
    }
    if (strcmp(arg, "--config") == 0 && i + 1 < argc) {
      i++; /* read before everything else */
      continue;
    }
    if (strncmp(arg, "--config=", 9) == 0)
      continue;
    char name[64];
    const char *eq = strchr(arg + 2, '='), *value;
    size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
    if (len >= sizeof name) {
      snprintf(err, errlen, "unknown flag \"%s\" (see --help)", arg);
      return SCN_CONFIG_EXIT_BAD;
    }
    memcpy(name, arg + 2, len);
    name[len] = '\0';
    const setting *s = find_setting(name);
    if (!s) {
      snprintf(err, errlen, "unknown flag \"--%s\" (see --help)", name);
      return SCN_CONFIG_EXIT_BAD;
    }
    if (eq) {
      value = eq + 1;
    } else if (s->kind == K_BOOL) {
      value = "true";
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      snprintf(err, errlen, "flag --%s needs a value", name);
      return SCN_CONFIG_EXIT_BAD;
    }
    char origin[80];
    snprintf(origin, sizeof origin, "--%s", name);
    if (!apply(c, s, value, origin, err, errlen))
      return SCN_CONFIG_EXIT_BAD;
  }
  if (!check_combinations(c, err, errlen) || !resolve_addr(&c->listen, "listen", err, errlen) ||
      !resolve_addr(&c->http, "http", err, errlen))
    return SCN_CONFIG_EXIT_BAD;
  return SCN_CONFIG_RUN;
}

/* The daemon's settings: one table gives each its flag, environment variable, default and
 * help. Precedence: command-line flag > SCENED_* environment variable > default. */
#ifndef SCN_CONFIG_H
#define SCN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Journal flush policy (--fsync), in the order of its values. */
typedef enum scn_fsync_policy {
  SCN_FSYNC_ALWAYS,
  SCN_FSYNC_EVERYSEC,
  SCN_FSYNC_NO
} scn_fsync_policy;

/* How a change to a group with followers is answered (--durability). */
typedef enum scn_durability {
  SCN_DURABILITY_SYNC, /* once every follower of the in-sync set has it */
  SCN_DURABILITY_ASYNC /* at once; the followers catch up */
} scn_durability;

/* The most followers a group may have (--replicas). */
#define SCN_REPLICAS_MAX 4

#define SCN_ADDR_RESOLVED_MAX 4

/* HOST:PORT as configured; HOST a numeric address or a name. scn_config_load resolves it once:
 * the addresses it gave, in getaddrinfo's order (the port is bound on the first that works). */
typedef struct scn_addr {
  char host[64];
  int port;
  bool off;
  int count;
  struct sockaddr_storage resolved[SCN_ADDR_RESOLVED_MAX];
} scn_addr;

#define SCN_CONFIG_NODE_MAX 64

typedef struct scn_config {
  scn_addr listen;
  scn_addr http;
  double tick_hz;
  char auth_token[256];
  uint64_t max_line;
  uint64_t max_clients;
  uint64_t max_worlds;
  uint64_t max_transforms;
  uint64_t output_limit;
  uint64_t max_entity_create;
  char data_dir[4096];  /* empty: nothing persisted */
  int fsync;            /* scn_fsync_policy */
  int interest;         /* 0 grid (the spatial index), 1 naive (every transform tested) */
  double save_interval; /* seconds between autosaves when something changed; 0: never */
  bool recover;
  int log_level;                /* 0 debug, 1 info, 2 warn, 3 error */
  char www[4096];               /* the staging view's files; empty: www next to the executable */
  char ws_origins[1024];        /* browser origins allowed on /ws besides the daemon's own page */
  char tls_cert[4096];          /* PEM certificate (chain) of both ports; empty: no TLS */
  char tls_key[4096];           /* its private key (PEM) */
  char tls_ca[4096];            /* PEM CA certificates clients must present a certificate of */
  double tls_handshake_timeout; /* seconds a TLS handshake may take */
  char acl[4096];               /* access list: token hashes, rights, world prefixes */
  char cluster[2048];           /* etcd endpoints (empty: standalone) */
  char etcd_ca[4096];   /* PEM CA etcd's certificate is checked with (empty: the system's) */
  char etcd_cert[4096]; /* PEM client certificate presented to etcd (empty: none) */
  char etcd_key[4096];  /* its private key (PEM) */
  char node[SCN_CONFIG_NODE_MAX + 1];
  char advertise[128]; /* HOST:PORT clients reach this daemon at (empty: the listen address) */
  double lease_ttl;
  uint64_t replicas;           /* followers per group (0: the daemons share --data) */
  int durability;              /* scn_durability */
  uint64_t replica_timeout_ms; /* a follower's time to confirm a change */
  char cluster_token[256];     /* a follower's hello to its owner (empty: auth_token) */
  char cluster_ca[4096];       /* CA of the daemons' certificates, for a follower's TLS link */
  uint64_t replica_backlog;    /* bytes of recent records an owner keeps per group */
} scn_config;

/* Outcome of parsing: run the daemon, exit 0 (help or version printed), or exit 2 (a
 * one-line error was written to err). */
typedef enum scn_config_result {
  SCN_CONFIG_RUN,
  SCN_CONFIG_EXIT_OK,
  SCN_CONFIG_EXIT_BAD
} scn_config_result;

scn_config_result scn_config_load(scn_config *c, int argc, char **argv, char *err, size_t errlen);
const char *scn_log_level_name(int level);

#endif

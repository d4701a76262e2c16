/* Why the daemon is not ready, besides stopping (/readyz answers 503 with the reason). Each
 * reason is set and cleared by the module that knows of it; the state is kept here, so that a
 * module clearing its reason cannot clear another's. */
#ifndef SCN_READINESS_H
#define SCN_READINESS_H

/* The reasons, in the order /readyz prefers them when several hold. */
typedef enum scn_unready {
  SCN_UNREADY_RELEASED,     /* with --cluster: the groups were handed back (shutdown) */
  SCN_UNREADY_UNREGISTERED, /* with --cluster: not (or no longer) registered in etcd */
  SCN_UNREADY_COUNT
} scn_unready;

typedef struct scn_readiness {
  unsigned reasons; /* a bit per scn_unready */
} scn_readiness;

void scn_readiness_set(scn_readiness *r, scn_unready why);
void scn_readiness_clear(scn_readiness *r, scn_unready why);
/* What /readyz says: the first reason that holds, or NULL when ready. */
const char *scn_readiness_why(const scn_readiness *r);

#endif

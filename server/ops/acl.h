/* The access list (--acl): which token may run which commands on which worlds. One rule per
 * line, "#" starts a comment:
 *
 *   TOKEN_SHA256  RIGHTS            PREFIXES
 *   9f86d08...    read              match7.
 *   60303ae...    read,write        match7.,match8.
 *   fd61a03...    read,write,admin  *
 *
 * TOKEN_SHA256 is the hex SHA-256 of a token (the file never holds tokens); RIGHTS a comma list
 * of read, write and admin (each command needs one, a column of the command table); PREFIXES a
 * comma list of world-name prefixes, or "*" for every world. A connection names its token in
 * hello; its identity is the token's hash, so that a reloaded list (SIGHUP) applies to it at
 * its next command. */
#ifndef SCN_ACL_H
#define SCN_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCN_SHA256_SIZE 32

typedef struct scn_acl_rule {
  uint8_t token_sha256[SCN_SHA256_SIZE];
  unsigned rights; /* SCN_RIGHT bits (wire.h) */
  bool all_worlds; /* "*" among the prefixes */
  char **prefixes;
  size_t nprefixes;
  unsigned line; /* in the file, for logs */
} scn_acl_rule;

typedef struct scn_acl {
  scn_acl_rule *rules;
  size_t n;
  uint64_t generation; /* a reload makes a new list with the next number */
} scn_acl;

/* Who a connection is under the access list: the hash of the token its hello gave, and the
 * rule found for it in the list of that generation (looked up again after a reload). */
typedef struct scn_identity {
  bool known;
  uint8_t token_sha256[SCN_SHA256_SIZE];
  const scn_acl_rule *rule;
  uint64_t generation;
} scn_identity;

/* Parses the text of an access list (len bytes, any content). 0 with the list in *out, or -1
 * with the reason in err ("line 3: ..."); out of memory is a reason too. */
int scn_acl_parse(const char *text, size_t len, scn_acl **out, char *err, size_t errlen);
/* Reads and parses the file at path; as scn_acl_parse (err names the file). */
int scn_acl_load(const char *path, scn_acl **out, char *err, size_t errlen);
void scn_acl_free(scn_acl *a);

/* The SHA-256 of a token. */
void scn_acl_hash(const char *token, size_t len, uint8_t out[SCN_SHA256_SIZE]);
/* The rule for a token's hash, NULL when none: every rule is compared, each in constant time. */
const scn_acl_rule *scn_acl_match(const scn_acl *a, const uint8_t sha256[SCN_SHA256_SIZE]);
/* The rule that holds for an identity now (NULL: anonymous, or its token is no longer in the
 * list); the lookup is kept until the list changes. */
const scn_acl_rule *scn_acl_rule_of(const scn_acl *a, scn_identity *who);
/* True when the rule's prefixes cover the world name. */
bool scn_acl_allows_world(const scn_acl_rule *r, const char *world);

#endif

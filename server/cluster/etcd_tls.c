/* The files of etcd over TLS, checked once at start with OpenSSL (which libcurl uses to read
 * them too), so that a file that cannot be used is one line and exit 2 rather than a daemon
 * that never registers. */
#include "cluster/etcd.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

/* An encrypted key would make OpenSSL ask on the terminal: there is no one to answer. */
static int no_password(char *buf, int size, int rwflag, void *ud) {
  (void)buf, (void)size, (void)rwflag, (void)ud;
  return 0;
}

/* The file opened for reading, NULL with why when it cannot be. */
static FILE *open_pem(const char *path, char *why, size_t whylen) {
  FILE *f = fopen(path, "r");
  if (!f)
    snprintf(why, whylen, "%s", strerror(errno));
  return f;
}

/* How many PEM certificates the file holds (-1: it cannot be read); the first goes to *first
 * when first is not NULL (the caller frees it). */
static int read_certs(const char *path, X509 **first, char *why, size_t whylen) {
  FILE *f = open_pem(path, why, whylen);
  if (!f)
    return -1;
  int n = 0;
  X509 *x;
  while ((x = PEM_read_X509(f, NULL, no_password, NULL))) {
    if (n++ == 0 && first)
      *first = x;
    else
      X509_free(x);
  }
  fclose(f);
  ERR_clear_error(); /* the end of the file reads as an error */
  if (n == 0)
    snprintf(why, whylen, "no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)");
  return n;
}

scn_etcd_file scn_etcd_tls_files_check(const scn_etcd_options *opt, char *why, size_t whylen) {
  if (opt->ca && opt->ca[0] && read_certs(opt->ca, NULL, why, whylen) <= 0)
    return SCN_ETCD_CA_FILE;
  if (!opt->cert || !opt->cert[0])
    return SCN_ETCD_FILES_OK;
  X509 *cert = NULL;
  if (read_certs(opt->cert, &cert, why, whylen) <= 0)
    return SCN_ETCD_CERT_FILE;
  scn_etcd_file bad = SCN_ETCD_FILES_OK;
  FILE *f = open_pem(opt->key ? opt->key : "", why, whylen);
  EVP_PKEY *key = f ? PEM_read_PrivateKey(f, NULL, no_password, NULL) : NULL;
  if (f)
    fclose(f);
  if (!key) {
    if (f)
      snprintf(why, whylen, "no usable PEM private key in it (an unencrypted key is expected)");
    bad = SCN_ETCD_KEY_FILE;
  } else if (X509_check_private_key(cert, key) != 1) {
    snprintf(why, whylen, "does not match the client certificate");
    bad = SCN_ETCD_KEY_FILE;
  }
  ERR_clear_error();
  EVP_PKEY_free(key);
  X509_free(cert);
  return bad;
}

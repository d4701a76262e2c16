/* The staging view's static files on the HTTP port: regular files under one directory, found
 * once at start. */
#include "net/http_internal.h"

#include "codec.h"
#include "ops/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define HTTP_MAX_FILE (64 * 1024 * 1024)

static const char *content_type(const char *path) {
  /* Text without pointers: the table is read-only data, with nothing to relocate. */
  static const struct {
    char ext[8], type[32];
  } types[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
      {".wasm", "application/wasm"},
  };
  const char *dot = strrchr(path, '.');
  const char *slash = strrchr(path, '/');
  if (dot && (!slash || dot > slash))
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
      if (strcasecmp(dot, types[i].ext) == 0)
        return types[i].type;
  return "application/octet-stream";
}

/* The URL path, percent-decoded, as a path under the www directory; false when it is not
 * one (a NUL, a backslash, a "." or ".." segment). */
static bool url_to_relative(const char *url, char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = url; *p; p++) {
    char ch = *p;
    if (ch == '%') {
      int hi = scn_hex_digit(p[1]), lo = hi < 0 ? -1 : scn_hex_digit(p[2]);
      if (lo < 0)
        return false;
      ch = (char)(hi * 16 + lo);
      p += 2;
    }
    if (ch == '\0' || ch == '\\' || n + 1 >= cap)
      return false;
    out[n++] = ch;
  }
  out[n] = '\0';
  if (out[0] != '/')
    return false;
  for (const char *seg = out; seg; seg = strchr(seg + 1, '/')) {
    const char *s = seg + 1, *e = strchr(s, '/');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
      return false;
  }
  return true;
}

static void not_found(http_conn *c) {
  scn_http_respond(c, 404, "Not Found", "text/plain", "", "not found\n", 10);
}

/* Regular files inside the www directory only: the resolved path (symbolic links followed)
 * must still be under it. */
void scn_http_serve_file(const scn_http_files *f, http_conn *c, const char *url) {
  const char *www = f->dir;
  char rel[HTTP_MAX_URL + 16], full[PATH_MAX + HTTP_MAX_URL + 16], real[PATH_MAX];
  if (!www[0] || !url_to_relative(url, rel, sizeof rel - 16)) {
    not_found(c);
    return;
  }
  if (rel[strlen(rel) - 1] == '/')
    strcat(rel, "index.html");
  snprintf(full, sizeof full, "%s%s", www, rel);
  size_t root = strlen(www);
  if (!realpath(full, real) || strncmp(real, www, root) != 0 || real[root] != '/') {
    not_found(c);
    return;
  }
  int fd = open(real, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > HTTP_MAX_FILE) {
    if (fd >= 0)
      close(fd);
    not_found(c);
    return;
  }
  char *body = malloc(st.st_size ? (size_t)st.st_size : 1);
  size_t got = 0;
  while (body && got < (size_t)st.st_size) {
    ssize_t r = read(fd, body + got, (size_t)st.st_size - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  close(fd);
  if (!body || got != (size_t)st.st_size)
    scn_http_respond(c, 500, "Internal Server Error", "text/plain", "", "cannot read the file\n",
                     21);
  else
    scn_http_respond(c, 200, "OK", content_type(real),
                     "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n", body, got);
  free(body);
}

/* --www, or the www directory next to the executable. */
void scn_http_files_init(scn_http_files *f, const scn_config *cfg) {
  char *www = f->dir;
  char dir[PATH_MAX];
  www[0] = '\0';
  if (cfg->www[0]) {
    snprintf(dir, sizeof dir, "%s", cfg->www);
  } else {
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0)
      return;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash || (size_t)(slash - dir) + 5 >= sizeof dir)
      return;
    strcpy(slash + 1, "www");
  }
  struct stat st;
  if (!realpath(dir, www) || stat(www, &st) != 0 || !S_ISDIR(st.st_mode)) {
    www[0] = '\0';
    scn_log(SCN_LOG_INFO, "staging view not installed: its files are not there", "www=\"%s\"", dir);
  }
}

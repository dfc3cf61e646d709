/* SPDX-License-Identifier: MIT */
/*
 * The environment: rdmadl's variables (RDMADL_DEBUG, RDMADL_DISABLE,
 * RDMADL_<LIB>_PATH), read in one pass, also before libc has set environ.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "libs.h"

/* No reference to environ: a program that references it has it relocated
 * at every start (a symbol lookup, ~1 k instructions, bench/README.md).
 * The constructor passes the environment glibc calls it with (an ELF
 * constructor gets argc, argv and envp); any other first use (a stub
 * called before the constructor, a fork child loading again) asks for
 * environ by name, when it happens. */
char **rdmadl_ctor_envp; /* atomic */

static char **current_environ(void) {
  char **envp = __atomic_load_n(&rdmadl_ctor_envp, __ATOMIC_ACQUIRE);
  if (envp)
    return envp;
  char ***p = dlsym(RTLD_DEFAULT, "environ");
  return p ? *p : NULL;
}

/* The process environment as the kernel passed it, for a first use before
 * libc has set environ (a .preinit_array function). */
static struct {
  int state; /* 0 unread, 1 read, -1 unavailable */
  char *data;
  size_t len;
} early_env;

static void read_early_env(void) {
  early_env.state = -1;
  int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap + 1);
  for (;;) {
    if (!buf)
      break;
    if (len == cap) {
      char *bigger = realloc(buf, cap * 2 + 1);
      if (!bigger) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      free(buf);
      buf = NULL;
      break;
    }
    if (n == 0)
      break;
    len += (size_t)n;
  }
  close(fd);
  if (!buf)
    return;
  buf[len] = '\0';
  early_env.data = buf;
  early_env.len = len;
  early_env.state = 1;
}

/* Returns 1 when VAR is one of rdmadl's. */
static int env_match(struct rdmadl_env *e, const char *var) {
  if (!rdmadl_prefix_len(var, "RDMADL_"))
    return 0;
  var += 7;
  static const char *const names[] = {"DEBUG=", "DISABLE="};
  const char **slots[] = {&e->debug, &e->disable};
  int found = 0;
  for (size_t i = 0; i < 2; i++) {
    size_t n = rdmadl_prefix_len(var, names[i]);
    if (n && !*slots[i]) {
      *slots[i] = var + n;
      found = 1;
    }
  }
  /* RDMADL_<LIB>_PATH= */
  for (size_t i = 0; i < RDMADL_LIB_COUNT; i++) {
    size_t n = rdmadl_prefix_len(var, rdmadl_libs[i].env + 7);
    if (n && var[n] == '=' && !e->path[i]) {
      e->path[i] = var + n + 1;
      found = 1;
    }
  }
  return found;
}

/* Reads rdmadl's variables in one pass, also before libc has set environ.
 * Returns 0 when the environment cannot be read at all. In a setuid or
 * otherwise secure process all of them are ignored, as secure_getenv would
 * (asked only when one is set). */
int rdmadl_env_read(struct rdmadl_env *e) {
  memset(e, 0, sizeof *e);
  int found = 0;
  char **envp = current_environ();
  if (envp) {
    for (char **v = envp; *v; v++)
      if ((*v)[0] == 'R')
        found |= env_match(e, *v);
  } else {
    if (early_env.state == 0)
      read_early_env();
    if (early_env.state < 0)
      return 0;
    for (size_t i = 0; i < early_env.len; i += rdmadl_strlen(early_env.data + i) + 1)
      found |= env_match(e, early_env.data + i);
  }
  if (found && getauxval(AT_SECURE))
    memset(e, 0, sizeof *e);
  return 1;
}

/* RDMADL_DEBUG: unset, empty, 0/false/no/off: errors only; 1/true/yes/on or
 * "info": the summary; 2 (or more), "debug" or "symbols": every step. */
int rdmadl_parse_debug_level(const char *v, int *understood) {
  *understood = 1;
  if (v && (!strcasecmp(v, "debug") || !strcasecmp(v, "symbols")))
    return RDMADL_LOG_DEBUG;
  if (v && !strcasecmp(v, "info"))
    return RDMADL_LOG_INFO;
  char *end = NULL;
  long n = v && *v >= '0' && *v <= '9' ? strtol(v, &end, 10) : -1;
  if (end && *end == '\0')
    return n >= 2 ? RDMADL_LOG_DEBUG : n == 1 ? RDMADL_LOG_INFO : RDMADL_LOG_ERROR;
  int b = rdmadl_parse_bool(v);
  if (b < 0) {
    *understood = 0;
    return RDMADL_LOG_INFO;
  }
  return b ? RDMADL_LOG_INFO : RDMADL_LOG_ERROR;
}

/* 1 for 1/true/yes/on (any case, or a non-zero number), 0 for unset, empty,
 * 0/false/no/off or zero, -1 for anything else. */
int rdmadl_parse_bool(const char *v) {
  /* Arrays, not pointers: nothing to relocate at start-up. */
  static const char yes[][8] = {"true", "yes", "on"}, no[][8] = {"false", "no", "off"};
  if (!v || !*v)
    return 0;
  for (size_t i = 0; i < 3; i++) {
    if (!strcasecmp(v, yes[i]))
      return 1;
    if (!strcasecmp(v, no[i]))
      return 0;
  }
  const char *p = v;
  int nonzero = 0;
  for (; *p >= '0' && *p <= '9'; p++)
    nonzero |= *p != '0';
  return *p == '\0' ? nonzero : -1;
}

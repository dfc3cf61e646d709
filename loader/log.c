/* SPDX-License-Identifier: MIT */
/*
 * The loader's diagnostics plumbing: the log (a handler, or stderr up to
 * RDMADL_DEBUG's level) and the string helpers the diagnostics share.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "libs.h"

/* Control characters (and the backslash) of S as rdmadl-info prints them:
 * \\, \n, \t, \xNN. A path or a dlerror() text can then never start a line
 * of its own in a log or a sentence. Returns an allocated copy, or NULL. */
char *rdmadl_escape_dup(const char *s) {
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    n += *p == '\\' || *p == '\n' || *p == '\t' ? 2 : (*p < 0x20 || *p == 0x7f) ? 4 : 1;
  char *out = malloc(n + 1), *o = out;
  if (!out)
    return NULL;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '\\' || *p == '\n' || *p == '\t') {
      *o++ = '\\';
      *o++ = *p == '\n' ? 'n' : *p == '\t' ? 't' : '\\';
    } else if (*p < 0x20 || *p == 0x7f) {
      static const char hex[] = "0123456789abcdef";
      *o++ = '\\';
      *o++ = 'x';
      *o++ = hex[*p >> 4];
      *o++ = hex[*p & 15];
    } else {
      *o++ = (char)*p;
    }
  }
  *o = '\0';
  return out;
}

/* The log: one handler (with its context and level) or the default, which
 * writes "rdmadl: LINE" to stderr up to the level RDMADL_DEBUG asks for.
 * log_lock is held for reading around each delivery and for writing while
 * the handler changes, so a handler replaced by rdmadl_set_log_handler() is
 * not running anymore, and never runs again, once that call returns. */
static pthread_rwlock_t log_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct {
  rdmadl_log_fn fn;
  void *ctx;
  int max_level;
} log_sink;
static int env_log_level = RDMADL_LOG_ERROR; /* atomic: from RDMADL_DEBUG */
int rdmadl_log_max = RDMADL_LOG_ERROR;       /* atomic: the level lines are formatted up to */
static __thread int in_log_handler RDMADL_TLS_IE;

static void log_update_max(void) {
  __atomic_store_n(&rdmadl_log_max,
                   log_sink.fn ? log_sink.max_level
                               : __atomic_load_n(&env_log_level, __ATOMIC_RELAXED),
                   __ATOMIC_RELAXED);
}

void rdmadl_log_emit(int level, const char *fmt, ...) {
  if (in_log_handler)
    return; /* a handler that calls rdmadl: its own lines are dropped */
  int saved = errno;
  va_list ap;
  va_start(ap, fmt);
  char *raw = rdmadl_vdup_printf(fmt, ap);
  va_end(ap);
  char *line = raw ? rdmadl_escape_dup(raw) : NULL;
  free(raw);
  const char *text = line ? line : "(out of memory formatting a log line)";
  pthread_rwlock_rdlock(&log_lock);
  if (log_sink.fn) {
    if (level <= log_sink.max_level) {
      in_log_handler = 1;
      log_sink.fn(level, text, log_sink.ctx);
      in_log_handler = 0;
    }
  } else if (level <= __atomic_load_n(&env_log_level, __ATOMIC_RELAXED)) {
    /* To descriptor 2, one write per line, as to the unbuffered stderr,
     * without a reference to libc's stderr: a program that references it
     * has it relocated at every start (~1 k instructions, bench/README.md). */
    dprintf(2, "rdmadl: %s\n", text);
  }
  pthread_rwlock_unlock(&log_lock);
  free(line);
  errno = saved;
}

int rdmadl_set_log_handler(int max_level, rdmadl_log_fn fn, void *ctx) {
  if (in_log_handler)
    return EDEADLK;
  pthread_rwlock_wrlock(&log_lock);
  log_sink.fn = fn;
  log_sink.ctx = fn ? ctx : NULL;
  log_sink.max_level = fn ? max_level : RDMADL_LOG_ERROR;
  log_update_max();
  pthread_rwlock_unlock(&log_lock);
  return 0;
}

void rdmadl_log_set_env_level(int level) {
  /* Unchanged (RDMADL_DEBUG unset, the common case): nothing to update. */
  if (__atomic_load_n(&env_log_level, __ATOMIC_RELAXED) == level)
    return;
  /* (A handler that caused this load holds the lock for reading already.) */
  if (!in_log_handler)
    pthread_rwlock_wrlock(&log_lock);
  __atomic_store_n(&env_log_level, level, __ATOMIC_RELAXED);
  log_update_max();
  if (!in_log_handler)
    pthread_rwlock_unlock(&log_lock);
}

void rdmadl_log_after_fork(void) {
  /* Another thread inside a log handler. */
  if (!in_log_handler)
    pthread_rwlock_init(&log_lock, NULL);
}

char *rdmadl_vdup_printf(const char *fmt, va_list ap) {
  char *s = NULL;
  return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

char *rdmadl_dup_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = rdmadl_vdup_printf(fmt, ap);
  va_end(ap);
  return s;
}

/* Publishes *S into *SLOT once; returns whichever string won. */
const char *rdmadl_publish(const char **slot, char *s) {
  const char *expected = NULL;
  if (!s)
    return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (__atomic_compare_exchange_n(slot, &expected, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return s;
  free(s);
  return expected;
}

/* SPDX-License-Identifier: MIT */
/*
 * The diagnostics API of include/rdmadl/loader.h about the libraries: each
 * library's state, path, error, version node and missing symbols, a symbol's
 * status, and the reason sentence that describes libibverbs and librdmacm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libs.h"

const char *rdmadl_reason_text; /* built when first asked for */
const char *rdmadl_reason_text_cm_unused;

/* The rdma-core release in a real library's file name: "44.0" of
 * libibverbs.so.1.14.44.0 (soname, then the library's own minor version,
 * then the release), or NULL. */
static const char *release_of(const struct lib_info *l, const char *path) {
  const char *base = path ? strrchr(path, '/') : NULL;
  base = base ? base + 1 : path;
  size_t n = strlen(l->soname);
  if (!base || strncmp(base, l->soname, n) != 0 || base[n] != '.')
    return NULL;
  const char *rel = strchr(base + n + 1, '.');
  return rel && rel[1] >= '0' && rel[1] <= '9' ? rel + 1 : NULL;
}

/* The slot of a version node ("IBVERBS_1.14" -> 140), or -1. */
static int node_slot(const struct lib_info *l, const char *node) {
  size_t n = strlen(l->prefix);
  if (!node || strncmp(node, l->prefix, n) != 0)
    return -1;
  char *end = NULL;
  long minor = strtol(node + n, &end, 10), sub = 0;
  if (end && *end == '.')
    sub = strtol(end + 1, NULL, 10);
  return (int)(minor * 10 + sub);
}

/* One library in one clause, e.g. "libibverbs.so.1 (rdma-core 44.0,
 * IBVERBS_1.14, /usr/lib/libibverbs.so.1.14.44.0): complete for its release,
 * 19 newer symbols absent, 5 emulated". Missing symbols of nodes newer than
 * the file's highest one are normal for an older release; only those of its
 * own nodes make it incomplete. Unescaped; allocated. */
char *rdmadl_describe_lib(struct lib_info *l) {
  if (rdmadl_lazy_pending(l))
    return rdmadl_dup_printf("%s %s", l->requested ? l->requested : l->soname,
                             l->kind == KIND_WHEN_USED ? RDMADL_CM_UNUSED_ERROR
                                                       : RDMADL_NOT_LOADED_ERROR);
  if (!rdmadl_usable(l->state)) {
    const char *e = rdmadl_lib_why(l);
    return rdmadl_dup_printf("%s %s: %s", l->requested ? l->requested : l->soname,
                             rdmadl_state_name(l->state), e ? e : "unknown error");
  }
  const char *path = rdmadl_lib_file(l), *rel = release_of(l, path);
  int top = node_slot(l, l->node);
  size_t newer = 0, own = 0, emulated = 0;
  for (size_t k = l->first; k < l->first + l->nsyms; k++) {
    if (__atomic_load_n(&rdmadl_fn[k], __ATOMIC_ACQUIRE))
      continue;
    if ((int)rdmadl_sym_meta[k].slot <= top)
      own++; /* absent or emulated: the file lacks a node it claims */
    else if (rdmadl_sym_meta[k].emu)
      emulated++; /* a fallback serves it: not counted as absent too */
    else
      newer++;
  }
  char what[160];
  if (!l->nmissing)
    snprintf(what, sizeof what, "complete");
  else if (!own)
    snprintf(what, sizeof what, "complete for its release, %zu newer symbol%s absent, %zu emulated",
             newer, newer == 1 ? "" : "s", emulated);
  else
    snprintf(what, sizeof what,
             "%zu symbol%s of its own release missing, %zu newer absent, %zu emulated", own,
             own == 1 ? "" : "s", newer, emulated);
  return rdmadl_dup_printf("%s (%s%s%s%s, %s): %s", l->soname, rel ? "rdma-core " : "",
                           rel ? rel : "", rel ? ", " : "", l->node ? l->node : "no version node",
                           path ? path : l->requested, what);
}

/* What the libraries are: libibverbs' clause, then librdmacm's. */
static char *build_reason(void) {
  struct lib_info *v = &rdmadl_libs[RDMADL_LIB_IBVERBS], *c = &rdmadl_libs[RDMADL_LIB_RDMACM];
  if (v->state == RDMADL_STATE_DISABLED)
    return strdup(RDMADL_DISABLED_SENTENCE);
  char *vs = rdmadl_describe_lib(v), *cs = rdmadl_usable(v->state) ? rdmadl_describe_lib(c) : NULL;
  char *raw = rdmadl_usable(v->state) ? rdmadl_dup_printf("%s; %s", vs ? vs : "?", cs ? cs : "?")
                                      : (vs ? strdup(vs) : NULL);
  free(vs);
  free(cs);
  char *out = raw ? rdmadl_escape_dup(raw) : NULL;
  free(raw);
  return out;
}

/* One INFO line for a library just loaded (or not). */
void rdmadl_log_lib_summary(struct lib_info *l) {
  if (!rdmadl_log_on(RDMADL_LOG_INFO))
    return;
  char *d = rdmadl_describe_lib(l);
  INFOF("%s", d ? d : "out of memory");
  free(d);
}

static struct lib_info *lib_at(rdmadl_lib lib) {
  rdmadl_ensure_bound();
  return (unsigned)lib < RDMADL_LIB_COUNT ? &rdmadl_libs[lib] : NULL;
}

int rdmadl_lib_load(rdmadl_lib lib) {
  struct lib_info *l = lib_at(lib);
  if (!l)
    return EOPNOTSUPP;
  rdmadl_load_lazy(l);
  return rdmadl_usable(l->state) ? 0 : EOPNOTSUPP;
}

const char *rdmadl_lib_name(rdmadl_lib lib) {
  return (unsigned)lib < RDMADL_LIB_COUNT ? rdmadl_libs[lib].soname : NULL;
}

const char *rdmadl_lib_file(struct lib_info *l) {
  if (!l->map)
    return NULL;
  const char *p = __atomic_load_n(&l->path, __ATOMIC_ACQUIRE);
  if (p)
    return p;
  char *real = realpath(l->map->l_name, NULL);
  return rdmadl_publish(&l->path, real ? real : strdup(l->map->l_name));
}

rdmadl_state rdmadl_lib_state(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return !l ? RDMADL_STATE_NOT_FOUND : rdmadl_lazy_pending(l) ? RDMADL_STATE_NOT_LOADED : l->state;
}

/* The names of the values 0 to RDMADL_STATE_NOT_LOADED, in order. */
static const char state_names[][16] = {"disabled", "not-found", "load-failed", "incompatible",
                                       "skipped",  "loaded",    "partial",     "not-loaded"};
_Static_assert(sizeof state_names / sizeof state_names[0] == RDMADL_STATE_NOT_LOADED + 1,
               "a name for each value");

const char *rdmadl_state_name(rdmadl_state value) {
  return RDMADL_NAME_IN(state_names, value);
}

const char *rdmadl_lib_requested(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l ? l->requested : NULL;
}

const char *rdmadl_lib_path(rdmadl_lib lib) {
  struct lib_info *l = lib_at(lib);
  return l && !rdmadl_lazy_pending(l) ? rdmadl_lib_file(l) : NULL;
}

const char *rdmadl_lib_why(struct lib_info *l) {
  const char *e = __atomic_load_n(&l->error, __ATOMIC_ACQUIRE);
  if (e || !l->stat_errno)
    return e;
  return rdmadl_publish(
      &l->error, rdmadl_dup_printf("%s=%s: %s", l->env, l->requested, strerror(l->stat_errno)));
}

const char *rdmadl_lib_error(rdmadl_lib lib) {
  struct lib_info *l = lib_at(lib);
  if (!l)
    return NULL;
  if (!rdmadl_lazy_pending(l))
    return rdmadl_lib_why(l);
  return l->kind == KIND_WHEN_USED ? RDMADL_CM_UNUSED_ERROR : RDMADL_NOT_LOADED_ERROR;
}

const char *rdmadl_lib_version_node(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l && !rdmadl_lazy_pending(l) ? l->node : NULL;
}

size_t rdmadl_lib_symbol_count(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l ? l->nsyms : 0;
}

size_t rdmadl_lib_missing_count(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return !l ? 0 : rdmadl_lazy_pending(l) ? l->nsyms : l->nmissing;
}

const char *rdmadl_lib_missing_symbol(rdmadl_lib lib, size_t i) {
  const struct lib_info *l = lib_at(lib);
  if (!l)
    return NULL;
  for (size_t k = l->first; k < l->first + l->nsyms; k++) {
    if (__atomic_load_n(&rdmadl_fn[k], __ATOMIC_ACQUIRE))
      continue;
    if (i-- == 0)
      return rdmadl_sym_name(k);
  }
  return NULL;
}

int rdmadl_symbol_status(const char *name, const char **node) {
  rdmadl_ensure_bound();
  for (size_t k = 0; name && k < RDMADL_NSYMS; k++) {
    if (strcmp(rdmadl_sym_name(k), name) != 0)
      continue;
    if (node)
      *node = rdmadl_sym_node(k);
    rdmadl_load_lazy(&rdmadl_libs[rdmadl_sym_meta[k].lib]);
    if (__atomic_load_n(&rdmadl_fn[k], __ATOMIC_ACQUIRE))
      return RDMADL_SYMBOL_RESOLVED;
    /* A fallback needs its library's older calls: none without the library. */
    return rdmadl_sym_meta[k].emu && rdmadl_usable(rdmadl_libs[rdmadl_sym_meta[k].lib].state)
               ? RDMADL_SYMBOL_EMULATED
               : RDMADL_SYMBOL_MISSING;
  }
  return RDMADL_SYMBOL_UNKNOWN;
}

const char *rdmadl_symbol_name(size_t i, rdmadl_lib *lib) {
  if (i >= RDMADL_NSYMS)
    return NULL;
  if (lib)
    *lib = (rdmadl_lib)rdmadl_sym_meta[i].lib;
  return rdmadl_sym_name(i);
}

const char *rdmadl_reason(void) {
  if (rdmadl_ensure_bound() != ENSURE_DONE)
    return "rdmadl has not loaded rdma-core yet";
  const char **slot = rdmadl_lazy_pending(&rdmadl_libs[RDMADL_LIB_RDMACM])
                          ? &rdmadl_reason_text_cm_unused
                          : &rdmadl_reason_text;
  const char *r = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (!r)
    r = rdmadl_publish(slot, build_reason());
  return r ? r : "out of memory while describing rdmadl's state";
}

/* SPDX-License-Identifier: MIT */
/*
 * Which rows of symbols.def a load binds.
 *
 * Everywhere but librdmadl-verbs.a, every row of a library, when it is
 * loaded. librdmadl-verbs.a (RDMADL_BIND_LINKED) holds each stub of
 * libibverbs and librdmacm in an archive member of its own that records the
 * stub's row in the section rdmadl_linked (RDMADL_LINKED, internal.h): the
 * linker brings in only the members the program calls, and the constructor
 * binds only their rows. Binding every row was ~9 k instructions for
 * libibverbs and ~7 k for librdmacm at every start-up, most of what the
 * static drop-in cost over a direct link (bench/README.md).
 *
 * The other rows are bound once, by rdmadl_bind_rest, before anything needs
 * them: the slow path of a stub whose row is unbound (one this program's
 * linked stubs did not record, say a fallback's older call, or one the
 * library lacks), and every diagnostic that reads the whole table or a
 * library's state and missing count (rdmadl_ensure_bound). A diagnostic
 * therefore says what it said before: a symbol the library lacks is missing,
 * LOADED and PARTIAL are the library's, not the program's. Storing a row
 * twice stores the same pointer, so threads racing into it each bind, and
 * the count and state are published once, under a mutex.
 *
 * Every row is bound at load as before when the log is on at INFO (its
 * summary counts what is missing), when none of the recorded rows is found
 * (whether the library is usable at all is decided on all of them), and for
 * a library loaded after the constructor (librdmacm on its first call, the
 * lazy ones), whose load is not start-up.
 */
#include <pthread.h>
#include <stdint.h>

#include "libs.h"

#ifdef RDMADL_BIND_LINKED
/* The rows the linked stubs recorded, as the linker lays the section out;
 * both undefined, i.e. NULL, when no stub of the program records one. */
extern const unsigned short __start_rdmadl_linked[] __attribute__((weak, visibility("hidden")));
extern const unsigned short __stop_rdmadl_linked[] __attribute__((weak, visibility("hidden")));

size_t rdmadl_linked_rows(const struct lib_info *l) {
  size_t n = 0;
  for (const unsigned short *p = __start_rdmadl_linked; p < __stop_rdmadl_linked; p++)
    n += (size_t)*p - l->first < l->nsyms;
  return n;
}

/* Binds library L's recorded rows; returns 1 when it bound some and found
 * at least one (then the rest waits), 0 when every row must be bound now. */
static int bind_linked(struct lib_info *l, const struct elf_view *v, void *handle) {
  if ((l->kind != KIND_EAGER && l->kind != KIND_WHEN_USED) ||
      __atomic_load_n(&rdmadl_load_state, __ATOMIC_ACQUIRE) != LOAD_RUNNING ||
      rdmadl_log_on(RDMADL_LOG_INFO))
    return 0;
  size_t linked = 0, missing = 0;
  for (const unsigned short *p = __start_rdmadl_linked; p < __stop_rdmadl_linked; p++) {
    if ((size_t)*p - l->first < l->nsyms) {
      linked++;
      missing += rdmadl_elf_bind(v, handle, *p, 1);
    }
  }
  if (missing == linked)
    return 0;
  /* So far: the rest may add to it (rdmadl_bind_rest). */
  l->nmissing = missing;
  __atomic_store_n(&l->rest, 1, __ATOMIC_RELEASE);
  return 1;
}
#endif

void rdmadl_bind_lib(struct lib_info *l, const struct elf_view *v, void *handle) {
#ifdef RDMADL_BIND_LINKED
  if (bind_linked(l, v, handle))
    return;
#endif
  l->nmissing = rdmadl_elf_bind(v, handle, l->first, l->nsyms);
}

#ifdef RDMADL_BIND_LINKED
static pthread_mutex_t rest_mu = PTHREAD_MUTEX_INITIALIZER;
/* Set while this thread binds the rest: a log handler, or a fallback it
 * reaches, calling back in finds those rows as they are. */
static __thread int binding_rest RDMADL_TLS_IE;

void rdmadl_bind_rest_slow(void) {
  if (binding_rest || __atomic_load_n(&rdmadl_load_state, __ATOMIC_ACQUIRE) != LOAD_DONE)
    return;
  binding_rest = 1;
  static const rdmadl_lib eager[] = {RDMADL_LIB_IBVERBS, RDMADL_LIB_RDMACM};
  size_t missing[2] = {SIZE_MAX, SIZE_MAX};
  for (size_t k = 0; k < 2; k++) {
    struct lib_info *l = &rdmadl_libs[eager[k]];
    if (!__atomic_load_n(&l->rest, __ATOMIC_ACQUIRE))
      continue;
    struct elf_view v;
    rdmadl_elf_view_init(&v, l->map, l->prefix);
    missing[k] = rdmadl_elf_bind(&v, l->handle, l->first, l->nsyms);
  }
  pthread_mutex_lock(&rest_mu);
  for (size_t k = 0; k < 2; k++) {
    struct lib_info *l = &rdmadl_libs[eager[k]];
    if (missing[k] == SIZE_MAX || !__atomic_load_n(&l->rest, __ATOMIC_ACQUIRE))
      continue;
    l->nmissing = missing[k];
    l->state = missing[k] ? RDMADL_STATE_PARTIAL : RDMADL_STATE_LOADED;
    __atomic_store_n(&l->rest, 0, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&rest_mu);
  binding_rest = 0;
}

void rdmadl_bind_after_fork(void) {
  pthread_mutex_init(&rest_mu, NULL);
}
#endif

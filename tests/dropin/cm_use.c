/* SPDX-License-Identifier: MIT */
/*
 * librdmacm is loaded only for a program that uses it. Built twice per
 * drop-in flavour: with CM_USE_CALLS the program calls rdma_* functions, and
 * the constructor must have loaded librdmacm before main(); without, it
 * calls none, so librdmacm is "not loaded: no rdma_* function in this
 * program" (state, error, reason sentence), and the first use, from four
 * threads at once, loads it and forwards to it: the shared drop-in's own
 * rdma_create_event_channel found with dlsym (what a plugin dlopened later
 * would call), rdmadl_lib_load() with the static drop-in (whose librdmacm
 * stubs are not even linked then). Run with a real librdmacm (a release);
 * exits 0 and prints "cm-use: ok" when all holds.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <rdmadl/loader.h>

static int failures;

static void check(int ok, const char *what) {
  if (!ok) {
    printf("cm-use: FAILED: %s\n", what);
    failures++;
  }
}

static int usable(rdmadl_state s) {
  return s == RDMADL_STATE_LOADED || s == RDMADL_STATE_PARTIAL;
}

#ifndef CM_USE_CALLS
static int call_errno[4];

/* The first use of librdmacm. Returns the call's errno (0: it worked). */
static void *first_use(void *arg) {
  int *out = arg;
#ifdef CM_USE_SHARED
  struct rdma_event_channel *(*create)(void) =
      (struct rdma_event_channel * (*)(void)) dlsym(RTLD_DEFAULT, "rdma_create_event_channel");
  void (*destroy)(struct rdma_event_channel *) =
      (void (*)(struct rdma_event_channel *))dlsym(RTLD_DEFAULT, "rdma_destroy_event_channel");
  if (!create || !destroy) {
    *out = -1;
    return NULL;
  }
  errno = 0;
  struct rdma_event_channel *ch = create();
  *out = ch ? 0 : errno;
  if (ch)
    destroy(ch);
#else
  *out = rdmadl_lib_load(RDMADL_LIB_RDMACM);
#endif
  return NULL;
}
#endif

int main(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (list)
    ibv_free_device_list(list);
  check(usable(rdmadl_lib_state(RDMADL_LIB_IBVERBS)), "libibverbs loaded");
#ifdef CM_USE_CALLS
  /* Before any rdma_* call: the constructor loaded it. */
  check(usable(rdmadl_lib_state(RDMADL_LIB_RDMACM)), "librdmacm loaded by the constructor");
  errno = 0;
  struct rdma_event_channel *ch = rdma_create_event_channel();
  check(ch || errno != EOPNOTSUPP, "rdma_create_event_channel forwarded");
  if (ch)
    rdma_destroy_event_channel(ch);
#else
  const char *unused = "not loaded: no rdma_* function in this program";
  check(rdmadl_lib_state(RDMADL_LIB_RDMACM) == RDMADL_STATE_NOT_LOADED, "librdmacm not loaded");
  const char *err = rdmadl_lib_error(RDMADL_LIB_RDMACM);
  check(err && strcmp(err, unused) == 0, "its error says why");
  check(rdmadl_lib_path(RDMADL_LIB_RDMACM) == NULL, "no path");
  check(strstr(rdmadl_reason(), unused) != NULL, "the reason says why");
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    check(pthread_create(&t[i], NULL, first_use, &call_errno[i]) == 0, "pthread_create");
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    check(call_errno[i] != -1, "the stub is found");
    check(call_errno[i] != EOPNOTSUPP, "the first use forwards to librdmacm");
  }
  check(usable(rdmadl_lib_state(RDMADL_LIB_RDMACM)), "librdmacm loaded by its first use");
  check(rdmadl_lib_path(RDMADL_LIB_RDMACM) != NULL, "its path");
  check(strstr(rdmadl_reason(), unused) == NULL, "the reason describes it");
  check(strstr(rdmadl_reason(), "librdmacm.so.1 (") != NULL, "the reason names it");
#endif
  if (!failures)
    printf("cm-use: ok\n");
  return failures != 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * librdmadl-verbs.a binds at start-up only the rows of the stubs a program
 * links (loader/bind.c); the diagnostics still tell the whole truth. This
 * program links a few of libibverbs's and librdmacm's functions and
 * checks, against the library it is run with:
 *   - before main(), its linked rows are bound and an unlinked one is not;
 *   - eight threads racing into the rest (a missing count, a state, a
 *     symbol's status, the reason, the missing list, an emulated call whose
 *     fallback needs rows this program never linked) all see the same truth;
 *   - afterwards every row of libibverbs (and librdmacm when it is there) is
 *     bound exactly when the library exports it at its node, the missing
 *     count and list and LOADED against PARTIAL say so, and a linked
 *     function the library lacks fails with EOPNOTSUPP and is reported
 *     missing.
 * What the library exports: RDMADL_EXPECT_EXPORTS ("name node" lines, a
 * release's) or BIND_EXPECT_TOP (a fake's highest IBVERBS_1.x node, every
 * row up to it but BIND_EXPECT_OMIT); RDMADL_SYMBOLS_TXT lists the table's
 * rows. Prints "bind-linked: ok" and exits 0 when all holds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "internal.h"
#include "rdmadl/loader.h"

enum { NTHREADS = 8 };

static int failures;

static void check(int ok, const char *what) {
  if (!ok) {
    printf("bind-linked: FAILED: %s\n", what);
    failures++;
  }
}

static void *row(size_t idx) {
  return __atomic_load_n(&rdmadl_fn[idx], __ATOMIC_ACQUIRE);
}

/* expected[k]: the library exports row K at its node. */
static char expected[RDMADL_NSYMS];
static int have_cm; /* the expectations cover librdmacm too */

static int row_index(const char *name) {
  for (size_t k = 0; k < RDMADL_NSYMS; k++)
    if (strcmp(rdmadl_symbol_name(k, NULL), name) == 0)
      return (int)k;
  return -1;
}

/* Fills expected[] from the environment; 0 when it says nothing. */
static int read_expectations(void) {
  const char *exports = getenv("RDMADL_EXPECT_EXPORTS"), *top = getenv("BIND_EXPECT_TOP");
  const char *table = getenv("RDMADL_SYMBOLS_TXT"), *omit = getenv("BIND_EXPECT_OMIT");
  FILE *t = table ? fopen(table, "re") : NULL;
  if (!t || (!exports && !top))
    return 0;
  char name[128], node[64];
  while (fscanf(t, "%127s %63s", name, node) == 2) {
    int k = row_index(name);
    if (k < 0)
      continue;
    if (top) {
      expected[k] = strncmp(node, "IBVERBS_1.", 10) == 0 && atoi(node + 10) <= atoi(top) &&
                    !(omit && strcmp(name, omit) == 0);
      continue;
    }
    FILE *e = fopen(exports, "re");
    char en[128], ev[64];
    while (e && fscanf(e, "%127s %63s", en, ev) == 2)
      if (strcmp(en, name) == 0 && strcmp(ev, node) == 0)
        expected[k] = 1;
    if (e)
      fclose(e);
  }
  fclose(t);
  have_cm = exports != NULL;
  return 1;
}

static size_t expected_missing(rdmadl_lib lib) {
  size_t n = 0;
  for (size_t k = 0; k < RDMADL_NSYMS; k++) {
    rdmadl_lib l;
    rdmadl_symbol_name(k, &l);
    n += l == lib && !expected[k];
  }
  return n;
}

/* What each racing thread saw. */
struct seen {
  size_t missing;
  rdmadl_state state;
  int alloc_pd_status;
  int buf_ok;
};
static struct seen seen[NTHREADS];
static pthread_barrier_t start;

static void *race(void *arg) {
  struct seen *s = arg;
  size_t i = (size_t)(s - seen);
  pthread_barrier_wait(&start);
  switch (i % 6) {
  case 0:
    break;
  case 1:
    (void)rdmadl_reason();
    break;
  case 2:
    (void)rdmadl_lib_missing_symbol(RDMADL_LIB_IBVERBS, 0);
    break;
  case 3:
    (void)rdmadl_symbol_status("ibv_alloc_pd", NULL);
    break;
  case 4:
    (void)rdmadl_lib_state(RDMADL_LIB_IBVERBS);
    break;
  case 5:
    /* ibv_alloc_buf (IBVERBS_1.17) is emulated below 65.0; its fallback
     * asks whether the library is usable and needs no protection domain. */
    if (!expected[RDMADL_IDX_ibv_alloc_buf]) {
      struct ibv_buf *buf = NULL;
      void *mem = ibv_alloc_buf(NULL, 4096, &buf);
      s->buf_ok = mem != NULL && buf != NULL;
      if (buf)
        ibv_free_buf(buf);
    }
    break;
  }
  s->missing = rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS);
  s->state = rdmadl_lib_state(RDMADL_LIB_IBVERBS);
  s->alloc_pd_status = rdmadl_symbol_status("ibv_alloc_pd", NULL);
  return NULL;
}

int main(void) {
  /* Before anything asks: the constructor bound the linked rows only. */
  check(row(RDMADL_IDX_ibv_free_device_list) != NULL, "a linked row is bound at start-up");
  check(row(RDMADL_IDX_ibv_alloc_pd) == NULL, "an unlinked row is not bound at start-up");
  check(row(RDMADL_IDX_ibv_dealloc_pd) == NULL, "nor another");
  if (!read_expectations()) {
    printf("bind-linked: no expectations (RDMADL_SYMBOLS_TXT and RDMADL_EXPECT_EXPORTS or "
           "BIND_EXPECT_TOP)\n");
    return 2;
  }
  if (have_cm) {
    check(row(RDMADL_IDX_rdma_create_event_channel) != NULL,
          "a linked librdmacm row is bound at start-up");
    check(row(RDMADL_IDX_rdma_create_id) == NULL, "an unlinked librdmacm row is not");
  }

  pthread_barrier_init(&start, NULL, NTHREADS);
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++)
    check(pthread_create(&t[i], NULL, race, &seen[i]) == 0, "pthread_create");
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&start);

  size_t want = expected_missing(RDMADL_LIB_IBVERBS);
  rdmadl_state want_state = want ? RDMADL_STATE_PARTIAL : RDMADL_STATE_LOADED;
  for (int i = 0; i < NTHREADS; i++) {
    check(seen[i].missing == want, "every thread sees the library's missing count");
    check(seen[i].state == want_state, "every thread sees the library's state");
    check(seen[i].alloc_pd_status == RDMADL_SYMBOL_RESOLVED,
          "every thread sees an unlinked row resolved");
    if (i % 6 == 5 && !expected[RDMADL_IDX_ibv_alloc_buf])
      check(seen[i].buf_ok, "the emulated ibv_alloc_buf works");
  }
  printf("bind-linked: libibverbs %s, %zu of %zu missing (expected %zu)\n",
         rdmadl_state_name(rdmadl_lib_state(RDMADL_LIB_IBVERBS)),
         rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS), rdmadl_lib_symbol_count(RDMADL_LIB_IBVERBS),
         want);

  /* The whole table is the library's now, row by row. */
  for (size_t k = 0; k < RDMADL_NSYMS; k++) {
    rdmadl_lib lib;
    const char *name = rdmadl_symbol_name(k, &lib);
    if (lib != RDMADL_LIB_IBVERBS && !(have_cm && lib == RDMADL_LIB_RDMACM))
      continue;
    if ((row(k) != NULL) != expected[k]) {
      printf("bind-linked: FAILED: %s is %s, the library %s it\n", name,
             row(k) ? "bound" : "unbound", expected[k] ? "exports" : "lacks");
      failures++;
    }
  }
  for (int lib = RDMADL_LIB_IBVERBS; lib <= (have_cm ? RDMADL_LIB_RDMACM : RDMADL_LIB_IBVERBS);
       lib++) {
    size_t n = rdmadl_lib_missing_count((rdmadl_lib)lib);
    check(n == expected_missing((rdmadl_lib)lib), "the missing count is the library's");
    size_t listed = 0;
    for (const char *m; (m = rdmadl_lib_missing_symbol((rdmadl_lib)lib, listed)); listed++)
      check(!expected[row_index(m)], "a symbol listed missing is one the library lacks");
    check(listed == n, "the missing list is as long as the count");
    check(rdmadl_lib_state((rdmadl_lib)lib) == (n ? RDMADL_STATE_PARTIAL : RDMADL_STATE_LOADED),
          "LOADED or PARTIAL is the library's");
  }
  /* A linked function the library lacks: refused, and reported missing. */
  if (!expected[RDMADL_IDX_ibv_query_ece]) {
    struct ibv_ece ece;
    check(ibv_query_ece(NULL, &ece) == EOPNOTSUPP, "a linked missing function fails");
    check(rdmadl_symbol_status("ibv_query_ece", NULL) == RDMADL_SYMBOL_MISSING,
          "a linked missing function is reported missing");
  }

  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (list)
    ibv_free_device_list(list);
  struct rdma_event_channel *ch = rdma_create_event_channel();
  if (ch)
    rdma_destroy_event_channel(ch);
  if (!failures)
    printf("bind-linked: ok\n");
  return failures != 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * 16 threads enter the loader while it initialises. Linked statically with
 * the drop-in archive, so this constructor (priority 101) runs before
 * rdmadl's own: the threads race into the first stub call and the loader's
 * one-time initialisation. Built and run under TSan in CI.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include <infiniband/verbs.h>

#include <rdmadl/loader.h>

#undef ibv_get_device_list

enum { nthreads = 16 };

static pthread_barrier_t barrier;
static pthread_t threads[nthreads];
static struct {
  struct ibv_device **list;
  int n, err;
  rdmadl_state state;
} seen[nthreads];

static void *run(void *arg) {
  long i = (long)arg;
  pthread_barrier_wait(&barrier);
  errno = 0;
  seen[i].list = ibv_get_device_list(&seen[i].n);
  seen[i].err = errno;
  seen[i].state = rdmadl_lib_state(RDMADL_LIB_IBVERBS);
  if (seen[i].list)
    ibv_free_device_list(seen[i].list);
  return NULL;
}

__attribute__((constructor(101))) static void start_early(void) {
  pthread_barrier_init(&barrier, NULL, nthreads);
  for (long i = 0; i < nthreads; i++)
    pthread_create(&threads[i], NULL, run, (void *)i);
}

int main(void) {
  for (int i = 0; i < nthreads; i++)
    pthread_join(threads[i], NULL);
  int ok = 1;
  for (int i = 1; i < nthreads; i++)
    ok &= (seen[i].list != NULL) == (seen[0].list != NULL) && seen[i].n == seen[0].n &&
          seen[i].err == seen[0].err && seen[i].state == seen[0].state;
  ok &= seen[0].state == rdmadl_lib_state(RDMADL_LIB_IBVERBS);
  if (!seen[0].list)
    ok &= seen[0].err != 0;
  printf("threads: %d threads, state %s, list %s, errno %d: %s\n", nthreads,
         rdmadl_state_name(seen[0].state), seen[0].list ? "non-NULL" : "NULL", seen[0].err,
         ok ? "consistent" : "INCONSISTENT");
  return ok ? 0 : 1;
}

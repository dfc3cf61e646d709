/* SPDX-License-Identifier: MIT */
/*
 * A library constructor (tests/fakes' fake_hooked, loaded by rdmadl's own
 * constructor) starts a thread that calls verbs and joins it. That thread
 * cannot be served before the load finishes, and the load cannot finish
 * before the thread does: rdmadl must fail that call after its deadlock
 * guard, with a diagnostic, not hang. Exit 0 when it did and the load
 * itself then completed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include <infiniband/verbs.h>

#include <rdmadl/loader.h>

#undef ibv_get_device_list

static int thread_errno = -1, thread_ran;
static struct ibv_device **thread_list;

static void *call_verbs(void *arg) {
  (void)arg;
  int n = -1;
  errno = 0;
  thread_list = ibv_get_device_list(&n);
  thread_errno = errno;
  thread_ran = 1;
  return NULL;
}

__attribute__((visibility("default"))) void fake_ctor_hook(void);
void fake_ctor_hook(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, call_verbs, NULL) == 0)
    pthread_join(t, NULL);
}

int main(void) {
  rdmadl_state st = rdmadl_lib_state(RDMADL_LIB_IBVERBS);
  printf("thread ran %d, list %s, errno %d; state %s\n", thread_ran, thread_list ? "yes" : "no",
         thread_errno, rdmadl_state_name(st));
  int n = -1;
  struct ibv_device **list = ibv_get_device_list(&n);
  int ok = thread_ran && !thread_list && thread_errno == EOPNOTSUPP && st == RDMADL_STATE_LOADED &&
           list != NULL;
  if (list)
    ibv_free_device_list(list);
  printf("ctorthread: %s\n", ok ? "consistent" : "INCONSISTENT");
  return ok ? 0 : 1;
}

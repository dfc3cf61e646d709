/* SPDX-License-Identifier: MIT */
/*
 * fork() while another thread is inside the loader: thread B's first stub
 * call dlopens tests/fakes' fake_hooked, whose constructor calls
 * fake_ctor_hook() below, which holds B there while the main thread forks.
 * The child must load from scratch and count the table's libibverbs symbols
 * once, not twice as many.
 * Linked with the drop-in archive so that this runs before rdmadl's own
 * constructor. Exit 0 when parent and child agree with that.
 */
#include "symbol_counts.h"
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include <rdmadl/loader.h>

/* Under LeakSanitizer the child also checks that loading again freed what
 * the cut-off load had allocated (the child leaves by _exit, which skips
 * LSan's check at exit). */
#if defined(__SANITIZE_ADDRESS__)
#define FORKLOAD_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FORKLOAD_LSAN 1
#endif
#endif
#ifdef FORKLOAD_LSAN
#include <sanitizer/lsan_interface.h>
static int leaked(void) {
  return __lsan_do_recoverable_leak_check();
}
#else
static int leaked(void) {
  return 0;
}
#endif

#undef ibv_get_device_list

static sem_t inside, release;
static pthread_t b;
static int child_status = -1;

__attribute__((visibility("default"))) void fake_ctor_hook(void);
void fake_ctor_hook(void) {
  sem_post(&inside);
  sem_wait(&release);
}

static void *first_call(void *arg) {
  (void)arg;
  int n;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (list)
    ibv_free_device_list(list);
  return NULL;
}

static int child(void) {
  alarm(30);
  size_t count = rdmadl_lib_symbol_count(RDMADL_LIB_IBVERBS);
  size_t missing = rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS);
  rdmadl_state st = rdmadl_lib_state(RDMADL_LIB_IBVERBS);
  int n = -1;
  struct ibv_device **list = ibv_get_device_list(&n);
  printf("child: state %s, %zu symbols, %zu missing, list %s\n", rdmadl_state_name(st), count,
         missing, list ? "yes" : "no");
  fflush(stdout);
  int ok = st == RDMADL_STATE_LOADED && count == RDMADL_TEST_IBV_SYMBOLS && missing == 0 && list;
  if (list)
    ibv_free_device_list(list);
  if (leaked()) {
    printf("child: the load again leaked\n");
    ok = 0;
  }
  fflush(stdout);
  return ok ? 0 : 1;
}

__attribute__((constructor(101))) static void race(void) {
  sem_init(&inside, 0, 0);
  sem_init(&release, 0, 0);
  pthread_create(&b, NULL, first_call, NULL);
  while (sem_wait(&inside) != 0 && errno == EINTR)
    ;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0)
    _exit(child());
  sem_post(&release);
  pthread_join(b, NULL);
  if (pid > 0 && waitpid(pid, &child_status, 0) != pid)
    child_status = -1;
}

int main(void) {
  size_t count = rdmadl_lib_symbol_count(RDMADL_LIB_IBVERBS);
  printf("parent: state %s, %zu symbols, %zu missing\n",
         rdmadl_state_name(rdmadl_lib_state(RDMADL_LIB_IBVERBS)), count,
         rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS));
  int ok = WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0 &&
           count == RDMADL_TEST_IBV_SYMBOLS &&
           rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_LOADED;
  printf("forkload: %s (child status %d)\n", ok ? "consistent" : "INCONSISTENT", child_status);
  return ok ? 0 : 1;
}

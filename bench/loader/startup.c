/* SPDX-License-Identifier: MIT */
/*
 * Whole-process start-up, the program of bench/README.md's start-up measurements:
 *   BENCH_TEST=1  main() calls ibv_get_device_list once
 *   BENCH_TEST=2  the same plus rdma_create_event_channel
 *   BENCH_TEST=0  an empty main() (the floor)
 *   BENCH_TEST=-1 an empty main() after a constructor that does what any
 *                 loader opening libibverbs at start-up must: one dlopen by
 *                 soname, the reason kept when it fails, errno left as it was
 *                 (the floor of the no-stack case)
 * Built linked directly with rdma-core, with rdmadl's drop-in (.a, .so.0),
 * and with BENCH_NCCL against nccl_loader.c's wrappers.
 */
#if BENCH_TEST > 0
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#ifdef BENCH_NCCL
#include "nccl_loader.h"
#define ibv_get_device_list_ bench_ibv_get_device_list
#define ibv_free_device_list_ bench_ibv_free_device_list
#define rdma_create_event_channel_ bench_rdma_create_event_channel
#define rdma_destroy_event_channel_ bench_rdma_destroy_event_channel
#else
#undef ibv_get_device_list
#define ibv_get_device_list_ ibv_get_device_list
#define ibv_free_device_list_ ibv_free_device_list
#define rdma_create_event_channel_ rdma_create_event_channel
#define rdma_destroy_event_channel_ rdma_destroy_event_channel
#endif
#endif

#if BENCH_TEST < 0
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

static void *volatile floor_handle;
static char *volatile floor_why;

__attribute__((constructor)) static void floor_load(void) {
  int saved = errno;
  floor_handle = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!floor_handle) {
    const char *why = dlerror();
    floor_why = why ? strdup(why) : NULL;
  }
  errno = saved;
}
#endif

int main(void) {
#if BENCH_TEST > 0
  int n = 0;
  struct ibv_device **list = ibv_get_device_list_(&n);
  if (list)
    ibv_free_device_list_(list);
#endif
#if BENCH_TEST > 1
  struct rdma_event_channel *ch = rdma_create_event_channel_();
  if (ch)
    rdma_destroy_event_channel_(ch);
#endif
  return 0;
}

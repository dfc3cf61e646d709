/* SPDX-License-Identifier: MIT */
/*
 * The naive baseline: what NCCL's ibvwrap does, reduced to its core. On the
 * first call, under pthread_once: dlopen("libibverbs.so.1", RTLD_NOW) and
 * dlvsym the 27 verbs a NCCL-like transport uses at their version nodes (and
 * librdmacm's two for test 2, on their first use). No diagnostics, no
 * version-node scan, no soname check. Written for bench/ only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#include "nccl_loader.h"

#define IBV_SYMS(X)                                                                                \
  X(ibv_get_device_list, "IBVERBS_1.1")                                                            \
  X(ibv_free_device_list, "IBVERBS_1.1")                                                           \
  X(ibv_get_device_name, "IBVERBS_1.1")                                                            \
  X(ibv_open_device, "IBVERBS_1.1")                                                                \
  X(ibv_close_device, "IBVERBS_1.1")                                                               \
  X(ibv_get_async_event, "IBVERBS_1.1")                                                            \
  X(ibv_ack_async_event, "IBVERBS_1.1")                                                            \
  X(ibv_query_device, "IBVERBS_1.1")                                                               \
  X(ibv_query_port, "IBVERBS_1.1")                                                                 \
  X(ibv_query_gid, "IBVERBS_1.1")                                                                  \
  X(ibv_query_qp, "IBVERBS_1.1")                                                                   \
  X(ibv_alloc_pd, "IBVERBS_1.1")                                                                   \
  X(ibv_dealloc_pd, "IBVERBS_1.1")                                                                 \
  X(ibv_reg_mr, "IBVERBS_1.1")                                                                     \
  X(ibv_reg_mr_iova2, "IBVERBS_1.8")                                                               \
  X(ibv_reg_dmabuf_mr, "IBVERBS_1.12")                                                             \
  X(ibv_dereg_mr, "IBVERBS_1.1")                                                                   \
  X(ibv_create_cq, "IBVERBS_1.1")                                                                  \
  X(ibv_destroy_cq, "IBVERBS_1.1")                                                                 \
  X(ibv_create_qp, "IBVERBS_1.1")                                                                  \
  X(ibv_modify_qp, "IBVERBS_1.1")                                                                  \
  X(ibv_destroy_qp, "IBVERBS_1.1")                                                                 \
  X(ibv_fork_init, "IBVERBS_1.1")                                                                  \
  X(ibv_event_type_str, "IBVERBS_1.1")                                                             \
  X(ibv_query_ece, "IBVERBS_1.10")                                                                 \
  X(ibv_set_ece, "IBVERBS_1.10")                                                                   \
  X(ibv_create_comp_channel, "IBVERBS_1.0")

#define DECLARE(name, node) static void *p_##name;
IBV_SYMS(DECLARE)
static void *p_rdma_create_event_channel, *p_rdma_destroy_event_channel;

static pthread_once_t ibv_once = PTHREAD_ONCE_INIT, cm_once = PTHREAD_ONCE_INIT;

static void load_ibv(void) {
  void *h = dlopen("libibverbs.so.1", RTLD_NOW);
  if (!h)
    return;
#define BIND(name, node) p_##name = dlvsym(h, #name, node);
  IBV_SYMS(BIND)
}

static void load_cm(void) {
  void *h = dlopen("librdmacm.so.1", RTLD_NOW);
  if (!h)
    return;
  p_rdma_create_event_channel = dlvsym(h, "rdma_create_event_channel", "RDMACM_1.0");
  p_rdma_destroy_event_channel = dlvsym(h, "rdma_destroy_event_channel", "RDMACM_1.0");
}

struct ibv_device **bench_ibv_get_device_list(int *num_devices) {
  pthread_once(&ibv_once, load_ibv);
  if (!p_ibv_get_device_list) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  return ((struct ibv_device * *(*)(int *)) p_ibv_get_device_list)(num_devices);
}

void bench_ibv_free_device_list(struct ibv_device **list) {
  pthread_once(&ibv_once, load_ibv);
  if (p_ibv_free_device_list)
    ((void (*)(struct ibv_device **))p_ibv_free_device_list)(list);
}

struct rdma_event_channel *bench_rdma_create_event_channel(void) {
  pthread_once(&cm_once, load_cm);
  if (!p_rdma_create_event_channel) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  return ((struct rdma_event_channel * (*)(void)) p_rdma_create_event_channel)();
}

void bench_rdma_destroy_event_channel(struct rdma_event_channel *channel) {
  pthread_once(&cm_once, load_cm);
  if (p_rdma_destroy_event_channel)
    ((void (*)(struct rdma_event_channel *))p_rdma_destroy_event_channel)(channel);
}

/* SPDX-License-Identifier: MIT */
/* The minimal NCCL-style loader of nccl_loader.c: wrappers that load on
 * first use and fail with EOPNOTSUPP when the stack is absent. */
#ifndef BENCH_NCCL_LOADER_H
#define BENCH_NCCL_LOADER_H

struct ibv_device;
struct rdma_event_channel;

struct ibv_device **bench_ibv_get_device_list(int *num_devices);
void bench_ibv_free_device_list(struct ibv_device **list);
struct rdma_event_channel *bench_rdma_create_event_channel(void);
void bench_rdma_destroy_event_channel(struct rdma_event_channel *channel);

#endif

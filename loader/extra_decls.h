/* SPDX-License-Identifier: MIT */
/*
 * Prototypes of exported symbols that rdma-core 65.0's installed headers no
 * longer declare: libibverbs's old driver.h and marshall.h functions, and
 * libmlx5's MLX5_1.6 mlx5dv_create_flow (mlx5dv.h now makes that name a
 * macro for __mlx5dv_create_flow; the parentheses keep it from expanding).
 * They are in symbols.def because the libraries still export them.
 */
#ifndef RDMADL_EXTRA_DECLS_H
#define RDMADL_EXTRA_DECLS_H

#include <infiniband/mlx5dv.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct verbs_device *(*rdmadl_ibv_driver_init_func)(const char *uverbs_sys_path,
                                                            int abi_version);

void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
void ibv_register_driver(const char *name, rdmadl_ibv_driver_init_func init_func);
struct ibv_flow *(mlx5dv_create_flow)(struct mlx5dv_flow_matcher *flow_matcher,
                                      struct mlx5dv_flow_match_parameters *match_value,
                                      size_t num_actions,
                                      struct mlx5dv_flow_action_attr actions_attr[]);

#ifdef __cplusplus
}
#endif

#endif /* RDMADL_EXTRA_DECLS_H */

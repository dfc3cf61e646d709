/* SPDX-License-Identifier: MIT */
/*
 * Prototypes of exported libibverbs symbols that rdma-core 65.0's installed
 * headers no longer declare (they lived in driver.h and marshall.h). They are
 * in symbols.def because libibverbs.so.1 still exports them.
 */
#ifndef RDMADL_EXTRA_DECLS_H
#define RDMADL_EXTRA_DECLS_H

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

#ifdef __cplusplus
}
#endif

#endif /* RDMADL_EXTRA_DECLS_H */

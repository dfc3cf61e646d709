/* SPDX-License-Identifier: MIT */
/* Another shared library of the process that links the real libibverbs
 * directly (NEEDED libibverbs.so.1), as a product's other RDMA user would. */
#include <infiniband/verbs.h>

#undef ibv_get_device_list

__attribute__((visibility("default"))) struct ibv_device **other_get_device_list(int *n) {
  return ibv_get_device_list(n);
}
__attribute__((visibility("default"))) void other_free_device_list(struct ibv_device **l) {
  ibv_free_device_list(l);
}

/* SPDX-License-Identifier: MIT */
/*
 * ibv_get_device_list, the HAND entry every verbs program calls first: its
 * failure also sets *num_devices. Alone in its object, so that a program
 * linked with librdmadl-verbs.a binds only what it calls (loader/bind.c).
 */
#include <infiniband/verbs.h>

#include "internal.h"

#undef ibv_get_device_list

/* Same contract as ibv_get_device_list(3), and *num_devices = 0 on failure. */
RDMADL_STUB_API struct ibv_device **RDMADL_NAME(ibv_get_device_list)(int *num_devices) {
  __typeof__(&ibv_get_device_list) f = RDMADL_FN(ibv_get_device_list);
  if (f)
    return f(num_devices);
  if (num_devices)
    *num_devices = 0;
  rdmadl_refuse(RDMADL_IDX_ibv_get_device_list);
  return NULL;
}
RDMADL_LINKED(ibv_get_device_list)

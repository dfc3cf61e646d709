/* SPDX-License-Identifier: MIT */
/* Whole-process start-up: load libibverbs and librdmacm, bind (rdmadl) or
 * relocate (direct link) everything, ask for the device list, exit. */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

int main(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (list)
    ibv_free_device_list(list);
  return rdma_event_str(RDMA_CM_EVENT_ESTABLISHED)[0] == 'R' ? 0 : 1;
}

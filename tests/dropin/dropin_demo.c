/* SPDX-License-Identifier: MIT */
/*
 * An ordinary C program written against libibverbs and librdmacm, built with
 * the bundled headers and linked with rdmadl's drop-in library instead of
 * -libverbs -lrdmacm. It lists devices and opens an rdma_cm event channel;
 * when the stack cannot do that it must fail cleanly (NULL and a meaningful
 * errno), never crash. Exit 0 when what it saw agrees with rdmadl's own
 * diagnostics, 1 otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <rdmadl/loader.h>

int main(void) {
  int ok = 1;
  int n = -1;
  rdmadl_stack stack = rdmadl_stack_state();
  printf("dropin-demo: rdmadl: %s (stack %s)\n", rdmadl_reason(), rdmadl_stack_name(stack));

  errno = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  int err = errno;
  if (list) {
    printf("dropin-demo: %d device(s)\n", n);
    for (int i = 0; i < n; i++)
      printf("dropin-demo:   %s\n", ibv_get_device_name(list[i]));
    ibv_free_device_list(list);
    ok &= (n > 0) == (stack == RDMADL_STACK_READY);
  } else {
    printf("dropin-demo: ibv_get_device_list: %s\n", strerror(err));
    ok &= n == 0 && err != 0 && stack != RDMADL_STACK_READY;
    if (stack == RDMADL_STACK_NO_LIBRARY || stack == RDMADL_STACK_DISABLED)
      ok &= err == EOPNOTSUPP;
  }

  errno = 0;
  struct rdma_event_channel *ch = rdma_create_event_channel();
  err = errno;
  if (ch) {
    printf("dropin-demo: rdma_cm event channel fd %d\n", ch->fd);
    rdma_destroy_event_channel(ch);
  } else {
    printf("dropin-demo: rdma_create_event_channel: %s\n", strerror(err));
    ok &= err != 0;
    if (stack == RDMADL_STACK_NO_LIBRARY || stack == RDMADL_STACK_DISABLED)
      ok &= err == EOPNOTSUPP;
  }
  printf("dropin-demo: %s\n", ok ? "consistent" : "INCONSISTENT");
  return ok ? 0 : 1;
}

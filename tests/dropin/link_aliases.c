/* SPDX-License-Identifier: MIT */
/*
 * A C program written for rdma-core and nothing else (no rdmadl header),
 * built by tests/dropin/check-link-aliases.sh the way a Makefile would:
 * -libverbs -lrdmacm -lmlx5 -libumad (or their pkg-config modules) against
 * rdmadl's link-alias directory. It calls one function of each library; run
 * with RDMADL_DISABLE=1, each must fail the way its man page says it fails,
 * with errno EOPNOTSUPP. Prints "link-aliases: clean" and exits 0 when all
 * did, 1 otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/mlx5dv.h>
#include <infiniband/umad.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static int check(const char *call, int failed, int err) {
  int ok = failed && err == EOPNOTSUPP;
  printf("link-aliases: %s: %s (%s)\n", call, ok ? "failed cleanly" : "UNEXPECTED", strerror(err));
  return ok;
}

int main(void) {
  int ok = 1;
  int n = -1;

  errno = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  ok &= check("ibv_get_device_list", !list && n == 0, errno);

  errno = 0;
  struct rdma_event_channel *ch = rdma_create_event_channel();
  ok &= check("rdma_create_event_channel", !ch, errno);

  /* With no library behind it the stub never looks at the device. */
  errno = 0;
  bool dv = mlx5dv_is_supported(NULL);
  ok &= check("mlx5dv_is_supported", !dv, errno);

  errno = 0;
  int r = umad_init();
  ok &= check("umad_init", r == -1, errno);

  char cas[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
  errno = 0;
  r = umad_get_cas_names(cas, UMAD_MAX_DEVICES);
  ok &= check("umad_get_cas_names", r < 0, errno);

  printf("link-aliases: %s\n", ok ? "clean" : "NOT CLEAN");
  return ok ? 0 : 1;
}

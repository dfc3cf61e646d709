/* SPDX-License-Identifier: MIT */
/*
 * absent_test LIB STATE - librdmadl-ffi used the way another language uses
 * it: dlopen + dlsym only, no rdma-core header, so no verbs.h inline code is
 * compiled into this program. Run with no RDMA stack (RDMADL_DISABLE=1, or
 * RDMADL_IBVERBS_PATH naming a missing file); STATE is what rdmadl_lib_state
 * must then report for libibverbs ("disabled" or "not-found"). Checks that
 * every table name resolves, that the reachable calls fail cleanly with
 * EOPNOTSUPP as the drop-in's do, and that the inline wrappers that need no
 * device object compute what verbs.h's definitions compute.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ffi_check.h"
#include "rdmadl_ffi_names.h"

#define FN(ret, name, params) ret(*name) params = (ret(*) params)sym(#name)

int main(int argc, char **argv) {
  open_library(argc, argv, 2, "absent_test", "LIBRARY disabled|not-found");
  size_t n = sizeof rdmadl_ffi_names / sizeof rdmadl_ffi_names[0], found = 0;
  for (size_t i = 0; i < n; i++)
    found += dlsym(h, rdmadl_ffi_names[i]) != NULL;
  printf("absent_test: %zu of %zu table names resolve\n", found, n);
  check("every table name resolves", found == n && n == RDMADL_FFI_NAMES_COUNT);

  FN(int, rdmadl_load, (void));
  FN(int, rdmadl_lib_state, (int));
  FN(const char *, rdmadl_state_name, (int));
  FN(const char *, rdmadl_reason, (void));
  FN(void **, ibv_get_device_list, (int *));
  FN(void *, ibv_reg_mr, (void *, void *, size_t, int));
  FN(void *, ibv_reg_mr_iova, (void *, void *, size_t, uint64_t, int));
  FN(void *, rdma_create_event_channel, (void));
  FN(const char *, ibv_wc_status_str, (int));
  FN(uint32_t, ibv_inc_rkey, (uint32_t));
  FN(int, ibv_is_qpt_supported, (uint32_t, int));
  FN(uint16_t, ibv_flow_label_to_udp_sport, (uint32_t));
  FN(int, rdma_seterrno, (int));
  if (failures)
    return 1;

  check("rdmadl_load() == EOPNOTSUPP", rdmadl_load() == EOPNOTSUPP);
  const char *state = rdmadl_state_name(rdmadl_lib_state(0));
  printf("absent_test: libibverbs state %s; reason: %s\n", state, rdmadl_reason());
  check("libibverbs state as expected", strcmp(state, argv[2]) == 0);

  int num = 42;
  errno = 0;
  void **list = ibv_get_device_list(&num);
  check("ibv_get_device_list: NULL, 0 devices, EOPNOTSUPP",
        list == NULL && num == 0 && errno == EOPNOTSUPP);
  char buf[64];
  errno = 0;
  check("ibv_reg_mr (the macro's semantics): NULL, EOPNOTSUPP",
        ibv_reg_mr(NULL, buf, sizeof buf, 1) == NULL && errno == EOPNOTSUPP);
  errno = 0;
  check("ibv_reg_mr_iova: NULL, EOPNOTSUPP",
        ibv_reg_mr_iova(NULL, buf, sizeof buf, 4096, 1) == NULL && errno == EOPNOTSUPP);
  errno = 0;
  check("rdma_create_event_channel: NULL, EOPNOTSUPP",
        rdma_create_event_channel() == NULL && errno == EOPNOTSUPP);
  check("ibv_wc_status_str(IBV_WC_SUCCESS) still says \"success\"",
        strcmp(ibv_wc_status_str(0), "success") == 0);

  /* Inline wrappers that need no device object: verbs.h's arithmetic. */
  check("ibv_inc_rkey",
        ibv_inc_rkey(0x123456ffu) == 0x12345600u && ibv_inc_rkey(0x12345678u) == 0x12345679u);
  check("ibv_is_qpt_supported",
        ibv_is_qpt_supported(1u << 2, 2) && !ibv_is_qpt_supported(1u << 3, 2));
  check("ibv_flow_label_to_udp_sport",
        ibv_flow_label_to_udp_sport(0) == 0xC000 && ibv_flow_label_to_udp_sport(0x4003) == 0xC002);
  errno = 0;
  check("rdma_seterrno", rdma_seterrno(0) == 0 && rdma_seterrno(EINVAL) == -1 && errno == EINVAL);
  /* No dlclose: the loader's diagnostics live as long as the process. */
  printf("absent_test: %s\n", failures ? "FAILED" : "consistent");
  return failures != 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * A fake libibverbs.so.1 for testing the loader's own logic at the dlopen
 * boundary (never as a stand-in for a real RDMA path). Every libibverbs name
 * of symbols.def is defined; which of them are exported, and at which version
 * nodes, is decided by the version script each fake is linked with
 * (tests/fakes/CMakeLists.txt). Calls do nothing useful, except:
 *   ibv_get_device_list  returns an empty, non-NULL list
 *   ibv_reg_mr           returns a static MR recording its arguments
 * With FAKE_CTOR_CALLS, a constructor calls ibv_get_device_list through the
 * global scope while the loader is still inside dlopen, and publishes what it
 * got in the environment variable FAKE_CTOR_RESULT.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "extra_decls.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define FAKE_API __attribute__((visibility("default")))
#define FAKE_BODY_VOID(ret, name, params)                                                          \
  FAKE_API ret name params {}
#define FAKE_BODY_VALUE(ret, name, params)                                                         \
  FAKE_API ret name params {                                                                       \
    return (ret)0;                                                                                 \
  }
#define FAKE_BODY_NULLPTR FAKE_BODY_VALUE
#define FAKE_BODY_M1 FAKE_BODY_VALUE
#define FAKE_BODY_ERRNO FAKE_BODY_VALUE
#define FAKE_BODY_NEGERRNO FAKE_BODY_VALUE
#define FAKE_BODY_ZERO FAKE_BODY_VALUE
#define FAKE_BODY_STR(ret, name, params)                                                           \
  FAKE_API ret name params {                                                                       \
    return "fake";                                                                                 \
  }
#define FAKE_GEN(fail, ret, name, params) FAKE_BODY_##fail(ret, name, params)
#define FAKE_IBV_GEN FAKE_GEN
#define FAKE_IBV_HAND FAKE_GEN
#define FAKE_CM_GEN(fail, ret, name, params)
#define FAKE_CM_HAND(fail, ret, name, params)
/* The two written by hand below are generated under another, unexported name. */
#define ibv_get_device_list fake_gen_ibv_get_device_list
#define ibv_reg_mr fake_gen_ibv_reg_mr
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  FAKE_##lib##_##impl(fail, ret, name, params)
#include "symbols.def"
#undef RDMADL_SYM
#undef ibv_get_device_list
#undef ibv_reg_mr

static struct ibv_device *empty_list[1];

FAKE_API struct ibv_device **ibv_get_device_list(int *num_devices) {
  if (num_devices)
    *num_devices = 0;
  return empty_list;
}

static struct ibv_mr fake_mr;

FAKE_API struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access) {
  fake_mr.pd = pd;
  fake_mr.addr = addr;
  fake_mr.length = length;
  fake_mr.lkey = (uint32_t)access;
  return &fake_mr;
}

#ifdef FAKE_CTOR_CALLS
#include <dlfcn.h>
__attribute__((constructor)) static void fake_ctor(void) {
  /* The address through the GOT is the global scope's definition: the
   * drop-in stub when a program links librdmadl-verbs.so. */
  Dl_info info;
  struct ibv_device **(*callee)(int *) = ibv_get_device_list;
  setenv("FAKE_CTOR_CALLEE", dladdr((void *)callee, &info) ? info.dli_fname : "?", 1);
  int n = -1;
  errno = 0;
  struct ibv_device **list = callee(&n);
  setenv("FAKE_CTOR_RESULT", list == empty_list && n == 0 ? "own-list" : "other", 1);
}
#endif

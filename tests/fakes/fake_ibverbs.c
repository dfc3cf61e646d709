/* SPDX-License-Identifier: MIT */
/*
 * A fake libibverbs.so.1 for testing the loader's own logic at the dlopen
 * boundary (never as a stand-in for a real RDMA path). Every libibverbs name
 * of symbols.def is defined; which of them are exported, and at which version
 * nodes, is decided by the version script each fake is linked with
 * (tests/fakes/CMakeLists.txt). Calls do nothing useful, except:
 *   ibv_get_device_list  returns an empty, non-NULL list
 *   ibv_reg_mr, ibv_reg_mr_iova2, ibv_reg_dmabuf_mr, ibv_reg_mr_ex
 *                        return one static MR recording which of them ran and
 *                        their arguments (see fake_mr below), so the tests can
 *                        tell which call rdmadl's fallbacks made
 * With FAKE_CTOR_CALLS, a constructor calls ibv_get_device_list through the
 * global scope while the loader is still inside dlopen, and publishes what it
 * got in the environment variable FAKE_CTOR_RESULT.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "extra_decls.h"
#include "fake_bodies.h"
#include "table_rows.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* Those written by hand below are generated under another, unexported name. */
#define ibv_get_device_list fake_gen_ibv_get_device_list
#define ibv_reg_mr fake_gen_ibv_reg_mr
#define ibv_reg_mr_iova2 fake_gen_ibv_reg_mr_iova2
#define ibv_reg_dmabuf_mr fake_gen_ibv_reg_dmabuf_mr
#define ibv_reg_mr_ex fake_gen_ibv_reg_mr_ex
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  RDMADL_ROW_OF(IBV, lib, FAKE_GEN)(fail, ret, name, params)
#include "symbols.def"
#undef RDMADL_SYM
#undef ibv_get_device_list
#undef ibv_reg_mr
#undef ibv_reg_mr_iova2
#undef ibv_reg_dmabuf_mr
#undef ibv_reg_mr_ex

static struct ibv_device *empty_list[1];

FAKE_API struct ibv_device **ibv_get_device_list(int *num_devices) {
  if (num_devices)
    *num_devices = 0;
  return empty_list;
}

/* The registration calls' record: handle says which call ran (FAKE_MR_*),
 * pd/addr/length/lkey (= access) its arguments, context the iova (as a
 * pointer-sized integer), rkey the dma-buf fd (ibv_reg_dmabuf_mr) or the
 * comp_mask (ibv_reg_mr_ex). Not a usable MR. */
enum { FAKE_MR_REG_MR = 1, FAKE_MR_IOVA2 = 2, FAKE_MR_DMABUF = 3, FAKE_MR_EX = 4 };
static struct ibv_mr fake_mr;

static struct ibv_mr *record(int which, struct ibv_pd *pd, void *addr, size_t length, int access,
                             uint64_t iova, uint32_t extra) {
  fake_mr = (struct ibv_mr){.context = (struct ibv_context *)(uintptr_t)iova,
                            .pd = pd,
                            .addr = addr,
                            .length = length,
                            .handle = (uint32_t)which,
                            .lkey = (uint32_t)access,
                            .rkey = extra};
  return &fake_mr;
}

FAKE_API struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access) {
  return record(FAKE_MR_REG_MR, pd, addr, length, access, (uintptr_t)addr, 0);
}

FAKE_API struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
                                         uint64_t iova, unsigned int access) {
  return record(FAKE_MR_IOVA2, pd, addr, length, (int)access, iova, 0);
}

FAKE_API struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                          uint64_t iova, int fd, int access) {
  return record(FAKE_MR_DMABUF, pd, (void *)(uintptr_t)offset, length, access, iova, (uint32_t)fd);
}

FAKE_API struct ibv_mr *ibv_reg_mr_ex(struct ibv_pd *pd, struct ibv_mr_init_attr *in) {
  return record(FAKE_MR_EX, pd, in->addr, in->length, in->access, in->iova,
                (uint32_t)in->comp_mask);
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

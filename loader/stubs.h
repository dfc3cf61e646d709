/* SPDX-License-Identifier: MIT */
/*
 * The generated stubs' form, shared by stubs.c (every library but
 * librdmacm) and stubs_cm.c (librdmacm): RDMADL_IMPL_GEN defines one stub.
 * Compiled twice: with RDMADL_DROPIN the stubs carry the real names (the
 * drop-in libraries; the compiler then checks each prototype against
 * rdma-core's headers), without it they are the hidden rdmadl_sym_*
 * functions the C++ API calls.
 */
#ifndef RDMADL_LOADER_STUBS_H
#define RDMADL_LOADER_STUBS_H

#include <errno.h>

#include "internal.h"
#include "rdma_api.h"

/* verbs.h and mlx5dv.h wrap these in function-like macros; the stubs define
 * the symbols. */
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef mlx5dv_create_flow

/*
 * Each stub is a fast path the compiler turns into load, test, branch and an
 * indirect tail jump (four instructions on x86-64; see bench/README.md), and
 * a cold, out-of-line slow path with the same arguments: it loads if needed,
 * forwards when the symbol is now bound, else fails as documented and
 * records why (refusal.h).
 */
#define RDMADL_FAIL_VALUE(failure) return failure;
#define RDMADL_FAIL_NULLPTR(ret) RDMADL_FAIL_VALUE((ret)0)
#define RDMADL_FAIL_ZERO(ret) RDMADL_FAIL_VALUE((ret)0)
#define RDMADL_FAIL_M1(ret) RDMADL_FAIL_VALUE((ret)-1)
#define RDMADL_FAIL_ERRNO(ret) RDMADL_FAIL_VALUE(EOPNOTSUPP)
#define RDMADL_FAIL_NEGERRNO(ret) RDMADL_FAIL_VALUE(-EOPNOTSUPP)
#define RDMADL_FAIL_VOID(ret) return;
#define RDMADL_TAIL_VALUE(call) return call;
#define RDMADL_TAIL_NULLPTR RDMADL_TAIL_VALUE
#define RDMADL_TAIL_ZERO RDMADL_TAIL_VALUE
#define RDMADL_TAIL_M1 RDMADL_TAIL_VALUE
#define RDMADL_TAIL_ERRNO RDMADL_TAIL_VALUE
#define RDMADL_TAIL_NEGERRNO RDMADL_TAIL_VALUE
#define RDMADL_TAIL_VOID(call)                                                                     \
  {                                                                                                \
    call;                                                                                          \
    return;                                                                                        \
  }

#define RDMADL_IMPL_HAND(fail, ret, name, params, args)
#define RDMADL_IMPL_EMU(fail, ret, name, params, args)
#define RDMADL_IMPL_GEN(fail, ret, name, params, args)                                             \
  __attribute__((cold, noinline)) static ret rdmadl_slow_##name params {                           \
    void *f = rdmadl_resolve_slow(RDMADL_IDX_##name);                                              \
    if (f) {                                                                                       \
      RDMADL_TAIL_##fail(((ret(*) params)f)args)                                                   \
    }                                                                                              \
    rdmadl_refuse(RDMADL_IDX_##name);                                                              \
    RDMADL_FAIL_##fail(ret)                                                                        \
  }                                                                                                \
  RDMADL_STUB_API ret RDMADL_NAME(name) params {                                                   \
    void *f = __atomic_load_n(&rdmadl_fn[RDMADL_IDX_##name], __ATOMIC_ACQUIRE);                    \
    if (__builtin_expect(f == NULL, 0)) {                                                          \
      RDMADL_TAIL_##fail(rdmadl_slow_##name args)                                                  \
    }                                                                                              \
    RDMADL_TAIL_##fail(((ret(*) params)f)args)                                                     \
  }

#endif /* RDMADL_LOADER_STUBS_H */

/* SPDX-License-Identifier: MIT */
/*
 * The generated stubs: one per GEN entry of symbols.def (HAND and EMU ones
 * are in hand.c). Each forwards to the function the loader bound, or fails
 * the way its man page documents failure, with errno EOPNOTSUPP. Compiled twice: with RDMADL_DROPIN
 * the stubs carry the real names (the drop-in libraries; the compiler then checks each prototype
 * against rdma-core's headers), without it they are the hidden rdmadl_sym_*
 * functions the C++ API calls.
 */
#include <errno.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "extra_decls.h"
#include "internal.h"

/* verbs.h wraps these in function-like macros; the stubs define the symbols. */
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define RDMADL_BODY_VALUE(ret, params, args, failure)                                              \
  {                                                                                                \
    void *f = rdmadl_load_fn(idx);                                                                 \
    if (__builtin_expect(f != NULL, 1))                                                            \
      return ((ret(*) params)f)args;                                                               \
    errno = EOPNOTSUPP;                                                                            \
    return failure;                                                                                \
  }
#define RDMADL_BODY_NULLPTR(ret, params, args) RDMADL_BODY_VALUE(ret, params, args, (ret)0)
#define RDMADL_BODY_ZERO(ret, params, args) RDMADL_BODY_VALUE(ret, params, args, (ret)0)
#define RDMADL_BODY_M1(ret, params, args) RDMADL_BODY_VALUE(ret, params, args, (ret)-1)
#define RDMADL_BODY_ERRNO(ret, params, args) RDMADL_BODY_VALUE(ret, params, args, EOPNOTSUPP)
#define RDMADL_BODY_NEGERRNO(ret, params, args) RDMADL_BODY_VALUE(ret, params, args, -EOPNOTSUPP)
#define RDMADL_BODY_VOID(ret, params, args)                                                        \
  {                                                                                                \
    void *f = rdmadl_load_fn(idx);                                                                 \
    if (__builtin_expect(f != NULL, 1)) {                                                          \
      ((ret(*) params)f) args;                                                                     \
      return;                                                                                      \
    }                                                                                              \
    errno = EOPNOTSUPP;                                                                            \
  }

#define RDMADL_IMPL_HAND(fail, ret, name, params, args)
#define RDMADL_IMPL_EMU(fail, ret, name, params, args)
#define RDMADL_IMPL_GEN(fail, ret, name, params, args)                                             \
  RDMADL_STUB_API ret RDMADL_NAME(name) params {                                                   \
    const enum rdmadl_sym_index idx = RDMADL_IDX_##name;                                           \
    RDMADL_BODY_##fail(ret, params, args)                                                          \
  }

#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  RDMADL_IMPL_##impl(fail, ret, name, params, args)
#include "symbols.def"
#undef RDMADL_SYM

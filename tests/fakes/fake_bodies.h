/* SPDX-License-Identifier: MIT */
/*
 * The generated functions of the fake libraries: FAKE_GEN(fail, ret, name,
 * params) defines one row of symbols.def, exported (the version script of
 * each fake decides at which node, tests/fakes/CMakeLists.txt). Without
 * FAKE_BODIES_FAIL a body answers 0 (NULL, false; "fake" for a string),
 * which is all the loader's tests need; with it, as the fake provider
 * wants, each fails as its man page documents failure, with errno
 * EOPNOTSUPP. FAKE_API marks a function written by hand.
 */
#ifndef RDMADL_TESTS_FAKE_BODIES_H
#define RDMADL_TESTS_FAKE_BODIES_H

#include <errno.h>

#define FAKE_API __attribute__((visibility("default")))
#define FAKE_GEN_API __attribute__((visibility("default"), unused))

#define FAKE_BODY_VOID(ret, name, params)                                                          \
  FAKE_GEN_API ret name params {}
#define FAKE_BODY_RETURN(ret, name, params, value, err)                                            \
  FAKE_GEN_API ret name params {                                                                   \
    if (err)                                                                                       \
      errno = err;                                                                                 \
    return (ret)(value);                                                                           \
  }
#ifdef FAKE_BODIES_FAIL
#define FAKE_BODY_NULLPTR(ret, name, params) FAKE_BODY_RETURN(ret, name, params, 0, EOPNOTSUPP)
#define FAKE_BODY_M1(ret, name, params) FAKE_BODY_RETURN(ret, name, params, -1, EOPNOTSUPP)
#define FAKE_BODY_ERRNO(ret, name, params)                                                         \
  FAKE_BODY_RETURN(ret, name, params, EOPNOTSUPP, EOPNOTSUPP)
#define FAKE_BODY_NEGERRNO(ret, name, params)                                                      \
  FAKE_BODY_RETURN(ret, name, params, -EOPNOTSUPP, EOPNOTSUPP)
#else
#define FAKE_BODY_NULLPTR(ret, name, params) FAKE_BODY_RETURN(ret, name, params, 0, 0)
#define FAKE_BODY_M1 FAKE_BODY_NULLPTR
#define FAKE_BODY_ERRNO FAKE_BODY_NULLPTR
#define FAKE_BODY_NEGERRNO FAKE_BODY_NULLPTR
#endif
#define FAKE_BODY_ZERO(ret, name, params) FAKE_BODY_RETURN(ret, name, params, 0, 0)
#define FAKE_BODY_STR(ret, name, params)                                                           \
  FAKE_GEN_API ret name params {                                                                   \
    return "fake";                                                                                 \
  }
#define FAKE_GEN(fail, ret, name, params) FAKE_BODY_##fail(ret, name, params)

#endif /* RDMADL_TESTS_FAKE_BODIES_H */

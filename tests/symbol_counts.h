/* SPDX-License-Identifier: MIT */
/* How many symbols each library has in loader/symbols.def, counted from the
 * table itself at compile time, so no test writes the numbers out. C and
 * C++; needs loader/ on the include path. */
#ifndef RDMADL_TEST_SYMBOL_COUNTS_H
#define RDMADL_TEST_SYMBOL_COUNTS_H

/* Each library token's group: libibverbs, librdmacm, a provider's
 * direct-verbs library, libibumad. */
#define RDMADL_TEST_GROUP_IBV 0
#define RDMADL_TEST_GROUP_CM 1
#define RDMADL_TEST_GROUP_MLX5 2
#define RDMADL_TEST_GROUP_EFA 2
#define RDMADL_TEST_GROUP_MLX4 2
#define RDMADL_TEST_GROUP_HNS 2
#define RDMADL_TEST_GROUP_MANA 2
#define RDMADL_TEST_GROUP_IONIC 2
#define RDMADL_TEST_GROUP_UMAD 3
#define RDMADL_TEST_IS(want, lib) (RDMADL_TEST_GROUP_##lib == (want))
enum {
  RDMADL_TEST_IBV_SYMBOLS = 0
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) +RDMADL_TEST_IS(0, lib)
#include "symbols.def"
#undef RDMADL_SYM
  ,
  RDMADL_TEST_CM_SYMBOLS = 0
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) +RDMADL_TEST_IS(1, lib)
#include "symbols.def"
#undef RDMADL_SYM
  ,
  RDMADL_TEST_PROVIDER_SYMBOLS = 0
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) +RDMADL_TEST_IS(2, lib)
#include "symbols.def"
#undef RDMADL_SYM
  ,
  RDMADL_TEST_UMAD_SYMBOLS = 0
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) +RDMADL_TEST_IS(3, lib)
#include "symbols.def"
#undef RDMADL_SYM
  ,
  RDMADL_TEST_ALL_SYMBOLS = 0
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) +1
#include "symbols.def"
#undef RDMADL_SYM
};

#endif /* RDMADL_TEST_SYMBOL_COUNTS_H */

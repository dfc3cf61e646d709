/* SPDX-License-Identifier: MIT */
/* How many symbols each library has in loader/symbols.def, counted from the
 * table itself at compile time, so no test writes the numbers out. C and
 * C++; needs loader/ on the include path. */
#ifndef RDMADL_TEST_SYMBOL_COUNTS_H
#define RDMADL_TEST_SYMBOL_COUNTS_H

#define RDMADL_TEST_IS_IBV 1
#define RDMADL_TEST_IS_CM 0
enum {
  RDMADL_TEST_IBV_SYMBOLS = 0
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) +RDMADL_TEST_IS_##lib
#include "symbols.def"
#undef RDMADL_SYM
  ,
  RDMADL_TEST_CM_SYMBOLS = 0
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) +(1 - RDMADL_TEST_IS_##lib)
#include "symbols.def"
#undef RDMADL_SYM
  ,
  RDMADL_TEST_ALL_SYMBOLS = RDMADL_TEST_IBV_SYMBOLS + RDMADL_TEST_CM_SYMBOLS
};

#endif /* RDMADL_TEST_SYMBOL_COUNTS_H */

/* SPDX-License-Identifier: MIT */
/* How many symbols each library has in loader/symbols.def, counted from the
 * table itself (at compile time in C++), so no test writes the numbers out.
 * C and C++; needs loader/ on the include path. */
#ifndef RDMADL_TEST_SYMBOL_COUNTS_H
#define RDMADL_TEST_SYMBOL_COUNTS_H

#include <stddef.h>

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

/* Compile-time constants in C++, run-time values in C. */
#ifdef __cplusplus
#define RDMADL_TEST_CONST constexpr
#define RDMADL_TEST_CONSTEXPR constexpr
#else
#define RDMADL_TEST_CONST static const
#define RDMADL_TEST_CONSTEXPR static inline
#endif

/* Each symbol's group, in the table's order. */
RDMADL_TEST_CONST int rdmadl_test_groups[] = {
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) RDMADL_TEST_GROUP_##lib,
#include "symbols.def"
#undef RDMADL_SYM
};

/* How many symbols belong to GROUP. */
RDMADL_TEST_CONSTEXPR size_t rdmadl_test_count(int group) {
  size_t n = 0;
  for (size_t i = 0; i < sizeof rdmadl_test_groups / sizeof rdmadl_test_groups[0]; i++)
    n += rdmadl_test_groups[i] == group;
  return n;
}

#define RDMADL_TEST_IBV_SYMBOLS rdmadl_test_count(0)
#define RDMADL_TEST_CM_SYMBOLS rdmadl_test_count(1)
#define RDMADL_TEST_PROVIDER_SYMBOLS rdmadl_test_count(2)
#define RDMADL_TEST_UMAD_SYMBOLS rdmadl_test_count(3)
#define RDMADL_TEST_ALL_SYMBOLS (sizeof rdmadl_test_groups / sizeof rdmadl_test_groups[0])

#endif /* RDMADL_TEST_SYMBOL_COUNTS_H */

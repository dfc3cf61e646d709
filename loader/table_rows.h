/* SPDX-License-Identifier: MIT */
/*
 * Picking one library's rows out of symbols.def in the preprocessor, for the
 * table's consumers that define functions of one library only (the fake
 * libraries of the tests, the benchmark's fake NIC):
 *
 *   #define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) \
 *     RDMADL_ROW_OF(MLX5, lib, MY_MACRO)(fail, ret, name, params)
 *
 * expands MY_MACRO(fail, ret, name, params) for the MLX5 rows and nothing for
 * the others.
 */
#ifndef RDMADL_TABLE_ROWS_H
#define RDMADL_TABLE_ROWS_H

#define RDMADL_ROW_CAT_(a, b) a##b
#define RDMADL_ROW_CAT(a, b) RDMADL_ROW_CAT_(a, b)
#define RDMADL_ROW_SECOND(a, b, ...) b
#define RDMADL_ROW_TEST(...) RDMADL_ROW_SECOND(__VA_ARGS__, 0, 0)
#define RDMADL_ROW_SAME_IBV_IBV ~, 1
#define RDMADL_ROW_SAME_CM_CM ~, 1
#define RDMADL_ROW_SAME_MLX5_MLX5 ~, 1
#define RDMADL_ROW_SAME_EFA_EFA ~, 1
#define RDMADL_ROW_SAME_MLX4_MLX4 ~, 1
#define RDMADL_ROW_SAME_HNS_HNS ~, 1
#define RDMADL_ROW_SAME_MANA_MANA ~, 1
#define RDMADL_ROW_SAME_IONIC_IONIC ~, 1
#define RDMADL_ROW_SAME_UMAD_UMAD ~, 1
/* 1 when the tokens A and B are the same library token, else 0. */
#define RDMADL_ROW_SAME(a, b) RDMADL_ROW_TEST(RDMADL_ROW_SAME_##a##_##b)
#define RDMADL_ROW_IF_1(m) m
#define RDMADL_ROW_IF_0(m) RDMADL_ROW_DROP
#define RDMADL_ROW_DROP(...)
#define RDMADL_ROW_OF(want, lib, m) RDMADL_ROW_CAT(RDMADL_ROW_IF_, RDMADL_ROW_SAME(want, lib))(m)

#endif /* RDMADL_TABLE_ROWS_H */

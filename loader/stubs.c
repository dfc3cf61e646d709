/* SPDX-License-Identifier: MIT */
/*
 * The generated stubs (stubs.h): one per GEN entry of symbols.def (HAND and
 * EMU ones are in hand.c), librdmacm's apart in stubs_cm.c. Each forwards to
 * the function the loader bound, or fails the way its man page documents
 * failure, with errno EOPNOTSUPP.
 */
#include "stubs.h"

#define RDMADL_ROW_IBV(...) __VA_ARGS__
#define RDMADL_ROW_CM(...)
#define RDMADL_ROW_MLX5(...) __VA_ARGS__
#define RDMADL_ROW_EFA(...) __VA_ARGS__
#define RDMADL_ROW_MLX4(...) __VA_ARGS__
#define RDMADL_ROW_HNS(...) __VA_ARGS__
#define RDMADL_ROW_MANA(...) __VA_ARGS__
#define RDMADL_ROW_IONIC(...) __VA_ARGS__
#define RDMADL_ROW_UMAD(...) __VA_ARGS__
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  RDMADL_ROW_##lib(RDMADL_IMPL_##impl(fail, ret, name, params, args))
#include "symbols.def"
#undef RDMADL_SYM

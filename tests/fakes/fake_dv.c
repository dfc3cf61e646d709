/* SPDX-License-Identifier: MIT */
/*
 * A fake provider direct-verbs library (libmlx5.so.1) or libibumad.so.3 for
 * testing the loader's lazy loading at the dlopen boundary: every row of
 * symbols.def of library FAKE_DV_LIB (a table token: MLX5, UMAD) is defined,
 * answering 0 (NULL, false; "fake" for a string); which are exported, at
 * which node, is the version script's choice (tests/fakes/CMakeLists.txt).
 * With FAKE_DV_PRIVATE it also needs libibverbs's IBVERBS_PRIVATE_* node of
 * the stub it was linked with, as a real provider library does.
 */
#include <stdbool.h>

#include "fake_bodies.h"
#include "rdma_api.h"
#include "table_rows.h"

#undef mlx5dv_create_flow

#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  RDMADL_ROW_OF(FAKE_DV_LIB, lib, FAKE_GEN)(fail, ret, name, params)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "symbols.def"
#pragma GCC diagnostic pop
#undef RDMADL_SYM

#ifdef FAKE_DV_PRIVATE
void verbs_private_anchor(void);
/* The reference that makes the link record libibverbs's private node. */
FAKE_API void fake_dv_private(void) {
  verbs_private_anchor();
}
#endif

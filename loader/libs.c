/* SPDX-License-Identifier: MIT */
/*
 * The tables derived from symbols.def (each symbol's name, version node,
 * hash and failure convention, all without a relocation) and the library
 * table: one row per rdma-core library the loader knows, with what its load
 * found. The other loader files read and fill them.
 */
#include <stddef.h>
#include <string.h>

#include "libs.h"
#include "rdmadl_hashes.h"

/* All names in one object, each at a constant offset: no pointer, no
 * relocation. Each symbol's name is followed by its version node's. */
static const struct {
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  char n_##name[sizeof #name];                                                                     \
  char v_##name[sizeof RDMADL_PREFIX_##lib #minor];
#include "symbols.def"
#undef RDMADL_SYM
} sym_names = {
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
#name, RDMADL_PREFIX_##lib #minor,
#include "symbols.def"
#undef RDMADL_SYM
};

const struct rdmadl_sym_meta rdmadl_sym_meta[RDMADL_NSYMS] = {
#define RDMADL_EMU_GEN 0
#define RDMADL_EMU_HAND 0
#define RDMADL_EMU_EMU 1
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  {RDMADL_GNU_HASH_##name, offsetof(__typeof__(sym_names), n_##name),                              \
   RDMADL_SLOT(minor),     RDMADL_LIBID_##lib,                                                     \
   RDMADL_FAIL_##fail,     RDMADL_EMU_##impl,                                                      \
   sizeof #name - 1},
#include "symbols.def"
#undef RDMADL_SYM
};

const char *rdmadl_sym_name(size_t idx) {
  return (const char *)&sym_names + rdmadl_sym_meta[idx].name;
}

const char *rdmadl_sym_node(size_t idx) {
  return rdmadl_sym_name(idx) + rdmadl_sym_meta[idx].len + 1;
}

/* Each library's rows, counted, and where they start: the table keeps a
 * library's rows together, in rdmadl_lib order (checked below). */
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) +(RDMADL_LIBID_##lib == COUNTED)
enum {
#define COUNTED RDMADL_LIBID_IBV
  NSYMS_IBV = 0
#include "symbols.def"
  ,
#undef COUNTED
#define COUNTED RDMADL_LIBID_CM
  NSYMS_CM = 0
#include "symbols.def"
  ,
#undef COUNTED
#define COUNTED RDMADL_LIBID_MLX5
  NSYMS_MLX5 = 0
#include "symbols.def"
  ,
#undef COUNTED
#define COUNTED RDMADL_LIBID_EFA
  NSYMS_EFA = 0
#include "symbols.def"
  ,
#undef COUNTED
#define COUNTED RDMADL_LIBID_MLX4
  NSYMS_MLX4 = 0
#include "symbols.def"
  ,
#undef COUNTED
#define COUNTED RDMADL_LIBID_HNS
  NSYMS_HNS = 0
#include "symbols.def"
  ,
#undef COUNTED
#define COUNTED RDMADL_LIBID_MANA
  NSYMS_MANA = 0
#include "symbols.def"
  ,
#undef COUNTED
#define COUNTED RDMADL_LIBID_IONIC
  NSYMS_IONIC = 0
#include "symbols.def"
  ,
#undef COUNTED
#define COUNTED RDMADL_LIBID_UMAD
  NSYMS_UMAD = 0
#include "symbols.def"
#undef COUNTED
};
#undef RDMADL_SYM
enum {
  FIRST_IBV = 0,
  FIRST_CM = FIRST_IBV + NSYMS_IBV,
  FIRST_MLX5 = FIRST_CM + NSYMS_CM,
  FIRST_EFA = FIRST_MLX5 + NSYMS_MLX5,
  FIRST_MLX4 = FIRST_EFA + NSYMS_EFA,
  FIRST_HNS = FIRST_MLX4 + NSYMS_MLX4,
  FIRST_MANA = FIRST_HNS + NSYMS_HNS,
  FIRST_IONIC = FIRST_MANA + NSYMS_MANA,
  FIRST_UMAD = FIRST_IONIC + NSYMS_IONIC
};
_Static_assert(FIRST_UMAD + NSYMS_UMAD == RDMADL_NSYMS, "a row of an unknown library");
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  _Static_assert((int)(minor) <= RDMADL_MAX_MINOR, "version node too high: " #name);               \
  _Static_assert(sizeof #name - 1 <= 255, "name too long for rdmadl_sym_meta.len: " #name);        \
  _Static_assert((int)RDMADL_IDX_##name >= (int)FIRST_##lib &&                                     \
                     (int)RDMADL_IDX_##name < (int)FIRST_##lib + (int)NSYMS_##lib,                 \
                 "symbols.def: the rows of " #lib                                                  \
                 " are not together, in rdmadl_lib order: " #name);
#include "symbols.def"
#undef RDMADL_SYM

void *rdmadl_fn[RDMADL_NSYMS];

#define LIB(id, name, var, pfx, k)                                                                 \
  [RDMADL_LIBID_##id] = {.soname = name,                                                           \
                         .env = "RDMADL_" var "_PATH",                                             \
                         .prefix = pfx,                                                            \
                         .first = FIRST_##id,                                                      \
                         .nsyms = NSYMS_##id,                                                      \
                         .kind = k,                                                                \
                         .state = RDMADL_STATE_NOT_FOUND,                                          \
                         .nmissing = NSYMS_##id},
/* Each name fits its array with its terminator (an exact fit would drop it). */
#define FITS(id, name, var, pfx, k)                                                                \
  _Static_assert(sizeof name <= sizeof rdmadl_libs[0].soname &&                                    \
                     sizeof "RDMADL_" var "_PATH" <= sizeof rdmadl_libs[0].env &&                  \
                     sizeof pfx <= sizeof rdmadl_libs[0].prefix,                                   \
                 "a name too long for struct lib_info: " name);
#define LIBS(X)                                                                                    \
  X(IBV, "libibverbs.so.1", "IBVERBS", RDMADL_PREFIX_IBV, KIND_EAGER)                              \
  X(CM, "librdmacm.so.1", "RDMACM", RDMADL_PREFIX_CM, KIND_WHEN_USED)                              \
  X(MLX5, "libmlx5.so.1", "MLX5", RDMADL_PREFIX_MLX5, KIND_PROVIDER)                               \
  X(EFA, "libefa.so.1", "EFA", RDMADL_PREFIX_EFA, KIND_PROVIDER)                                   \
  X(MLX4, "libmlx4.so.1", "MLX4", RDMADL_PREFIX_MLX4, KIND_PROVIDER)                               \
  X(HNS, "libhns.so.1", "HNS", RDMADL_PREFIX_HNS, KIND_PROVIDER)                                   \
  X(MANA, "libmana.so.1", "MANA", RDMADL_PREFIX_MANA, KIND_PROVIDER)                               \
  X(IONIC, "libionic.so.1", "IONIC", RDMADL_PREFIX_IONIC, KIND_PROVIDER)                           \
  X(UMAD, "libibumad.so.3", "IBUMAD", RDMADL_PREFIX_UMAD, KIND_ALONE)
LIBS(FITS)
struct lib_info rdmadl_libs[RDMADL_LIB_COUNT] = {LIBS(LIB)};
#undef LIB
#undef FITS
#undef LIBS

/* SPDX-License-Identifier: MIT */
/*
 * Internal to the loader: the dispatch table derived from symbols.def.
 * Nothing here is exported from any rdmadl library.
 */
#ifndef RDMADL_LOADER_INTERNAL_H
#define RDMADL_LOADER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define RDMADL_HIDDEN __attribute__((visibility("hidden")))

enum rdmadl_sym_index {
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) RDMADL_IDX_##name,
#include "symbols.def"
#undef RDMADL_SYM
  RDMADL_NSYMS
};

enum rdmadl_fail {
  RDMADL_FAIL_NULLPTR,
  RDMADL_FAIL_M1,
  RDMADL_FAIL_ERRNO,
  RDMADL_FAIL_NEGERRNO,
  RDMADL_FAIL_ZERO,
  RDMADL_FAIL_VOID,
  RDMADL_FAIL_STR
};

/* Per symbol, without a single pointer (no relocation at start-up). */
struct rdmadl_sym_meta {
  uint32_t hash;       /* ELF GNU hash of the name (gen/rdmadl_hashes.h) */
  unsigned short name; /* offset in the name table: rdmadl_sym_name() */
  unsigned char lib;   /* rdmadl_lib */
  unsigned char minor; /* version node IBVERBS_1.<minor> / RDMACM_1.<minor> */
  unsigned char fail;  /* enum rdmadl_fail */
  unsigned char emu;   /* impl EMU: hand.c falls back when the library lacks it */
};

RDMADL_HIDDEN extern const struct rdmadl_sym_meta rdmadl_sym_meta[RDMADL_NSYMS];
/* The name and the version node of symbol IDX. */
RDMADL_HIDDEN const char *rdmadl_sym_name(size_t idx);
RDMADL_HIDDEN const char *rdmadl_sym_node(size_t idx);

/* Resolved function per symbol, NULL until loaded or when missing. Written
 * once by the loader with release ordering. */
RDMADL_HIDDEN extern void *rdmadl_fn[RDMADL_NSYMS];

/* Loads if needed; returns the resolved function or NULL (missing, stack
 * absent). Preserves errno. */
RDMADL_HIDDEN void *rdmadl_resolve_slow(enum rdmadl_sym_index idx);

static inline void *rdmadl_load_fn(enum rdmadl_sym_index idx) {
  void *f = __atomic_load_n(&rdmadl_fn[idx], __ATOMIC_ACQUIRE);
  if (__builtin_expect(f == NULL, 0))
    f = rdmadl_resolve_slow(idx);
  return f;
}

/* Names of the stubs: the real ones in the drop-in libraries, rdmadl_sym_*
 * (hidden) in the internal loader that the C++ API uses. */
#ifdef RDMADL_DROPIN
#define RDMADL_NAME(name) name
#define RDMADL_STUB_API __attribute__((visibility("default")))
#else
#define RDMADL_NAME(name) rdmadl_sym_##name
#define RDMADL_STUB_API RDMADL_HIDDEN
#endif

#endif /* RDMADL_LOADER_INTERNAL_H */

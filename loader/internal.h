/* SPDX-License-Identifier: MIT */
/*
 * Internal to the loader: the dispatch table derived from symbols.def.
 * Nothing here is exported from any rdmadl library.
 */
#ifndef RDMADL_LOADER_INTERNAL_H
#define RDMADL_LOADER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rdmadl/loader.h"
#include "refusal.h"

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

/* The table's library tokens, their rdmadl_lib values and version-node
 * prefixes. The table lists each library's rows together, in this order. */
#define RDMADL_LIBID_IBV RDMADL_LIB_IBVERBS
#define RDMADL_LIBID_CM RDMADL_LIB_RDMACM
#define RDMADL_LIBID_MLX5 RDMADL_LIB_MLX5
#define RDMADL_LIBID_EFA RDMADL_LIB_EFA
#define RDMADL_LIBID_MLX4 RDMADL_LIB_MLX4
#define RDMADL_LIBID_HNS RDMADL_LIB_HNS
#define RDMADL_LIBID_MANA RDMADL_LIB_MANA
#define RDMADL_LIBID_IONIC RDMADL_LIB_IONIC
#define RDMADL_LIBID_UMAD RDMADL_LIB_IBUMAD
#define RDMADL_PREFIX_IBV "IBVERBS_1."
#define RDMADL_PREFIX_CM "RDMACM_1."
#define RDMADL_PREFIX_MLX5 "MLX5_1."
#define RDMADL_PREFIX_EFA "EFA_1."
#define RDMADL_PREFIX_MLX4 "MLX4_1."
#define RDMADL_PREFIX_HNS "HNS_1."
#define RDMADL_PREFIX_MANA "MANA_1."
#define RDMADL_PREFIX_IONIC "IONIC_1."
#define RDMADL_PREFIX_UMAD "IBUMAD_1."

/* A version node's slot: PREFIX<minor> is minor * 10, PREFIX<minor>.<sub>
 * (MLX5_1.25.1) minor * 10 + sub. The table writes the node as a number
 * (1, 27, 25.1), so this is an arithmetic constant expression. */
enum { RDMADL_MAX_MINOR = 31, RDMADL_NSLOTS = (RDMADL_MAX_MINOR + 1) * 10 };
#define RDMADL_SLOT(minor) ((unsigned short)((minor)*10 + 0.5))

/* Per symbol, without a single pointer (no relocation at start-up). */
struct rdmadl_sym_meta {
  uint32_t hash;       /* ELF GNU hash of the name (gen/rdmadl_hashes.h) */
  unsigned short name; /* offset in the name table: rdmadl_sym_name(); the
                          node's name follows the symbol's */
  unsigned short slot; /* RDMADL_SLOT of its version node */
  unsigned char lib;   /* rdmadl_lib */
  unsigned char fail;  /* enum rdmadl_fail */
  unsigned char emu;   /* impl EMU: hand*.c falls back when the library lacks it */
  unsigned char len;   /* strlen of the name: the binding compares it a word at a
                          time (elf.c) */
};

RDMADL_HIDDEN extern const struct rdmadl_sym_meta rdmadl_sym_meta[RDMADL_NSYMS];
/* The name and the version node ("MLX5_1.25.1") of symbol IDX. */
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

/* The stub's function bound in the table, loading if needed: what the hand
 * written stubs and fallbacks call, never an exported (interposable) name. */
#define RDMADL_FN(name) ((__typeof__(&name))rdmadl_load_fn(RDMADL_IDX_##name))

/*
 * RDMADL_LINKED(name): in librdmadl-verbs.a (RDMADL_BIND_LINKED), the object
 * holding NAME's stub records NAME's row in the section rdmadl_linked, so that
 * the constructor binds the rows of the stubs the program links and no other
 * (loader/bind.c). The array the linker makes of the section is read through
 * __start_/__stop_ symbols; "retain" keeps an entry through --gc-sections, as
 * nothing else refers to it. Elsewhere it is nothing, and every row is bound.
 */
#ifdef RDMADL_BIND_LINKED
#if defined(__has_attribute) && __has_attribute(retain)
#define RDMADL_LINKED_RETAIN __attribute__((retain))
#else
#define RDMADL_LINKED_RETAIN
#endif
#define RDMADL_LINKED(name)                                                                        \
  __attribute__((used, section("rdmadl_linked")))                                                  \
  RDMADL_LINKED_RETAIN static const unsigned short rdmadl_linked_##name = RDMADL_IDX_##name;
#else
#define RDMADL_LINKED(name)
#endif

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

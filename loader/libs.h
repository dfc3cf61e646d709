/* SPDX-License-Identifier: MIT */
/*
 * Internal to the run-time loader (libs.c, log.c, env.c, elf.c, open.c,
 * load.c, bind.c, report.c, stack.c, refusal.c): the library table and what each
 * file offers the others. Every name here is hidden; nothing is exported from any
 * rdmadl library. The stubs (stubs.c, hand*.c) need only internal.h.
 */
#ifndef RDMADL_LOADER_LIBS_H
#define RDMADL_LOADER_LIBS_H

#include <link.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

#include "internal.h"
#include "log.h"

/* ---- libs.c: the library table ---- */

/* What kind of library: loaded by the constructor (libibverbs), by the
 * constructor when the program uses it and else on first use (librdmacm),
 * or on first use; a provider library is tied to the loaded libibverbs's
 * release. */
enum { KIND_EAGER, KIND_PROVIDER, KIND_ALONE, KIND_WHEN_USED };

/* The names are arrays, not pointers: a position-independent program
 * relocates every pointer of its tables at start-up. */
struct lib_info {
  char soname[16];     /* what a real rdma-core library calls itself */
  char env[24];        /* override variable */
  char prefix[12];     /* version node prefix */
  size_t first, nsyms; /* its rows in symbols.def */
  int kind;
  rdmadl_state state;
  const char *requested;
  char *open_name;      /* what was given to dlopen */
  const char *node;     /* highest version node, in the object's string table */
  const char *error;    /* a literal, or allocated; see rdmadl_lib_why() */
  int stat_errno;       /* the override's stat() failed: error formatted on demand */
  const char *path;     /* realpath of the loaded file, computed when asked */
  struct link_map *map; /* the loaded object */
  void *handle;         /* its dlopen handle */
  size_t nmissing;
  const char *private_node; /* libibverbs: its IBVERBS_PRIVATE_* node */
  char *lazy_override;      /* lazy libraries: the override, read with the rest */
  int lazy_done;            /* atomic: the lazy load ran (or needs not run) */
  int rest;                 /* atomic: rows not bound yet; nmissing and a LOADED
                               state are so far (bind.c) */
};

RDMADL_HIDDEN extern struct lib_info rdmadl_libs[RDMADL_LIB_COUNT];

static inline int rdmadl_usable(rdmadl_state s) {
  return s == RDMADL_STATE_LOADED || s == RDMADL_STATE_PARTIAL;
}

#define RDMADL_DISABLED_SENTENCE "RDMA is disabled by RDMADL_DISABLE"

/* The loader's thread-locals (a few ints) use the initial-exec model: the
 * objects are position-independent, so the default (local-dynamic) calls
 * __tls_get_addr, which the linker leaves as an undefined symbol even where
 * it relaxes the access (an executable linking librdmadl-verbs.a): that put
 * a NEEDED on ld-linux-x86-64.so.2 and its version check into every
 * program's start-up. Initial-exec reads them at a fixed offset from the
 * thread pointer; a librdmadl-verbs.so that is dlopen()ed takes its few
 * bytes from glibc's static TLS surplus. */
#define RDMADL_TLS_IE __attribute__((tls_model("initial-exec")))

/* ---- string helpers of the start-up path ---- */

/* The start-up path calls as few libc functions as it can: each function a
 * process calls for the first time costs a symbol lookup through the PLT
 * (~700 instructions, bench/README.md), more than these loops do. */
static inline size_t rdmadl_strlen(const char *s) {
  size_t n = 0;
  while (s[n])
    n++;
  return n;
}
static inline int rdmadl_streq(const char *a, const char *b) {
  while (*a && *a == *b)
    a++, b++;
  return *a == *b;
}
/* The length of PREFIX when S starts with it, else 0. */
static inline size_t rdmadl_prefix_len(const char *s, const char *prefix) {
  size_t n = 0;
  for (; prefix[n]; n++)
    if (s[n] != prefix[n])
      return 0;
  return n;
}
/* Whether S contains NEEDLE. Inline, as the prefix test: no string function
 * of libc's to bind on the no-stack path. */
static inline int rdmadl_contains(const char *s, const char *needle) {
  for (; *s; s++)
    if (rdmadl_prefix_len(s, needle))
      return 1;
  return 0;
}
static inline int rdmadl_has_slash(const char *s) {
  for (; *s; s++)
    if (*s == '/')
      return 1;
  return 0;
}
/* The decimal number at *S (advanced past it), or -1 without a digit or
 * above LIMIT. */
static inline long rdmadl_parse_decimal(const char **s, long limit) {
  const char *p = *s;
  long v = 0;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++)
    if ((v = v * 10 + (*p - '0')) > limit)
      return -1;
  *s = p;
  return v;
}

/* ---- log.c: the log and string helpers ---- */

RDMADL_HIDDEN extern int rdmadl_log_max; /* atomic: the level lines are formatted up to */

static inline int rdmadl_log_on(int level) {
  return level <= __atomic_load_n(&rdmadl_log_max, __ATOMIC_RELAXED);
}
/* Sets the level RDMADL_DEBUG asks for (the default handler's). */
RDMADL_HIDDEN void rdmadl_log_set_env_level(int level);
/* A fork child: another thread may have held the log's lock. */
RDMADL_HIDDEN void rdmadl_log_after_fork(void);

/* Arguments are not even evaluated unless someone wants the level. */
#define LOGF(level, ...)                                                                           \
  do {                                                                                             \
    if (__builtin_expect(rdmadl_log_on(level), 0))                                                 \
      rdmadl_log_emit(level, __VA_ARGS__);                                                         \
  } while (0)
#define DEBUGF(...) LOGF(RDMADL_LOG_DEBUG, __VA_ARGS__)
#define INFOF(...) LOGF(RDMADL_LOG_INFO, __VA_ARGS__)
#define WARNF(...) LOGF(RDMADL_LOG_WARN, __VA_ARGS__)

/* Control characters (and the backslash) of S escaped as rdmadl-info prints
 * them; allocated, or NULL. */
RDMADL_HIDDEN char *rdmadl_escape_dup(const char *s);
/* An allocated printf, or NULL. */
RDMADL_HIDDEN char *rdmadl_dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
RDMADL_HIDDEN char *rdmadl_vdup_printf(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
/* Publishes S into *SLOT once; returns whichever string won. */
RDMADL_HIDDEN const char *rdmadl_publish(const char **slot, char *s);
/* NAMES[VALUE] of a table of N names of WIDTH bytes each (a two-dimensional
 * char array: no pointer to relocate at start-up) indexed by an enum;
 * "unknown" for a value outside it or a hole. RDMADL_NAME_IN passes the
 * sizes. */
static inline const char *rdmadl_name_in(const char *names, size_t width, size_t n, int value) {
  return value >= 0 && (size_t)value < n && names[(size_t)value * width]
             ? names + (size_t)value * width
             : "unknown";
}
#define RDMADL_NAME_IN(table, value)                                                               \
  rdmadl_name_in((table)[0], sizeof(table)[0], sizeof(table) / sizeof(table)[0], (int)(value))

/* ---- env.c: the environment ---- */

/* rdmadl's variables, as secure_getenv would return them. */
struct rdmadl_env {
  const char *debug, *disable, *path[RDMADL_LIB_COUNT];
};
/* The environment the constructor was called with, while it loads. */
RDMADL_HIDDEN extern char **rdmadl_ctor_envp; /* atomic */
/* Reads them in one pass, also before libc has set environ. Returns 0 when
 * the environment cannot be read at all. */
RDMADL_HIDDEN int rdmadl_env_read(struct rdmadl_env *e);
/* 1 for 1/true/yes/on, 0 for unset, empty, 0/false/no/off, -1 otherwise. */
RDMADL_HIDDEN int rdmadl_parse_bool(const char *v);
/* RDMADL_DEBUG's level; *UNDERSTOOD is 0 for a value it does not know. */
RDMADL_HIDDEN int rdmadl_parse_debug_level(const char *v, int *understood);

/* ---- elf.c: ELF tables and files ---- */

/* An object's dynamic symbol table, as dlvsym would search it, and the
 * version indices of one library's nodes. */
struct elf_view {
  ElfW(Addr) base;
  const char *strtab;
  size_t strsz; /* DT_STRSZ; 0 when the object does not say */
  const ElfW(Sym) * symtab;
  const ElfW(Half) * versym;
  /* The GNU hash table, its header read once: NULL without one. */
  const uint32_t *buckets, *chain; /* chain[i - symoffset]: symbol i */
  uint32_t nbuckets, symoffset;
  const char *soname;
  const char *highest;                  /* highest node with the prefix */
  const char *private_node;             /* an IBVERBS_PRIVATE_* node it defines */
  int rdmadl;                           /* defines rdmadl's own RDMADL_0 */
  ElfW(Half) vi_by_slot[RDMADL_NSLOTS]; /* 0: the object lacks the node */
};
RDMADL_HIDDEN void rdmadl_elf_view_init(struct elf_view *v, const struct link_map *map,
                                        const char *prefix);
/* Symbol IDX at its node as the object defines it, or NULL; *FALLBACK set
 * when dlvsym must answer instead. */
RDMADL_HIDDEN void *rdmadl_elf_lookup(const struct elf_view *v, size_t idx, int *fallback);
/* Binds rows FIRST..FIRST+N of symbols.def from the object V describes
 * (HANDLE: its dlopen handle, for what only dlvsym can answer) into
 * rdmadl_fn; returns how many it lacks. */
RDMADL_HIDDEN size_t rdmadl_elf_bind(const struct elf_view *v, void *handle, size_t first,
                                     size_t n);
/* Why the file PATH is not an ELF object for this process, or NULL. */
RDMADL_HIDDEN char *rdmadl_elf_mismatch(const char *path);
/* "a FIFO", "a directory", ... for a file that is not regular. */
RDMADL_HIDDEN const char *rdmadl_file_kind(mode_t m);
/* The IBVERBS_PRIVATE_* node PATH needs: 1 found, 0 none, -1 unreadable. */
RDMADL_HIDDEN int rdmadl_file_needs_private(const char *path, char *out, size_t outlen);
/* Whether MAP's version requirements name a node starting with PREFIX
 * (the object calls a function of that library's). */
RDMADL_HIDDEN int rdmadl_elf_needs_node(const struct link_map *map, const char *prefix);
/* Why PATH cannot be mapped whole (a truncated copy), or NULL. */
RDMADL_HIDDEN char *rdmadl_file_truncated(const char *path);

/* ---- open.c: opening one library ---- */

/* Opens library WHICH (OVERRIDE: its RDMADL_<LIB>_PATH, or NULL), binds its
 * symbols and sets its state and error. */
RDMADL_HIDDEN void rdmadl_load_one(rdmadl_lib which, const char *override);

/* ---- load.c: the one load per process, and the lazy libraries ---- */

enum { LOAD_NONE, LOAD_RUNNING, LOAD_DONE };
RDMADL_HIDDEN extern int rdmadl_load_state; /* atomic */
enum { ENSURE_DONE = 1, ENSURE_REENTERED = 0, ENSURE_FAILED = -1, ENSURE_RETRY = 2 };
/* Makes sure the load has happened. ENSURE_REENTERED: called by the loading
 * thread itself (from a constructor inside its dlopen). ENSURE_FAILED: no
 * decision (environment unreadable, or the deadlock guard gave up). WHAT
 * names the caller in the deadlock guard's message. */
RDMADL_HIDDEN int rdmadl_ensure_slow(const char *what);
static inline int rdmadl_ensure_named(const char *what) {
  if (__builtin_expect(__atomic_load_n(&rdmadl_load_state, __ATOMIC_ACQUIRE) == LOAD_DONE, 1))
    return ENSURE_DONE;
  return rdmadl_ensure_slow(what);
}
static inline int rdmadl_ensure(void) {
  return rdmadl_ensure_named("rdmadl");
}
/* dlopen with the bookkeeping the threads waiting for the load rely on. */
RDMADL_HIDDEN void *rdmadl_loader_dlopen(const char *name, int flags);
/* Loads a lazy library once. */
RDMADL_HIDDEN void rdmadl_load_lazy(struct lib_info *lib);
/* A lazy library whose load has not run: its fields other than requested
 * are not to be read. */
RDMADL_HIDDEN int rdmadl_lazy_pending(const struct lib_info *l);
/* What rdmadl_lib_error() says of a library whose load has not run. */
#define RDMADL_NOT_LOADED_ERROR                                                                    \
  "not loaded yet: loaded on the first call of one of its functions (or rdmadl_lib_load)"
#define RDMADL_CM_UNUSED_ERROR "not loaded: no rdma_* function in this program"

/* ---- bind.c: which rows a load binds ---- */

/* Binds library L's rows from the object V describes (HANDLE: its dlopen
 * handle) and sets L->nmissing: in librdmadl-verbs.a's constructor only the
 * rows of the stubs the program links (then L->rest is set), else all. */
RDMADL_HIDDEN void rdmadl_bind_lib(struct lib_info *l, const struct elf_view *v, void *handle);
#ifdef RDMADL_BIND_LINKED
/* How many of L's rows the linked stubs recorded. */
RDMADL_HIDDEN size_t rdmadl_linked_rows(const struct lib_info *l);
RDMADL_HIDDEN void rdmadl_bind_rest_slow(void);
/* A fork child: another thread may have held the mutex. */
RDMADL_HIDDEN void rdmadl_bind_after_fork(void);
#endif
/* Binds the rows the load left unbound, once; a no-op before the load is
 * done. Called before anything reads the whole table or a library's state
 * or missing count. */
static inline void rdmadl_bind_rest(void) {
#ifdef RDMADL_BIND_LINKED
  if (__builtin_expect(__atomic_load_n(&rdmadl_libs[RDMADL_LIB_IBVERBS].rest, __ATOMIC_ACQUIRE) |
                           __atomic_load_n(&rdmadl_libs[RDMADL_LIB_RDMACM].rest, __ATOMIC_ACQUIRE),
                       0))
    rdmadl_bind_rest_slow();
#endif
}
/* rdmadl_ensure, then the rest bound: what the diagnostics call first. */
static inline int rdmadl_ensure_bound(void) {
  int r = rdmadl_ensure();
  if (r == ENSURE_DONE)
    rdmadl_bind_rest();
  return r;
}

/* ---- report.c: describing the libraries ---- */

/* The realpath of the loaded file, computed once; NULL when not loaded. */
RDMADL_HIDDEN const char *rdmadl_lib_file(struct lib_info *l);
/* The library's error, formatted once. */
RDMADL_HIDDEN const char *rdmadl_lib_why(struct lib_info *l);
/* One library in one clause; unescaped, allocated. */
RDMADL_HIDDEN char *rdmadl_describe_lib(struct lib_info *l);
/* One INFO line for a library just loaded (or not). */
RDMADL_HIDDEN void rdmadl_log_lib_summary(struct lib_info *l);
/* The reason sentence, built when first asked for; a load clears it. */
RDMADL_HIDDEN extern const char *rdmadl_reason_text;
/* The same while librdmacm waits for its first use (kept apart: that one
 * never describes the library once loaded). */
RDMADL_HIDDEN extern const char *rdmadl_reason_text_cm_unused;

/* ---- stack.c: the stack's state and the verdict ---- */

/* The verdict, unescaped: one sentence and what the stack is. */
RDMADL_HIDDEN char *rdmadl_build_verdict(rdmadl_stack *stack_out, int *usable_out);
/* A fork child: another thread may have held the verdicts' lock. */
RDMADL_HIDDEN void rdmadl_verdict_after_fork(void);

#endif /* RDMADL_LOADER_LIBS_H */

/* SPDX-License-Identifier: MIT */
/*
 * The run-time loader: dlopens libibverbs.so.1 and librdmacm.so.1 once, binds
 * every symbol of symbols.def at its version node, and records what it found
 * for include/rdmadl/loader.h.
 *
 * Loading happens in a constructor and on the first call of any stub, so
 * nothing depends on constructor order. The libraries are never dlclosed.
 * The providers' direct-verbs libraries and libibumad ("lazy" libraries) are
 * loaded only on the first call of one of their functions, under one mutex,
 * so a program that never uses them pays nothing at start-up.
 *
 * Cost (bench/loader/): dlopen uses RTLD_LAZY, like a direct link: rdma-core's
 * own libraries are linked -z now and are still bound completely, and a
 * missing dependency still fails the dlopen; only the lazy PLT slots of their
 * dependencies (libnl) bind on first use, as they do in a direct-linked
 * program. Symbols are looked up in the loaded object's own GNU hash table
 * and version table (what dlvsym does for a symbol the object defines), so an
 * absent symbol costs no dlerror formatting, and a symbol an object only
 * re-exports from a dependency (rdmadl itself, say) is never bound. Paths are
 * canonicalised and the reason sentence is built only when asked for.
 *
 * One load per process, tracked by load_state. A stub called back while this
 * thread is inside dlopen (a library's constructor calling an exported ibv_*
 * name that binds to a drop-in stub) resolves that one symbol from the object
 * being loaded. Another thread waits; if it has waited DEADLOCK_SECONDS while
 * the loader is still inside dlopen (a constructor that joins a thread which
 * calls verbs), its call fails instead of hanging. A fork() child whose
 * loading thread is gone loads again from scratch.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "internal.h"
#include "rdmadl/loader.h"
#include "rdmadl_hashes.h"

#undef ibv_get_device_list

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
   RDMADL_FAIL_##fail,     RDMADL_EMU_##impl},
#include "symbols.def"
#undef RDMADL_SYM
};

const char *rdmadl_sym_name(size_t idx) {
  return (const char *)&sym_names + rdmadl_sym_meta[idx].name;
}

const char *rdmadl_sym_node(size_t idx) {
  const char *name = rdmadl_sym_name(idx);
  return name + strlen(name) + 1;
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
  _Static_assert((int)RDMADL_IDX_##name >= (int)FIRST_##lib &&                                     \
                     (int)RDMADL_IDX_##name < (int)FIRST_##lib + (int)NSYMS_##lib,                 \
                 "symbols.def: the rows of " #lib                                                  \
                 " are not together, in rdmadl_lib order: " #name);
#include "symbols.def"
#undef RDMADL_SYM

void *rdmadl_fn[RDMADL_NSYMS];

/* What kind of library: loaded by the constructor, or on first use; a
 * provider library is tied to the loaded libibverbs's release. */
enum { KIND_EAGER, KIND_PROVIDER, KIND_ALONE };

struct lib_info {
  const char *soname;  /* what a real rdma-core library calls itself */
  const char *env;     /* override variable */
  const char *prefix;  /* version node prefix */
  size_t first, nsyms; /* its rows in symbols.def */
  int kind;
  rdmadl_state state;
  const char *requested;
  char *open_name;      /* what was given to dlopen */
  const char *node;     /* highest version node, in the object's string table */
  const char *error;    /* a literal, or allocated; see lib_error() */
  int stat_errno;       /* the override's stat() failed: error formatted on demand */
  const char *path;     /* realpath of the loaded file, computed when asked */
  struct link_map *map; /* the loaded object */
  void *handle;         /* its dlopen handle */
  size_t nmissing;
  const char *private_node; /* libibverbs: its IBVERBS_PRIVATE_* node */
  char *lazy_override;      /* lazy libraries: the override, read with the rest */
  int lazy_done;            /* atomic: the lazy load ran (or needs not run) */
};

#define LIB(id, name, var, pfx, k)                                                                 \
  [RDMADL_LIBID_##id] = {.soname = name,                                                           \
                         .env = "RDMADL_" var "_PATH",                                             \
                         .prefix = pfx,                                                            \
                         .first = FIRST_##id,                                                      \
                         .nsyms = NSYMS_##id,                                                      \
                         .kind = k,                                                                \
                         .state = RDMADL_STATE_NOT_FOUND,                                          \
                         .nmissing = NSYMS_##id}
static struct lib_info libs[RDMADL_LIB_COUNT] = {
    LIB(IBV, "libibverbs.so.1", "IBVERBS", RDMADL_PREFIX_IBV, KIND_EAGER),
    LIB(CM, "librdmacm.so.1", "RDMACM", RDMADL_PREFIX_CM, KIND_EAGER),
    LIB(MLX5, "libmlx5.so.1", "MLX5", RDMADL_PREFIX_MLX5, KIND_PROVIDER),
    LIB(EFA, "libefa.so.1", "EFA", RDMADL_PREFIX_EFA, KIND_PROVIDER),
    LIB(MLX4, "libmlx4.so.1", "MLX4", RDMADL_PREFIX_MLX4, KIND_PROVIDER),
    LIB(HNS, "libhns.so.1", "HNS", RDMADL_PREFIX_HNS, KIND_PROVIDER),
    LIB(MANA, "libmana.so.1", "MANA", RDMADL_PREFIX_MANA, KIND_PROVIDER),
    LIB(IONIC, "libionic.so.1", "IONIC", RDMADL_PREFIX_IONIC, KIND_PROVIDER),
    LIB(UMAD, "libibumad.so.3", "IBUMAD", RDMADL_PREFIX_UMAD, KIND_ALONE),
};
#undef LIB

static const char *reason; /* built when first asked for */
/* Every distinct verdict sentence given out, so that each stays valid. */
static pthread_mutex_t verdict_mu = PTHREAD_MUTEX_INITIALIZER;
struct interned {
  struct interned *next;
  char text[];
};
static struct interned *verdicts;
static char *build_verdict(rdmadl_stack *stack_out, int *usable_out);

/* ---- diagnostics -------------------------------------------------------- */

/* Control characters (and the backslash) of S as rdmadl-info prints them:
 * \\, \n, \t, \xNN. A path or a dlerror() text can then never start a line
 * of its own in a log or a sentence. Returns an allocated copy, or NULL. */
static char *escape_dup(const char *s) {
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    n += *p == '\\' || *p == '\n' || *p == '\t' ? 2 : (*p < 0x20 || *p == 0x7f) ? 4 : 1;
  char *out = malloc(n + 1), *o = out;
  if (!out)
    return NULL;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '\\' || *p == '\n' || *p == '\t') {
      *o++ = '\\';
      *o++ = *p == '\n' ? 'n' : *p == '\t' ? 't' : '\\';
    } else if (*p < 0x20 || *p == 0x7f) {
      static const char hex[] = "0123456789abcdef";
      *o++ = '\\';
      *o++ = 'x';
      *o++ = hex[*p >> 4];
      *o++ = hex[*p & 15];
    } else {
      *o++ = (char)*p;
    }
  }
  *o = '\0';
  return out;
}

/* The log: one handler (with its context and level) or the default, which
 * writes "rdmadl: LINE" to stderr up to the level RDMADL_DEBUG asks for.
 * log_lock is held for reading around each delivery and for writing while
 * the handler changes, so a handler replaced by rdmadl_set_log_handler() is
 * not running anymore, and never runs again, once that call returns. */
static pthread_rwlock_t log_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct {
  rdmadl_log_fn fn;
  void *ctx;
  int max_level;
} log_sink;
static int env_log_level = RDMADL_LOG_ERROR; /* atomic: from RDMADL_DEBUG */
static int log_max = RDMADL_LOG_ERROR;       /* atomic: the level lines are formatted up to */
static __thread int in_log_handler;

static inline int log_on(int level) {
  return level <= __atomic_load_n(&log_max, __ATOMIC_RELAXED);
}

static void log_update_max(void) {
  __atomic_store_n(&log_max,
                   log_sink.fn ? log_sink.max_level
                               : __atomic_load_n(&env_log_level, __ATOMIC_RELAXED),
                   __ATOMIC_RELAXED);
}

static void log_emit(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3), cold));
static void log_emit(int level, const char *fmt, ...) {
  if (in_log_handler)
    return; /* a handler that calls rdmadl: its own lines are dropped */
  int saved = errno;
  char *raw = NULL;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&raw, fmt, ap) < 0)
    raw = NULL;
  va_end(ap);
  char *line = raw ? escape_dup(raw) : NULL;
  free(raw);
  const char *text = line ? line : "(out of memory formatting a log line)";
  pthread_rwlock_rdlock(&log_lock);
  if (log_sink.fn) {
    if (level <= log_sink.max_level) {
      in_log_handler = 1;
      log_sink.fn(level, text, log_sink.ctx);
      in_log_handler = 0;
    }
  } else if (level <= __atomic_load_n(&env_log_level, __ATOMIC_RELAXED)) {
    fprintf(stderr, "rdmadl: %s\n", text);
  }
  pthread_rwlock_unlock(&log_lock);
  free(line);
  errno = saved;
}

/* Arguments are not even evaluated unless someone wants the level. */
#define LOGF(level, ...)                                                                           \
  do {                                                                                             \
    if (__builtin_expect(log_on(level), 0))                                                        \
      log_emit(level, __VA_ARGS__);                                                                \
  } while (0)
#define DEBUGF(...) LOGF(RDMADL_LOG_DEBUG, __VA_ARGS__)
#define INFOF(...) LOGF(RDMADL_LOG_INFO, __VA_ARGS__)
#define WARNF(...) LOGF(RDMADL_LOG_WARN, __VA_ARGS__)

int rdmadl_set_log_handler(int max_level, rdmadl_log_fn fn, void *ctx) {
  if (in_log_handler)
    return EDEADLK;
  pthread_rwlock_wrlock(&log_lock);
  log_sink.fn = fn;
  log_sink.ctx = fn ? ctx : NULL;
  log_sink.max_level = fn ? max_level : RDMADL_LOG_ERROR;
  log_update_max();
  pthread_rwlock_unlock(&log_lock);
  return 0;
}

static int parse_bool(const char *v);

/* RDMADL_DEBUG: unset, empty, 0/false/no/off: errors only; 1/true/yes/on or
 * "info": the summary; 2 (or more), "debug" or "symbols": every step. */
static int parse_debug_level(const char *v, int *understood) {
  *understood = 1;
  if (v && (!strcasecmp(v, "debug") || !strcasecmp(v, "symbols")))
    return RDMADL_LOG_DEBUG;
  if (v && !strcasecmp(v, "info"))
    return RDMADL_LOG_INFO;
  char *end = NULL;
  long n = v && *v >= '0' && *v <= '9' ? strtol(v, &end, 10) : -1;
  if (end && *end == '\0')
    return n >= 2 ? RDMADL_LOG_DEBUG : n == 1 ? RDMADL_LOG_INFO : RDMADL_LOG_ERROR;
  int b = parse_bool(v);
  if (b < 0) {
    *understood = 0;
    return RDMADL_LOG_INFO;
  }
  return b ? RDMADL_LOG_INFO : RDMADL_LOG_ERROR;
}

static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_printf(const char *fmt, ...) {
  char *s = NULL;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&s, fmt, ap) < 0)
    s = NULL;
  va_end(ap);
  return s;
}

/* Publishes *S into *SLOT once; returns whichever string won. */
static const char *publish(const char **slot, char *s) {
  const char *expected = NULL;
  if (!s)
    return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (__atomic_compare_exchange_n(slot, &expected, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return s;
  free(s);
  return expected;
}

/* ---- environment -------------------------------------------------------- */

extern char **environ;

/* The process environment as the kernel passed it, for a first use before
 * libc has set environ (a .preinit_array function). */
static struct {
  int state; /* 0 unread, 1 read, -1 unavailable */
  char *data;
  size_t len;
} early_env;

static void read_early_env(void) {
  early_env.state = -1;
  int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap + 1);
  for (;;) {
    if (!buf)
      break;
    if (len == cap) {
      char *bigger = realloc(buf, cap * 2 + 1);
      if (!bigger) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      free(buf);
      buf = NULL;
      break;
    }
    if (n == 0)
      break;
    len += (size_t)n;
  }
  close(fd);
  if (!buf)
    return;
  buf[len] = '\0';
  early_env.data = buf;
  early_env.len = len;
  early_env.state = 1;
}

/* rdmadl's variables, as secure_getenv would return them. */
struct rdmadl_env {
  const char *debug, *disable, *path[RDMADL_LIB_COUNT];
};

static void env_match(struct rdmadl_env *e, const char *var) {
  if (strncmp(var, "RDMADL_", 7) != 0)
    return;
  var += 7;
  static const char *const names[] = {"DEBUG=", "DISABLE="};
  const char **slots[] = {&e->debug, &e->disable};
  for (size_t i = 0; i < 2; i++) {
    size_t n = strlen(names[i]);
    if (strncmp(var, names[i], n) == 0 && !*slots[i])
      *slots[i] = var + n;
  }
  /* RDMADL_<LIB>_PATH= */
  for (size_t i = 0; i < RDMADL_LIB_COUNT; i++) {
    size_t n = strlen(libs[i].env) - 7;
    if (strncmp(var, libs[i].env + 7, n) == 0 && var[n] == '=' && !e->path[i])
      e->path[i] = var + n + 1;
  }
}

/* Reads rdmadl's variables in one pass, also before libc has set environ.
 * Returns 0 when the environment cannot be read at all. */
static int env_read(struct rdmadl_env *e) {
  memset(e, 0, sizeof *e);
  if (getauxval(AT_SECURE))
    return 1;
  if (environ) {
    for (char **v = environ; *v; v++)
      if ((*v)[0] == 'R')
        env_match(e, *v);
    return 1;
  }
  if (early_env.state == 0)
    read_early_env();
  if (early_env.state < 0)
    return 0;
  for (size_t i = 0; i < early_env.len; i += strlen(early_env.data + i) + 1)
    env_match(e, early_env.data + i);
  return 1;
}

/* 1 for 1/true/yes/on (any case, or a non-zero number), 0 for unset, empty,
 * 0/false/no/off or zero, -1 for anything else. */
static int parse_bool(const char *v) {
  static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
  if (!v || !*v)
    return 0;
  for (size_t i = 0; i < 3; i++) {
    if (!strcasecmp(v, yes[i]))
      return 1;
    if (!strcasecmp(v, no[i]))
      return 0;
  }
  const char *p = v;
  int nonzero = 0;
  for (; *p >= '0' && *p <= '9'; p++)
    nonzero |= *p != '0';
  return *p == '\0' ? nonzero : -1;
}

/* ---- ELF ---------------------------------------------------------------- */

/* An object's dynamic symbol table, as dlvsym would search it, and the
 * version indices of one library's nodes. */
struct elf_view {
  ElfW(Addr) base;
  const char *strtab;
  const ElfW(Sym) * symtab;
  const ElfW(Half) * versym;
  const uint32_t *gnu_hash;
  const char *soname;
  const char *highest;                  /* highest node with the prefix */
  const char *private_node;             /* an IBVERBS_PRIVATE_* node it defines */
  int rdmadl;                           /* defines rdmadl's own RDMADL_0 */
  ElfW(Half) vi_by_slot[RDMADL_NSLOTS]; /* 0: the object lacks the node */
};

/* glibc relocates some d_ptr entries in place and not others. */
static const void *dyn_ptr(const struct link_map *map, ElfW(Addr) p) {
  return (const void *)(p < map->l_addr ? p + map->l_addr : p);
}

static void elf_view_init(struct elf_view *v, const struct link_map *map, const char *prefix) {
  memset(v, 0, sizeof *v);
  v->base = map->l_addr;
  const ElfW(Verdef) *verdef = NULL;
  ElfW(Word) verdefnum = 0;
  ElfW(Addr) soname_off = 0;
  int have_soname = 0;
  for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
    case DT_STRTAB:
      v->strtab = dyn_ptr(map, d->d_un.d_ptr);
      break;
    case DT_SYMTAB:
      v->symtab = dyn_ptr(map, d->d_un.d_ptr);
      break;
    case DT_VERSYM:
      v->versym = dyn_ptr(map, d->d_un.d_ptr);
      break;
    case DT_GNU_HASH:
      v->gnu_hash = dyn_ptr(map, d->d_un.d_ptr);
      break;
    case DT_VERDEF:
      verdef = dyn_ptr(map, d->d_un.d_ptr);
      break;
    case DT_VERDEFNUM:
      verdefnum = d->d_un.d_val;
      break;
    case DT_SONAME:
      soname_off = d->d_un.d_val;
      have_soname = 1;
      break;
    }
  }
  if (!v->strtab)
    return;
  if (have_soname)
    v->soname = v->strtab + soname_off;
  size_t n = strlen(prefix);
  long best = -1;
  for (ElfW(Word) i = 0; verdef && i < verdefnum; i++) {
    const ElfW(Verdaux) *aux = (const ElfW(Verdaux) *)((const char *)verdef + verdef->vd_aux);
    const char *name = v->strtab + aux->vda_name;
    char *end;
    if (verdef->vd_flags & VER_FLG_BASE) {
      /* the file's own name, not a node */
    } else if (strncmp(name, prefix, n) == 0) {
      /* PREFIX<minor> or PREFIX<minor>.<sub> (MLX5_1.25.1) */
      long minor = strtol(name + n, &end, 10), sub = 0;
      if (*end == '.' && end[1] >= '0' && end[1] <= '9')
        sub = strtol(end + 1, &end, 10);
      if (*end == '\0' && end != name + n && minor >= 0 && sub >= 0 && sub <= 9) {
        long slot = minor * 10 + sub;
        if (minor <= RDMADL_MAX_MINOR)
          v->vi_by_slot[slot] = verdef->vd_ndx;
        if (slot > best) {
          best = slot;
          v->highest = name;
        }
      }
    } else if (strncmp(name, "IBVERBS_PRIVATE_", 16) == 0) {
      v->private_node = name;
    } else if (strcmp(name, "RDMADL_0") == 0) {
      v->rdmadl = 1;
    }
    if (!verdef->vd_next)
      break;
    verdef = (const ElfW(Verdef) *)((const char *)verdef + verdef->vd_next);
  }
}

/* Symbol IDX at its node as the object itself defines it (hidden, i.e.
 * non-default, versions included, as dlvsym finds them), or NULL. *FALLBACK
 * is set when the object's tables cannot answer (no GNU hash, an IFUNC) and
 * dlvsym must. */
static void *elf_lookup(const struct elf_view *v, size_t idx, int *fallback) {
  const struct rdmadl_sym_meta *m = &rdmadl_sym_meta[idx];
  const uint32_t *h = v->gnu_hash;
  ElfW(Half) want = v->vi_by_slot[m->slot];
  if (v->versym && !want)
    return NULL; /* the object does not define that node */
  if (!h || !v->symtab) {
    *fallback = 1;
    return NULL;
  }
  uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2], bloom_shift = h[3];
  const ElfW(Addr) *bloom = (const ElfW(Addr) *)(h + 4);
  const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
  const uint32_t *chain = buckets + nbuckets;
  if (!nbuckets || !bloom_size)
    return NULL;
  const uint32_t hash = m->hash;
  const unsigned bits = sizeof(ElfW(Addr)) * 8;
  ElfW(Addr) word = bloom[(hash / bits) % bloom_size];
  ElfW(Addr) mask =
      ((ElfW(Addr))1 << (hash % bits)) | ((ElfW(Addr))1 << ((hash >> bloom_shift) % bits));
  if ((word & mask) != mask)
    return NULL;
  uint32_t i = buckets[hash % nbuckets];
  if (i < symoffset)
    return NULL;
  const char *name = rdmadl_sym_name(idx);
  for (;; i++) {
    uint32_t h2 = chain[i - symoffset];
    const ElfW(Sym) *s = &v->symtab[i];
    /* Unversioned objects: dlvsym accepts the plain symbol. */
    if ((h2 | 1) == (hash | 1) && s->st_shndx != SHN_UNDEF &&
        (!v->versym || (v->versym[i] & 0x7fff) == want) &&
        strcmp(v->strtab + s->st_name, name) == 0) {
      if (ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC) {
        *fallback = 1;
        return NULL;
      }
      return (void *)(v->base + s->st_value);
    }
    if (h2 & 1)
      return NULL;
  }
}

/* What the first bytes of an ELF file say it was built for, when that is not
 * this process; NULL when it matches or is not an ELF file. */
static const char *machine_name(unsigned m) {
  switch (m) {
  case EM_386:
    return "i386";
  case EM_X86_64:
    return "x86-64";
  case EM_AARCH64:
    return "AArch64";
  case EM_ARM:
    return "ARM";
  case EM_PPC:
    return "PowerPC";
  case EM_PPC64:
    return "PowerPC64";
  case EM_S390:
    return "S/390";
  case EM_RISCV:
    return "RISC-V";
  case EM_MIPS:
    return "MIPS";
  case 258:
    return "LoongArch";
  }
  return "an unknown machine";
}

static char *elf_mismatch(const char *path) {
  unsigned char e[20];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return NULL;
  ssize_t n = read(fd, e, sizeof e);
  close(fd);
  if (n < (ssize_t)sizeof e || memcmp(e, ELFMAG, SELFMAG) != 0)
    return n >= 0 && (n < SELFMAG || memcmp(e, ELFMAG, SELFMAG) != 0)
               ? dup_printf("%s is not an ELF file", path)
               : NULL;
  const unsigned our_class = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const unsigned our_data = ELFDATA2LSB;
  unsigned machine =
      e[EI_DATA] == ELFDATA2LSB ? e[18] | (unsigned)e[19] << 8 : (unsigned)e[18] << 8 | e[19];
#else
  const unsigned our_data = ELFDATA2MSB;
  unsigned machine =
      e[EI_DATA] == ELFDATA2MSB ? (unsigned)e[18] << 8 | e[19] : e[18] | (unsigned)e[19] << 8;
#endif
  Dl_info info;
  unsigned our_machine = 0;
  /* Our own ELF header: the start of the object this code is in. */
  if (dladdr((const void *)&elf_mismatch, &info) && info.dli_fbase)
    our_machine = ((const ElfW(Ehdr) *)info.dli_fbase)->e_machine;
  if (e[EI_CLASS] == our_class && e[EI_DATA] == our_data && machine == our_machine)
    return NULL;
  return dup_printf("%s is an ELF file for %s (%d-bit, %s-endian, e_machine %u); this process is "
                    "%s (%d-bit, e_machine %u)",
                    path, machine_name(machine), e[EI_CLASS] == ELFCLASS64 ? 64 : 32,
                    e[EI_DATA] == ELFDATA2MSB ? "big" : "little", machine,
                    machine_name(our_machine), our_class == ELFCLASS64 ? 64 : 32, our_machine);
}

static const char *file_kind(mode_t m) {
  if (S_ISFIFO(m))
    return "a FIFO";
  if (S_ISCHR(m))
    return "a character device";
  if (S_ISBLK(m))
    return "a block device";
  if (S_ISDIR(m))
    return "a directory";
  if (S_ISSOCK(m))
    return "a socket";
  return "not a regular file";
}

static const char *lib_path(struct lib_info *l);
static const char *lib_error(struct lib_info *l);

/* ---- loading ------------------------------------------------------------ */

enum { LOAD_NONE, LOAD_RUNNING, LOAD_DONE };
enum { DEADLOCK_SECONDS = 5 };

/* Keeps the object this loader is in mapped for the rest of the process:
 * the strings the diagnostics return (and every library path, error and
 * state name) live in it, and a caller may keep them after dlclosing a
 * plugin that embeds the static drop-in. The shared drop-in is linked
 * -z nodelete for the same reason; the program itself is never unloaded. */
#ifndef RDMADL_DROPIN_SHARED
/* dl_iterate_phdr's first object is the program: 1 when ADDR is in one of
 * its loadable segments, 2 when not (either stops the walk). */
static int in_program(struct dl_phdr_info *info, size_t size, void *addr) {
  (void)size;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = (uintptr_t)(info->dlpi_addr + ph->p_vaddr);
    if (ph->p_type == PT_LOAD && (uintptr_t)addr - start < ph->p_memsz)
      return 1;
  }
  return 2;
}
#endif

static void pin_self(void) {
#ifndef RDMADL_DROPIN_SHARED /* that one is linked -z nodelete */
  /* Linked into the program (the common static case): nothing to pin, and
   * no dladdr symbol search at start-up. */
  if (dl_iterate_phdr(in_program, (void *)&pin_self) == 1)
    return;
  Dl_info info;
  struct link_map *map = NULL;
  if (!dladdr1((const void *)&pin_self, &info, (void **)&map, RTLD_DL_LINKMAP) || !map ||
      !map->l_name || !map->l_name[0])
    return;
  void *h = dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  DEBUGF("%s pinned (RTLD_NODELETE): %s", map->l_name, h ? "yes" : dlerror());
  if (h)
    dlclose(h);
#endif
}

/* The uncontended load takes no lock: LOAD_NONE -> LOAD_RUNNING by
 * compare-and-swap, LOAD_DONE published with a store. Threads that must wait
 * announce themselves in nwaiters first, then sleep on load_cv; the loader
 * broadcasts only when nwaiters says someone may be there (both sides use
 * sequentially consistent operations, so one of them always sees the other). */
static int load_state;       /* atomic */
static pthread_t loader;     /* atomic: the loading thread, while LOAD_RUNNING */
static int nwaiters;         /* atomic */
static int loader_in_dlopen; /* atomic: inside dlopen, running others' constructors */
static unsigned dlopen_gen;  /* atomic: counts the loader's dlopen calls */
static const char *loader_open_name;
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t load_cv = PTHREAD_COND_INITIALIZER;
static int atfork_registered; /* atomic */
/* Lazy libraries load one at a time, under lazy_mu. */
static pthread_mutex_t lazy_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t lazy_owner; /* atomic: the thread inside a lazy load */
static int lazy_busy;        /* atomic */

static void wake_waiters(void) {
  if (__atomic_load_n(&nwaiters, __ATOMIC_SEQ_CST) == 0)
    return;
  pthread_mutex_lock(&load_mu);
  pthread_cond_broadcast(&load_cv);
  pthread_mutex_unlock(&load_mu);
}

/* Runs dlopen with the bookkeeping the waiting threads rely on. */
static void *loader_dlopen(const char *name, int flags) {
  __atomic_store_n(&loader_open_name, name, __ATOMIC_RELEASE);
  __atomic_add_fetch(&dlopen_gen, 1, __ATOMIC_SEQ_CST);
  /* Waiters switch to the deadlock guard's timed wait. */
  __atomic_store_n(&loader_in_dlopen, 1, __ATOMIC_SEQ_CST);
  wake_waiters();
  void *h = dlopen(name, flags);
  __atomic_store_n(&loader_in_dlopen, 0, __ATOMIC_SEQ_CST);
  wake_waiters();
  return h;
}

static void bind_symbols(struct lib_info *lib, const struct elf_view *v, void *handle) {
  lib->nmissing = 0;
  for (size_t i = lib->first; i < lib->first + lib->nsyms; i++) {
    int fallback = 0;
    void *f = elf_lookup(v, i, &fallback);
    if (fallback)
      f = dlvsym(handle, rdmadl_sym_name(i), rdmadl_sym_node(i));
    if (!f) {
      lib->nmissing++;
      DEBUGF("%s@%s: missing", rdmadl_sym_name(i), rdmadl_sym_node(i));
      continue;
    }
    DEBUGF("%s@%s: %p", rdmadl_sym_name(i), rdmadl_sym_node(i), f);
    __atomic_store_n(&rdmadl_fn[i], f, __ATOMIC_RELEASE);
  }
}

/* Why dlopen failed, for the diagnostics; sets lib->state and lib->error. */
static void classify_failure(struct lib_info *lib, const char *override, const char *err) {
  if (!err)
    err = "dlopen failed";
  size_t n = strlen(lib->open_name);
  /* glibc names the object it could not open first: ours, or a dependency. */
  int ours = strncmp(err, lib->open_name, n) == 0 && err[n] == ':';
  if (!override) {
    if (ours && strstr(err, "No such file")) {
      lib->state = RDMADL_STATE_NOT_FOUND;
      lib->error = dup_printf("%s", err);
    } else {
      lib->state = RDMADL_STATE_LOAD_FAILED;
      lib->error = ours ? dup_printf("%s", err)
                        : dup_printf("%s was found but cannot be loaded: %s", lib->soname, err);
    }
    return;
  }
  lib->state = RDMADL_STATE_LOAD_FAILED;
  char *what = elf_mismatch(lib->open_name);
  if (what) {
    lib->error = dup_printf("%s=%s: %s (%s)", lib->env, override, what, err);
    free(what);
  } else if (!ours) {
    lib->error =
        dup_printf("%s=%s: a library it needs cannot be loaded: %s", lib->env, override, err);
  } else {
    lib->error = dup_printf("%s", err);
  }
}

/* The string at OFF of a string table of SIZE bytes, or NULL when it does
 * not end inside the table. */
static const char *str_at(const char *tab, size_t size, size_t off) {
  return off < size && memchr(tab + off, '\0', size - off) ? tab + off : NULL;
}

/* The IBVERBS_PRIVATE_* node the ELF file PATH needs from libibverbs.so.1,
 * copied into OUT: 1 when found, 0 when it needs none, -1 when PATH cannot
 * be read as an ELF file of this process's class. Every offset is checked
 * against the file; nothing of it is loaded or run. */
static int file_needs_private(const char *path, char *out, size_t outlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
    close(fd);
    return -1;
  }
  size_t size = (size_t)st.st_size;
  const char *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    return -1;
  int r = -1;
  ElfW(Ehdr) eh;
  memcpy(&eh, p, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
      eh.e_shentsize != sizeof(ElfW(Shdr)) || eh.e_shoff > size ||
      eh.e_shnum > (size - eh.e_shoff) / sizeof(ElfW(Shdr)))
    goto done;
  r = 0;
  for (size_t i = 0; i < eh.e_shnum && r == 0; i++) {
    ElfW(Shdr) sh, strsh;
    memcpy(&sh, p + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_GNU_verneed)
      continue;
    if (sh.sh_link >= eh.e_shnum || sh.sh_offset > size || sh.sh_size > size - sh.sh_offset) {
      r = -1;
      break;
    }
    memcpy(&strsh, p + eh.e_shoff + sh.sh_link * sizeof strsh, sizeof strsh);
    if (strsh.sh_offset > size || strsh.sh_size > size - strsh.sh_offset) {
      r = -1;
      break;
    }
    const char *strtab = p + strsh.sh_offset;
    size_t end = sh.sh_offset + sh.sh_size, off = sh.sh_offset;
    for (size_t k = 0; k < sh.sh_info && off < end && end - off >= sizeof(ElfW(Verneed)); k++) {
      ElfW(Verneed) vn;
      memcpy(&vn, p + off, sizeof vn);
      const char *file = str_at(strtab, strsh.sh_size, vn.vn_file);
      size_t a = off + vn.vn_aux;
      for (size_t j = 0; j < vn.vn_cnt && a >= off && a < end && end - a >= sizeof(ElfW(Vernaux));
           j++) {
        ElfW(Vernaux) va;
        memcpy(&va, p + a, sizeof va);
        const char *name = str_at(strtab, strsh.sh_size, va.vna_name);
        if (file && name && strcmp(file, "libibverbs.so.1") == 0 &&
            strncmp(name, "IBVERBS_PRIVATE_", 16) == 0) {
          snprintf(out, outlen, "%s", name);
          r = 1;
          break;
        }
        if (!va.vna_next)
          break;
        a += va.vna_next;
      }
      if (r || !vn.vn_next)
        break;
      off += vn.vn_next;
    }
  }
done:
  munmap((void *)p, size);
  return r;
}

/* Why the ELF file PATH cannot be mapped whole, or NULL when it can (or is
 * no ELF file of this process's class: dlopen then says what is wrong). A
 * loadable segment that ends past the end of the file (a truncated copy)
 * would be mapped anyway, and dlopen touching its missing pages dies of
 * SIGBUS; the headers are read with pread, nothing is mapped. */
static char *file_truncated(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return NULL;
  char *why = NULL;
  struct stat st;
  ElfW(Ehdr) eh;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
      memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
      eh.e_phentsize != sizeof(ElfW(Phdr)))
    goto done;
  const unsigned long long size = (unsigned long long)st.st_size;
  const unsigned long long ph_end =
      (unsigned long long)eh.e_phoff + (unsigned long long)eh.e_phnum * sizeof(ElfW(Phdr));
  if (ph_end > size) {
    why = dup_printf("%s is truncated: its program headers end at byte %llu, the file has %llu",
                     path, ph_end, size);
    goto done;
  }
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    ElfW(Phdr) ph;
    if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph)
      break;
    if (ph.p_type != PT_LOAD)
      continue;
    const unsigned long long end = (unsigned long long)ph.p_offset + ph.p_filesz;
    if (end < ph.p_offset || end > size) {
      why = dup_printf("%s is truncated: its loadable segment at offset %llu ends at byte %llu, "
                       "the file has %llu",
                       path, (unsigned long long)ph.p_offset, end, size);
      break;
    }
  }
done:
  close(fd);
  return why;
}

/* A provider library's file in the loaded libibverbs's own directory, where
 * its release installs it, or NULL when there is none. */
static char *beside_ibverbs(const struct lib_info *lib) {
  const char *ibv = lib_path(&libs[RDMADL_LIB_IBVERBS]);
  const char *slash = ibv ? strrchr(ibv, '/') : NULL;
  if (!slash)
    return NULL;
  char *candidate = dup_printf("%.*s/%s", (int)(slash - ibv), ibv, lib->soname);
  struct stat st;
  if (candidate && (stat(candidate, &st) != 0 || !S_ISREG(st.st_mode))) {
    free(candidate);
    candidate = NULL;
  }
  return candidate;
}

/* Refuses (returns 1, state incompatible) a provider library file that needs
 * another IBVERBS_PRIVATE_* node than the loaded libibverbs defines: the two
 * are from different rdma-core releases and never work together. */
static int refuse_other_release(struct lib_info *lib) {
  const char *have = libs[RDMADL_LIB_IBVERBS].private_node;
  char need[64];
  if (file_needs_private(lib->open_name, need, sizeof need) != 1 ||
      (have && strcmp(need, have) == 0))
    return 0;
  lib->state = RDMADL_STATE_INCOMPATIBLE;
  lib->error = dup_printf("%s is from another rdma-core release than the loaded libibverbs: it "
                          "needs %s, %s has %s",
                          lib->open_name, need, lib_path(&libs[RDMADL_LIB_IBVERBS]),
                          have ? have : "no IBVERBS_PRIVATE node");
  DEBUGF("%s", lib->error);
  return 1;
}

static void load_one(rdmadl_lib which, const char *override) {
  struct lib_info *lib = &libs[which];
  if (override && !*override)
    override = NULL;
  if (lib->kind == KIND_EAGER)
    lib->requested = override ? override : lib->soname;

  if (override) {
    /* An override is always a file, relative to the current directory when
     * not absolute, never a name to search the library path for. */
    lib->open_name = strchr(override, '/') ? (char *) override : dup_printf("./%s", override);
    if (!lib->open_name) {
      lib->state = RDMADL_STATE_LOAD_FAILED;
      return;
    }
    struct stat st;
    if (stat(lib->open_name, &st) != 0) {
      lib->state = RDMADL_STATE_NOT_FOUND;
      lib->stat_errno = errno;
      DEBUGF("%s", lib_error(lib));
      return;
    }
    /* dlopen would block on a FIFO and read whatever a device gives. */
    if (!S_ISREG(st.st_mode)) {
      lib->state = RDMADL_STATE_LOAD_FAILED;
      lib->error = dup_printf("%s=%s: %s, not a regular file; only a regular file is loaded",
                              lib->env, override, file_kind(st.st_mode));
      DEBUGF("%s", lib->error);
      return;
    }
  } else {
    lib->open_name = lib->kind == KIND_PROVIDER ? beside_ibverbs(lib) : NULL;
    if (!lib->open_name)
      lib->open_name = (char *)lib->soname;
  }
  if (strchr(lib->open_name, '/')) {
    char *why = file_truncated(lib->open_name);
    if (why) {
      lib->state = RDMADL_STATE_LOAD_FAILED;
      lib->error = override ? dup_printf("%s=%s: %s", lib->env, override, why) : why;
      if (override)
        free(why);
      DEBUGF("%s", lib->error);
      return;
    }
  }
  if (lib->kind == KIND_PROVIDER && strchr(lib->open_name, '/') && refuse_other_release(lib))
    return;
  DEBUGF("dlopen(\"%s\")", lib->open_name);
  dlerror();
  void *h = lib->kind == KIND_EAGER ? loader_dlopen(lib->open_name, RTLD_LAZY | RTLD_LOCAL)
                                    : dlopen(lib->open_name, RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char *err = dlerror();
    /* A provider found on the search path whose IBVERBS_PRIVATE_* node the
     * loaded libibverbs lacks: glibc refuses it. */
    if (lib->kind == KIND_PROVIDER && err && strstr(err, "IBVERBS_PRIVATE_") &&
        strstr(err, "not found")) {
      lib->state = RDMADL_STATE_INCOMPATIBLE;
      lib->error =
          dup_printf("%s is from another rdma-core release than the loaded libibverbs "
                     "(%s, %s): %s",
                     lib->open_name, lib_path(&libs[RDMADL_LIB_IBVERBS]),
                     libs[RDMADL_LIB_IBVERBS].private_node ? libs[RDMADL_LIB_IBVERBS].private_node
                                                           : "no IBVERBS_PRIVATE node",
                     err);
    } else {
      classify_failure(lib, override, err);
    }
    DEBUGF("dlopen failed: %s", lib->error);
    return;
  }
  struct link_map *map = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || !map) {
    lib->state = RDMADL_STATE_LOAD_FAILED;
    lib->error = dup_printf("%s: no link map", lib->open_name);
    return;
  }
  lib->map = map;
  lib->handle = h;
  /* A relative name means nothing once the current directory changes. */
  if (map->l_name[0] != '/')
    lib_path(lib);
  struct elf_view v;
  elf_view_init(&v, map, lib->prefix);
  lib->node = v.highest;
  lib->private_node = v.private_node;
  DEBUGF("loaded %s (soname %s, highest node %s)", map->l_name, v.soname ? v.soname : "none",
         lib->node ? lib->node : "none");
  if (v.rdmadl) {
    lib->state = RDMADL_STATE_INCOMPATIBLE;
    lib->error = dup_printf("%s is rdmadl itself, not rdma-core's library", lib->requested);
    DEBUGF("%s", lib->error);
    return;
  }
  if (!v.soname || strcmp(v.soname, lib->soname) != 0) {
    lib->state = RDMADL_STATE_INCOMPATIBLE;
    lib->error = dup_printf("%s has soname %s, expected %s", map->l_name,
                            v.soname ? v.soname : "(none)", lib->soname);
    DEBUGF("%s", lib->error);
    return;
  }
  bind_symbols(lib, &v, h);
  if (lib->nmissing == lib->nsyms) {
    lib->state = RDMADL_STATE_INCOMPATIBLE;
    lib->error = dup_printf("%s exports none of its %zu symbols at their %s* version nodes",
                            map->l_name, lib->nsyms, lib->prefix);
  } else {
    lib->state = lib->nmissing ? RDMADL_STATE_PARTIAL : RDMADL_STATE_LOADED;
  }
}

static int usable(rdmadl_state s) {
  return s == RDMADL_STATE_LOADED || s == RDMADL_STATE_PARTIAL;
}

static const char disabled_sentence[] = "RDMA is disabled by RDMADL_DISABLE";

/* The rdma-core release in a real library's file name: "44.0" of
 * libibverbs.so.1.14.44.0 (soname, then the library's own minor version,
 * then the release), or NULL. */
static const char *release_of(const struct lib_info *l, const char *path) {
  const char *base = path ? strrchr(path, '/') : NULL;
  base = base ? base + 1 : path;
  size_t n = strlen(l->soname);
  if (!base || strncmp(base, l->soname, n) != 0 || base[n] != '.')
    return NULL;
  const char *rel = strchr(base + n + 1, '.');
  return rel && rel[1] >= '0' && rel[1] <= '9' ? rel + 1 : NULL;
}

/* The slot of a version node ("IBVERBS_1.14" -> 140), or -1. */
static int node_slot(const struct lib_info *l, const char *node) {
  size_t n = strlen(l->prefix);
  if (!node || strncmp(node, l->prefix, n) != 0)
    return -1;
  char *end = NULL;
  long minor = strtol(node + n, &end, 10), sub = 0;
  if (end && *end == '.')
    sub = strtol(end + 1, NULL, 10);
  return (int)(minor * 10 + sub);
}

/* One library in one clause, e.g. "libibverbs.so.1 (rdma-core 44.0,
 * IBVERBS_1.14, /usr/lib/libibverbs.so.1.14.44.0): complete for its release,
 * 19 newer symbols absent, 5 emulated". Missing symbols of nodes newer than
 * the file's highest one are normal for an older release; only those of its
 * own nodes make it incomplete. Unescaped; allocated. */
static char *describe_lib(struct lib_info *l) {
  if (!usable(l->state)) {
    const char *e = lib_error(l);
    return dup_printf("%s %s: %s", l->requested ? l->requested : l->soname,
                      rdmadl_state_name(l->state), e ? e : "unknown error");
  }
  const char *path = lib_path(l), *rel = release_of(l, path);
  int top = node_slot(l, l->node);
  size_t newer = 0, own = 0, emulated = 0;
  for (size_t k = l->first; k < l->first + l->nsyms; k++) {
    if (__atomic_load_n(&rdmadl_fn[k], __ATOMIC_ACQUIRE))
      continue;
    if ((int)rdmadl_sym_meta[k].slot <= top)
      own++; /* absent or emulated: the file lacks a node it claims */
    else if (rdmadl_sym_meta[k].emu)
      emulated++; /* a fallback serves it: not counted as absent too */
    else
      newer++;
  }
  char what[160];
  if (!l->nmissing)
    snprintf(what, sizeof what, "complete");
  else if (!own)
    snprintf(what, sizeof what, "complete for its release, %zu newer symbol%s absent, %zu emulated",
             newer, newer == 1 ? "" : "s", emulated);
  else
    snprintf(what, sizeof what,
             "%zu symbol%s of its own release missing, %zu newer absent, %zu emulated", own,
             own == 1 ? "" : "s", newer, emulated);
  return dup_printf("%s (%s%s%s%s, %s): %s", l->soname, rel ? "rdma-core " : "", rel ? rel : "",
                    rel ? ", " : "", l->node ? l->node : "no version node",
                    path ? path : l->requested, what);
}

/* What the libraries are: libibverbs' clause, then librdmacm's. */
static char *build_reason(void) {
  struct lib_info *v = &libs[RDMADL_LIB_IBVERBS], *c = &libs[RDMADL_LIB_RDMACM];
  if (v->state == RDMADL_STATE_DISABLED)
    return strdup(disabled_sentence);
  char *vs = describe_lib(v), *cs = usable(v->state) ? describe_lib(c) : NULL;
  char *raw = usable(v->state) ? dup_printf("%s; %s", vs ? vs : "?", cs ? cs : "?")
                               : (vs ? strdup(vs) : NULL);
  free(vs);
  free(cs);
  char *out = raw ? escape_dup(raw) : NULL;
  free(raw);
  return out;
}

/* One INFO line for a library just loaded (or not). */
static void log_lib_summary(struct lib_info *l) {
  if (!log_on(RDMADL_LOG_INFO))
    return;
  char *d = describe_lib(l);
  INFOF("%s", d ? d : "out of memory");
  free(d);
}

/* Loads both libraries from scratch (a fork child may run it again after
 * its parent's loading thread was cut off midway). Returns 0 without
 * deciding anything when the environment cannot be read. */
static int load_all(void) {
  int saved = errno;
  struct rdmadl_env env;
  if (!env_read(&env)) {
    errno = saved;
    return 0;
  }
  const char *dbg = env.debug, *dis = env.disable;
  int debug_understood, level = parse_debug_level(dbg, &debug_understood);
  /* (A handler that caused this load holds the lock for reading already.) */
  if (!in_log_handler)
    pthread_rwlock_wrlock(&log_lock);
  __atomic_store_n(&env_log_level, level, __ATOMIC_RELAXED);
  log_update_max();
  if (!in_log_handler)
    pthread_rwlock_unlock(&log_lock);
  /* A load again (a fork child whose parent's loading thread was cut off)
   * starts from an empty table; the first one finds it empty (382 stores
   * were 1.5 k instructions of every start-up). Only this thread exists
   * then. */
  static int loaded_before;
  if (loaded_before)
    memset(rdmadl_fn, 0, sizeof rdmadl_fn);
  loaded_before = 1;
  for (int i = 0; i < RDMADL_LIB_COUNT; i++) {
    struct lib_info *l = &libs[i];
    l->state = l->kind == KIND_EAGER ? RDMADL_STATE_NOT_FOUND : RDMADL_STATE_NOT_LOADED;
    l->requested = l->soname;
    l->open_name = NULL;
    l->node = NULL;
    l->error = NULL;
    l->stat_errno = 0;
    l->path = NULL;
    l->map = NULL;
    l->handle = NULL;
    l->nmissing = l->nsyms;
    l->private_node = NULL;
    /* Only this load ever set it (a strdup of RDMADL_<LIB>_PATH): a load
     * again frees the cut-off load's copy instead of leaking it. */
    free(l->lazy_override);
    l->lazy_override = NULL;
    if (l->kind != KIND_EAGER) {
      const char *o = env.path[i];
      if (o && *o) {
        l->requested = l->lazy_override = strdup(o);
        if (!l->lazy_override)
          l->requested = l->soname;
      }
      __atomic_store_n(&l->lazy_done, 0, __ATOMIC_RELEASE);
    }
  }
  reason = NULL;
  int disable = parse_bool(dis);
  if (disable < 0)
    WARNF("RDMADL_DISABLE=%s is not a boolean (1/true/yes/on, 0/false/no/off); ignored", dis);
  if (!debug_understood)
    WARNF("RDMADL_DEBUG=%s is not understood (0, 1, 2, info, debug, symbols); logging the summary",
          dbg);
  if (disable == 1) {
    for (int i = 0; i < RDMADL_LIB_COUNT; i++) {
      libs[i].state = RDMADL_STATE_DISABLED;
      libs[i].error = "disabled by RDMADL_DISABLE";
      __atomic_store_n(&libs[i].lazy_done, 1, __ATOMIC_RELEASE);
    }
    DEBUGF("%s", disabled_sentence);
  } else {
    load_one(RDMADL_LIB_IBVERBS, env.path[RDMADL_LIB_IBVERBS]);
    struct lib_info *c = &libs[RDMADL_LIB_RDMACM];
    if (usable(libs[RDMADL_LIB_IBVERBS].state)) {
      load_one(RDMADL_LIB_RDMACM, env.path[RDMADL_LIB_RDMACM]);
    } else {
      const char *override = env.path[RDMADL_LIB_RDMACM];
      c->requested = (override && *override) ? override : c->soname;
      c->state = RDMADL_STATE_SKIPPED;
      c->error = "not loaded because libibverbs is unusable";
      /* Nor is any provider library: each belongs to a libibverbs. */
      for (int i = 0; i < RDMADL_LIB_COUNT; i++)
        if (libs[i].kind == KIND_PROVIDER) {
          libs[i].state = RDMADL_STATE_SKIPPED;
          libs[i].error = "not loaded because libibverbs is unusable";
          __atomic_store_n(&libs[i].lazy_done, 1, __ATOMIC_RELEASE);
        }
    }
  }
  if (libs[RDMADL_LIB_IBVERBS].state == RDMADL_STATE_DISABLED) {
    INFOF("%s", disabled_sentence);
  } else {
    log_lib_summary(&libs[RDMADL_LIB_IBVERBS]);
    log_lib_summary(&libs[RDMADL_LIB_RDMACM]);
  }
  errno = saved;
  return 1;
}

static void after_fork_child(void) {
  /* Only the forking thread exists in the child: a load another thread had
   * under way will never finish, and nobody else waits. */
  pthread_mutex_init(&load_mu, NULL);
  pthread_cond_init(&load_cv, NULL);
  /* A lazy load another thread had under way: the child loads it again. */
  pthread_mutex_init(&lazy_mu, NULL);
  /* Another thread inside a log handler, or the verdict's intern list. */
  if (!in_log_handler)
    pthread_rwlock_init(&log_lock, NULL);
  pthread_mutex_init(&verdict_mu, NULL);
  if (__atomic_load_n(&lazy_busy, __ATOMIC_RELAXED) &&
      !pthread_equal(__atomic_load_n(&lazy_owner, __ATOMIC_RELAXED), pthread_self()))
    __atomic_store_n(&lazy_busy, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&nwaiters, 0, __ATOMIC_RELAXED);
  if (__atomic_load_n(&load_state, __ATOMIC_RELAXED) == LOAD_RUNNING &&
      !pthread_equal(__atomic_load_n(&loader, __ATOMIC_RELAXED), pthread_self())) {
    __atomic_store_n(&loader_in_dlopen, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&load_state, LOAD_NONE, __ATOMIC_RELAXED);
  }
}

static void report_deadlock(const char *what) {
  /* An error: the default handler prints it whatever RDMADL_DEBUG says. */
  LOGF(RDMADL_LOG_ERROR,
       "%s: another thread has been loading %s for %d s and is still inside its dlopen (a "
       "library constructor waiting for this thread?); this call fails with EOPNOTSUPP instead "
       "of waiting forever",
       what, __atomic_load_n(&loader_open_name, __ATOMIC_ACQUIRE), DEADLOCK_SECONDS);
}

enum { ENSURE_DONE = 1, ENSURE_REENTERED = 0, ENSURE_FAILED = -1, ENSURE_RETRY = 2 };

/* Makes sure the load has happened. ENSURE_REENTERED: called by the loading
 * thread itself (from a constructor inside its dlopen). ENSURE_FAILED: no
 * decision (environment unreadable, or the deadlock guard gave up). */
/* Waits for the load another thread runs. Returns its outcome, or
 * ENSURE_FAILED from the deadlock guard, or ENSURE_RETRY when the loader
 * gave up without deciding (then the caller may load). */
static int wait_for_load(const char *what) {
  __atomic_add_fetch(&nwaiters, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_lock(&load_mu);
  unsigned gen = 0;
  struct timespec deadline = {0, 0};
  int result;
  for (;;) {
    int s = __atomic_load_n(&load_state, __ATOMIC_SEQ_CST);
    if (s != LOAD_RUNNING) {
      result = s == LOAD_DONE ? ENSURE_DONE : ENSURE_RETRY;
      break;
    }
    if (!__atomic_load_n(&loader_in_dlopen, __ATOMIC_SEQ_CST)) {
      pthread_cond_wait(&load_cv, &load_mu);
      continue;
    }
    unsigned g = __atomic_load_n(&dlopen_gen, __ATOMIC_SEQ_CST);
    if (g != gen || deadline.tv_sec == 0) {
      gen = g;
      clock_gettime(CLOCK_MONOTONIC, &deadline);
      deadline.tv_sec += DEADLOCK_SECONDS;
    }
    if (pthread_cond_clockwait(&load_cv, &load_mu, CLOCK_MONOTONIC, &deadline) == ETIMEDOUT &&
        __atomic_load_n(&load_state, __ATOMIC_SEQ_CST) == LOAD_RUNNING &&
        __atomic_load_n(&loader_in_dlopen, __ATOMIC_SEQ_CST) &&
        __atomic_load_n(&dlopen_gen, __ATOMIC_SEQ_CST) == gen) {
      result = ENSURE_FAILED;
      break;
    }
  }
  pthread_mutex_unlock(&load_mu);
  __atomic_sub_fetch(&nwaiters, 1, __ATOMIC_SEQ_CST);
  if (result == ENSURE_FAILED)
    report_deadlock(what);
  return result;
}

/* Makes sure the load has happened. ENSURE_REENTERED: called by the loading
 * thread itself (from a constructor inside its dlopen). ENSURE_FAILED: no
 * decision (environment unreadable, or the deadlock guard gave up). */
static int ensure_slow(const char *what) {
  for (;;) {
    int s = __atomic_load_n(&load_state, __ATOMIC_ACQUIRE);
    if (s == LOAD_DONE)
      return ENSURE_DONE;
    if (s == LOAD_NONE) {
      if (__atomic_compare_exchange_n(&load_state, &s, LOAD_RUNNING, 0, __ATOMIC_SEQ_CST,
                                      __ATOMIC_ACQUIRE))
        break;
      continue;
    }
    if (pthread_equal(__atomic_load_n(&loader, __ATOMIC_ACQUIRE), pthread_self()))
      return ENSURE_REENTERED;
    int r = wait_for_load(what);
    if (r != ENSURE_RETRY)
      return r;
  }
  __atomic_store_n(&loader, pthread_self(), __ATOMIC_RELEASE);
  const int first = !__atomic_exchange_n(&atfork_registered, 1, __ATOMIC_RELAXED);
  if (first)
    pthread_atfork(NULL, NULL, after_fork_child);
  int latched = load_all();
  if (first)
    pin_self();
  if (!latched)
    __atomic_store_n(&loader, (pthread_t)0, __ATOMIC_RELEASE);
  __atomic_store_n(&load_state, latched ? LOAD_DONE : LOAD_NONE, __ATOMIC_SEQ_CST);
  wake_waiters();
  /* The summary ends with the verdict (it lists the devices: only asked). */
  if (latched && log_on(RDMADL_LOG_INFO)) {
    int saved = errno;
    rdmadl_stack st;
    int ok;
    char *raw = build_verdict(&st, &ok);
    INFOF("verdict: %s", raw ? raw : "out of memory");
    free(raw);
    errno = saved;
  }
  return latched ? ENSURE_DONE : ENSURE_FAILED;
}

static inline int ensure_named(const char *what) {
  if (__builtin_expect(__atomic_load_n(&load_state, __ATOMIC_ACQUIRE) == LOAD_DONE, 1))
    return ENSURE_DONE;
  return ensure_slow(what);
}

static inline int ensure(void) {
  return ensure_named("rdmadl");
}

__attribute__((constructor)) static void rdmadl_constructor(void) {
  ensure();
}

/* A symbol asked for by a constructor running inside the loader's own
 * dlopen: from the object being loaded, never from rdmadl. */
static void *resolve_during_dlopen(size_t idx) {
  const char *name = __atomic_load_n(&loader_open_name, __ATOMIC_ACQUIRE);
  void *h = name ? dlopen(name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
  struct link_map *map = NULL;
  void *f = NULL;
  if (h && dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map) {
    struct elf_view v;
    elf_view_init(&v, map, libs[rdmadl_sym_meta[idx].lib].prefix);
    int fallback = 0;
    if (!v.rdmadl) {
      f = elf_lookup(&v, idx, &fallback);
      if (fallback)
        f = dlvsym(h, rdmadl_sym_name(idx), rdmadl_sym_node(idx));
    }
  }
  DEBUGF("%s@%s requested during dlopen: %p", rdmadl_sym_name(idx), rdmadl_sym_node(idx), f);
  return f;
}

/* ---- lazy libraries ----------------------------------------------------- */

/* Loads a provider library or libibverbs's neighbour libibumad once, after
 * the main load. A constructor of the library being loaded that calls one
 * of these functions back gets nothing (EOPNOTSUPP) rather than deadlock. */
static void load_lazy(struct lib_info *lib) {
  if (lib->kind == KIND_EAGER || __atomic_load_n(&lib->lazy_done, __ATOMIC_ACQUIRE))
    return;
  if (__atomic_load_n(&lazy_busy, __ATOMIC_ACQUIRE) &&
      pthread_equal(__atomic_load_n(&lazy_owner, __ATOMIC_ACQUIRE), pthread_self())) {
    DEBUGF("%s requested by a constructor during its own load: not served", lib->soname);
    return;
  }
  int saved = errno;
  pthread_mutex_lock(&lazy_mu);
  if (!__atomic_load_n(&lib->lazy_done, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&lazy_owner, pthread_self(), __ATOMIC_RELEASE);
    __atomic_store_n(&lazy_busy, 1, __ATOMIC_RELEASE);
    load_one((rdmadl_lib)(lib - libs), lib->lazy_override);
    log_lib_summary(lib);
    /* Done before not busy: whoever sees busy cleared sees it done. */
    __atomic_store_n(&lib->lazy_done, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&lazy_busy, 0, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&lazy_mu);
  errno = saved;
}

void *rdmadl_resolve_slow(enum rdmadl_sym_index idx) {
  int saved = errno;
  void *f = NULL;
  switch (ensure_named(rdmadl_sym_name(idx))) {
  case ENSURE_DONE:
    f = __atomic_load_n(&rdmadl_fn[idx], __ATOMIC_ACQUIRE);
    if (!f && libs[rdmadl_sym_meta[idx].lib].kind != KIND_EAGER) {
      load_lazy(&libs[rdmadl_sym_meta[idx].lib]);
      f = __atomic_load_n(&rdmadl_fn[idx], __ATOMIC_ACQUIRE);
    }
    break;
  case ENSURE_REENTERED:
    f = resolve_during_dlopen(idx);
    break;
  default:
    break;
  }
  if (!f)
    DEBUGF("%s@%s: not in the loaded library (a fallback or EOPNOTSUPP)", rdmadl_sym_name(idx),
           rdmadl_sym_node(idx));
  errno = saved;
  return f;
}

int rdmadl_load(void) {
  ensure();
  return usable(libs[RDMADL_LIB_IBVERBS].state) ? 0 : EOPNOTSUPP;
}

static struct lib_info *lib_at(rdmadl_lib lib) {
  ensure();
  return (unsigned)lib < RDMADL_LIB_COUNT ? &libs[lib] : NULL;
}

/* A lazy library whose load has not run: its fields other than requested
 * are not to be read (another thread may be filling them). */
static int pending(const struct lib_info *l) {
  if (l->kind == KIND_EAGER || __atomic_load_n(&l->lazy_done, __ATOMIC_ACQUIRE))
    return 0;
  /* Another thread is loading one: its functions may already be callable
   * (bound as it goes), so wait for the load to finish before answering. */
  if (__atomic_load_n(&lazy_busy, __ATOMIC_ACQUIRE) &&
      !pthread_equal(__atomic_load_n(&lazy_owner, __ATOMIC_ACQUIRE), pthread_self())) {
    pthread_mutex_lock(&lazy_mu);
    pthread_mutex_unlock(&lazy_mu);
  }
  return !__atomic_load_n(&l->lazy_done, __ATOMIC_ACQUIRE);
}

static const char not_loaded_error[] =
    "not loaded yet: loaded on the first call of one of its functions (or rdmadl_lib_load)";

int rdmadl_lib_load(rdmadl_lib lib) {
  struct lib_info *l = lib_at(lib);
  if (!l)
    return EOPNOTSUPP;
  load_lazy(l);
  return usable(l->state) ? 0 : EOPNOTSUPP;
}

const char *rdmadl_lib_name(rdmadl_lib lib) {
  return (unsigned)lib < RDMADL_LIB_COUNT ? libs[lib].soname : NULL;
}

static const char *lib_path(struct lib_info *l) {
  if (!l->map)
    return NULL;
  const char *p = __atomic_load_n(&l->path, __ATOMIC_ACQUIRE);
  if (p)
    return p;
  char *real = realpath(l->map->l_name, NULL);
  return publish(&l->path, real ? real : strdup(l->map->l_name));
}

rdmadl_state rdmadl_lib_state(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return !l ? RDMADL_STATE_NOT_FOUND : pending(l) ? RDMADL_STATE_NOT_LOADED : l->state;
}

const char *rdmadl_state_name(rdmadl_state state) {
  switch (state) {
  case RDMADL_STATE_DISABLED:
    return "disabled";
  case RDMADL_STATE_NOT_FOUND:
    return "not-found";
  case RDMADL_STATE_LOAD_FAILED:
    return "load-failed";
  case RDMADL_STATE_INCOMPATIBLE:
    return "incompatible";
  case RDMADL_STATE_SKIPPED:
    return "skipped";
  case RDMADL_STATE_LOADED:
    return "loaded";
  case RDMADL_STATE_PARTIAL:
    return "partial";
  case RDMADL_STATE_NOT_LOADED:
    return "not-loaded";
  }
  return "unknown";
}

const char *rdmadl_lib_requested(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l ? l->requested : NULL;
}

const char *rdmadl_lib_path(rdmadl_lib lib) {
  struct lib_info *l = lib_at(lib);
  return l && !pending(l) ? lib_path(l) : NULL;
}

static const char *lib_error(struct lib_info *l) {
  const char *e = __atomic_load_n(&l->error, __ATOMIC_ACQUIRE);
  if (e || !l->stat_errno)
    return e;
  return publish(&l->error, dup_printf("%s=%s: %s", l->env, l->requested, strerror(l->stat_errno)));
}

const char *rdmadl_lib_error(rdmadl_lib lib) {
  struct lib_info *l = lib_at(lib);
  return !l ? NULL : pending(l) ? not_loaded_error : lib_error(l);
}

const char *rdmadl_lib_version_node(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l && !pending(l) ? l->node : NULL;
}

size_t rdmadl_lib_symbol_count(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l ? l->nsyms : 0;
}

size_t rdmadl_lib_missing_count(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return !l ? 0 : pending(l) ? l->nsyms : l->nmissing;
}

const char *rdmadl_lib_missing_symbol(rdmadl_lib lib, size_t i) {
  const struct lib_info *l = lib_at(lib);
  if (!l)
    return NULL;
  for (size_t k = l->first; k < l->first + l->nsyms; k++) {
    if (__atomic_load_n(&rdmadl_fn[k], __ATOMIC_ACQUIRE))
      continue;
    if (i-- == 0)
      return rdmadl_sym_name(k);
  }
  return NULL;
}

int rdmadl_symbol_status(const char *name, const char **node) {
  ensure();
  for (size_t k = 0; name && k < RDMADL_NSYMS; k++) {
    if (strcmp(rdmadl_sym_name(k), name) != 0)
      continue;
    if (node)
      *node = rdmadl_sym_node(k);
    load_lazy(&libs[rdmadl_sym_meta[k].lib]);
    if (__atomic_load_n(&rdmadl_fn[k], __ATOMIC_ACQUIRE))
      return RDMADL_SYMBOL_RESOLVED;
    /* A fallback needs its library's older calls: none without the library. */
    return rdmadl_sym_meta[k].emu && usable(libs[rdmadl_sym_meta[k].lib].state)
               ? RDMADL_SYMBOL_EMULATED
               : RDMADL_SYMBOL_MISSING;
  }
  return RDMADL_SYMBOL_UNKNOWN;
}

const char *rdmadl_symbol_name(size_t i, rdmadl_lib *lib) {
  if (i >= RDMADL_NSYMS)
    return NULL;
  if (lib)
    *lib = (rdmadl_lib)rdmadl_sym_meta[i].lib;
  return rdmadl_sym_name(i);
}

/* The errno that libibverbs sets: its libc's. In a program linked -static,
 * dlopen gives the library a libc of its own whose errno is not the
 * program's, so the cause (ENOSYS: no kernel support) is read from there. */
#define RDMADL_FN_LOADED(name)                                                                     \
  ((__typeof__(&name))__atomic_load_n(&rdmadl_fn[RDMADL_IDX_##name], __ATOMIC_ACQUIRE))

static int *library_errno(void) {
  void *h = libs[RDMADL_LIB_IBVERBS].handle;
  int *(*loc)(void) = h ? (int *(*)(void))dlsym(h, "__errno_location") : NULL;
  return loc ? loc() : &errno;
}

/* Asks libibverbs for its device list once: the stack's state, the list
 * (NULL unless READY; the caller frees it) and the errno of a failure. */
static rdmadl_stack list_devices(struct ibv_device ***out, int *n, int *err) {
  *out = NULL;
  *n = 0;
  *err = 0;
  if (libs[RDMADL_LIB_IBVERBS].state == RDMADL_STATE_DISABLED)
    return RDMADL_STACK_DISABLED;
  struct ibv_device **(*get)(int *) = (struct ibv_device * *(*)(int *))
      __atomic_load_n(&rdmadl_fn[RDMADL_IDX_ibv_get_device_list], __ATOMIC_ACQUIRE);
  void (*release)(struct ibv_device **) = (void (*)(struct ibv_device **))__atomic_load_n(
      &rdmadl_fn[RDMADL_IDX_ibv_free_device_list], __ATOMIC_ACQUIRE);
  if (!get || !release)
    return RDMADL_STACK_NO_LIBRARY;
  int saved = errno, *lib_errno = library_errno(), lib_saved = *lib_errno;
  *lib_errno = 0;
  struct ibv_device **list = get(n);
  *err = *lib_errno;
  *lib_errno = lib_saved;
  errno = saved;
  if (!list)
    return *err == ENOSYS ? RDMADL_STACK_NO_KERNEL_SUPPORT : RDMADL_STACK_NO_DEVICES;
  if (*n <= 0) {
    release(list);
    return RDMADL_STACK_NO_DEVICES;
  }
  *out = list;
  return RDMADL_STACK_READY;
}

rdmadl_stack rdmadl_stack_state(void) {
  ensure();
  struct ibv_device **list;
  int n, err;
  rdmadl_stack st = list_devices(&list, &n, &err);
  if (list)
    ((void (*)(struct ibv_device **))__atomic_load_n(&rdmadl_fn[RDMADL_IDX_ibv_free_device_list],
                                                     __ATOMIC_ACQUIRE))(list);
  return st;
}

/* A growing string; on allocation failure it stays NULL. */
struct sbuf {
  char *s;
};
static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sbuf *b, const char *fmt, ...) {
  char *more = NULL;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&more, fmt, ap) < 0)
    more = NULL;
  va_end(ap);
  char *joined = more ? dup_printf("%s%s", b->s ? b->s : "", more) : NULL;
  free(more);
  free(b->s);
  b->s = joined;
}

enum { VERDICT_MAX_NAMED = 8 };

/* The devices' clause of a READY stack: which exist and which port is
 * active. Opens each device once; sets *usable. */
static char *describe_devices(struct ibv_device **list, int n, int *usable_out) {
  __typeof__(&ibv_get_device_name) name_of = RDMADL_FN_LOADED(ibv_get_device_name);
  __typeof__(&ibv_open_device) open_dev = RDMADL_FN_LOADED(ibv_open_device);
  __typeof__(&ibv_close_device) close_dev = RDMADL_FN_LOADED(ibv_close_device);
  __typeof__(&ibv_query_device) qdev = RDMADL_FN_LOADED(ibv_query_device);
  __typeof__(&ibv_query_port) qport = RDMADL_FN_LOADED(ibv_query_port);
  struct sbuf names = {NULL}, active = {NULL};
  int nactive = 0, opened = 0, open_err = 0;
  const char *failed = NULL;
  for (int i = 0; i < n; i++) {
    const char *name = name_of ? name_of(list[i]) : NULL;
    if (!name)
      name = "?";
    if (i < VERDICT_MAX_NAMED)
      sb_add(&names, "%s%s", i ? ", " : "", name);
    else if (i == VERDICT_MAX_NAMED)
      sb_add(&names, ", ...");
    if (!open_dev || !close_dev || !qdev || !qport)
      continue;
    int *lerr = library_errno();
    *lerr = 0;
    struct ibv_context *ctx = open_dev(list[i]);
    if (!ctx) {
      if (!failed) {
        failed = name;
        open_err = *lerr;
      }
      continue;
    }
    opened++;
    struct ibv_device_attr attr;
    memset(&attr, 0, sizeof attr);
    if (qdev(ctx, &attr) == 0)
      for (unsigned p = 1; p <= attr.phys_port_cnt; p++) {
        struct ibv_port_attr pa;
        memset(&pa, 0, sizeof pa);
        if (qport(ctx, (uint8_t)p, (struct _compat_ibv_port_attr *)&pa) != 0 ||
            pa.state != IBV_PORT_ACTIVE)
          continue;
        if (nactive++ < VERDICT_MAX_NAMED)
          sb_add(&active, "%s%s port %u", nactive > 1 ? ", " : "", name, p);
      }
    close_dev(ctx);
  }
  char *out;
  *usable_out = nactive > 0;
  if (nactive)
    out = dup_printf("RDMA is usable: %d device%s (%s), active: %s%s", n, n == 1 ? "" : "s",
                     names.s ? names.s : "", active.s ? active.s : "",
                     nactive > VERDICT_MAX_NAMED ? ", ..." : "");
  else if (!opened && failed)
    out = dup_printf("RDMA devices exist (%s) but none can be opened (%s: %s)",
                     names.s ? names.s : "", failed,
                     open_err ? strerror(open_err) : "ibv_open_device failed");
  else
    out = dup_printf("RDMA devices exist (%s) but no port is active: bring a link up "
                     "(Soft-RoCE: its network interface must be up)",
                     names.s ? names.s : "");
  free(names.s);
  free(active.s);
  return out;
}

/* The verdict, unescaped: one sentence and what the stack is. */
static char *build_verdict(rdmadl_stack *stack_out, int *usable_out) {
  *usable_out = 0;
  struct lib_info *v = &libs[RDMADL_LIB_IBVERBS];
  struct ibv_device **list;
  int n, err;
  rdmadl_stack st = list_devices(&list, &n, &err);
  *stack_out = st;
  char *out = NULL;
  switch (st) {
  case RDMADL_STACK_DISABLED:
    out = strdup(disabled_sentence);
    break;
  case RDMADL_STACK_NO_LIBRARY: {
    char *d = describe_lib(v);
    const char *hint = "";
    if (v->state == RDMADL_STATE_NOT_FOUND && v->requested == v->soname)
      hint = ": install rdma-core's libibverbs (Debian/Ubuntu: libibverbs1 and "
             "ibverbs-providers; Fedora/RHEL: libibverbs)";
    out = dup_printf("no usable libibverbs: %s%s", d ? d : "?", hint);
    free(d);
    break;
  }
  case RDMADL_STACK_NO_KERNEL_SUPPORT: {
    const char *path = lib_path(v);
    out = dup_printf("libibverbs is installed (%s) but the kernel has no RDMA support "
                     "(ibv_get_device_list: ENOSYS): load an RDMA driver, or Soft-RoCE: "
                     "modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IFACE",
                     path ? path : v->requested);
    break;
  }
  case RDMADL_STACK_NO_DEVICES:
    out = err ? dup_printf("the kernel supports RDMA but the devices cannot be listed "
                           "(ibv_get_device_list: %s)",
                           strerror(err))
              : strdup("the kernel supports RDMA but no device exists (for Soft-RoCE: rdma "
                       "link add rxe0 type rxe netdev IFACE)");
    break;
  case RDMADL_STACK_READY:
    out = describe_devices(list, n, usable_out);
    RDMADL_FN_LOADED(ibv_free_device_list)(list);
    break;
  }
  return out;
}

/* S (escaped) from the list of given-out sentences, added when new. */
static const char *intern(const char *s) {
  pthread_mutex_lock(&verdict_mu);
  struct interned *e = verdicts;
  for (; e; e = e->next)
    if (strcmp(e->text, s) == 0)
      break;
  if (!e) {
    size_t len = strlen(s) + 1;
    e = malloc(sizeof *e + len);
    if (e) {
      memcpy(e->text, s, len);
      e->next = verdicts;
      verdicts = e;
    }
  }
  pthread_mutex_unlock(&verdict_mu);
  return e ? e->text : NULL;
}

const char *rdmadl_verdict_state(rdmadl_stack *stack, int *usable_out) {
  rdmadl_stack st = RDMADL_STACK_NO_LIBRARY;
  int ok = 0;
  const char *out;
  if (ensure() != ENSURE_DONE) {
    out = "rdmadl has not loaded rdma-core yet";
  } else {
    char *raw = build_verdict(&st, &ok);
    char *esc = raw ? escape_dup(raw) : NULL;
    out = esc ? intern(esc) : NULL;
    free(raw);
    free(esc);
    if (!out)
      out = "out of memory while describing rdmadl's state";
  }
  if (stack)
    *stack = st;
  if (usable_out)
    *usable_out = ok;
  return out;
}

const char *rdmadl_verdict(void) {
  return rdmadl_verdict_state(NULL, NULL);
}

const char *rdmadl_stack_name(rdmadl_stack stack) {
  switch (stack) {
  case RDMADL_STACK_DISABLED:
    return "disabled";
  case RDMADL_STACK_NO_LIBRARY:
    return "no-library";
  case RDMADL_STACK_NO_KERNEL_SUPPORT:
    return "no-kernel-support";
  case RDMADL_STACK_NO_DEVICES:
    return "no-devices";
  case RDMADL_STACK_READY:
    return "ready";
  }
  return "unknown";
}

const char *rdmadl_reason(void) {
  if (ensure() != ENSURE_DONE)
    return "rdmadl has not loaded rdma-core yet";
  const char *r = __atomic_load_n(&reason, __ATOMIC_ACQUIRE);
  if (!r)
    r = publish(&reason, build_reason());
  return r ? r : "out of memory while describing rdmadl's state";
}

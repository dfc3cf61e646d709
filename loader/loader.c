/* SPDX-License-Identifier: MIT */
/*
 * The run-time loader: dlopens libibverbs.so.1 and librdmacm.so.1 once, binds
 * every symbol of symbols.def at its version node with dlvsym, and records
 * what it found for include/rdmadl/loader.h.
 *
 * Loading happens in a constructor and, through pthread_once, on the first
 * call of any stub, so nothing depends on constructor order. The libraries
 * are never dlclosed. A stub called back while this thread is inside dlopen
 * (a library's constructor calling an exported ibv_* name that binds to a
 * drop-in stub) resolves that one symbol from the object being loaded instead
 * of re-entering pthread_once, which would deadlock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <infiniband/verbs.h>

#include "internal.h"
#include "rdmadl/loader.h"

#undef ibv_get_device_list

const struct rdmadl_sym_meta rdmadl_sym_meta[RDMADL_NSYMS] = {
#define RDMADL_LIB_IBV RDMADL_LIB_IBVERBS
#define RDMADL_LIB_CM RDMADL_LIB_RDMACM
#define RDMADL_NODE_IBV(minor) "IBVERBS_1." #minor
#define RDMADL_NODE_CM(minor) "RDMACM_1." #minor
#define RDMADL_EMU_GEN 0
#define RDMADL_EMU_HAND 0
#define RDMADL_EMU_EMU 1
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  {#name, RDMADL_NODE_##lib(minor), RDMADL_LIB_##lib, minor, RDMADL_FAIL_##fail, RDMADL_EMU_##impl},
#include "symbols.def"
#undef RDMADL_SYM
};

void *rdmadl_fn[RDMADL_NSYMS];

struct lib_info {
  const char *soname;   /* what a real rdma-core library calls itself */
  const char *env;      /* override variable */
  const char *node_fmt; /* version node prefix */
  rdmadl_state state;
  const char *requested;
  char *path; /* realpath of the loaded file */
  char *error;
  char node[32];
  size_t nsyms, nmissing;
  void *handle;
};

static struct lib_info libs[2] = {
    {"libibverbs.so.1", "RDMADL_IBVERBS_PATH", "IBVERBS_1.", RDMADL_STATE_NOT_FOUND, NULL, NULL,
     NULL, "", 0, 0, NULL},
    {"librdmacm.so.1", "RDMADL_RDMACM_PATH", "RDMACM_1.", RDMADL_STATE_NOT_FOUND, NULL, NULL, NULL,
     "", 0, 0, NULL},
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int debug;
static char reason[1024];
/* Set while this thread runs dlopen for the loader; see the file comment. */
static __thread const char *loading_path;

static void logf_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_debug(const char *fmt, ...) {
  if (!debug)
    return;
  va_list ap;
  va_start(ap, fmt);
  fputs("rdmadl: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
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

static int env_flag(const char *name) {
  const char *v = secure_getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

/* The object containing rdmadl's loader: its load address, and the address
 * range its PT_LOAD segments span. Found once (dladdr costs thousands of
 * instructions; it used to run twice per bound symbol). Only used while
 * loading, i.e. under load_once or on the loading thread. */
static struct {
  int done;
  const void *base;
  uintptr_t lo, hi;
} self;

static int find_self_range(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  if ((const void *)info->dlpi_addr != self.base)
    return 0;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (start < lo)
      lo = start;
    if (start + ph->p_memsz > hi)
      hi = start + ph->p_memsz;
  }
  if (lo < hi) {
    self.lo = lo;
    self.hi = hi;
  }
  return 1;
}

static void find_self(void) {
  if (__atomic_load_n(&self.done, __ATOMIC_ACQUIRE))
    return;
  Dl_info info;
  if (dladdr((const void *)&find_self, &info) && info.dli_fbase) {
    self.base = info.dli_fbase;
    dl_iterate_phdr(find_self_range, NULL);
  }
  __atomic_store_n(&self.done, 1, __ATOMIC_RELEASE);
}

/* The base address of the object containing rdmadl's loader. */
static const void *self_base(void) {
  find_self();
  return self.base;
}

static int in_self(const void *addr) {
  find_self();
  return addr && (uintptr_t)addr >= self.lo && (uintptr_t)addr < self.hi;
}

/* Walks the loaded object's dynamic section for its soname and the highest
 * version node (by minor number) that it defines with NODE_FMT's prefix. */
static void read_dynamic(struct link_map *map, const char *node_fmt, const char **soname,
                         char *node, size_t node_size) {
  const char *strtab = NULL;
  ElfW(Addr) verdef = 0, soname_off = 0;
  ElfW(Word) verdefnum = 0;
  int have_soname = 0;
  for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
    case DT_STRTAB:
      strtab = (const char *)d->d_un.d_ptr;
      break;
    case DT_SONAME:
      soname_off = d->d_un.d_val;
      have_soname = 1;
      break;
    case DT_VERDEF:
      verdef = d->d_un.d_ptr;
      break;
    case DT_VERDEFNUM:
      verdefnum = d->d_un.d_val;
      break;
    }
  }
  /* glibc relocates some d_ptr entries in place and not others. */
  if (strtab && (ElfW(Addr))strtab < map->l_addr)
    strtab += map->l_addr;
  if (verdef && verdef < map->l_addr)
    verdef += map->l_addr;
  *soname = (strtab && have_soname) ? strtab + soname_off : NULL;
  node[0] = '\0';
  if (!strtab || !verdef)
    return;
  size_t prefix = strlen(node_fmt);
  long best = -1;
  const ElfW(Verdef) *vd = (const ElfW(Verdef) *)verdef;
  for (ElfW(Word) i = 0; i < verdefnum; i++) {
    if (!(vd->vd_flags & VER_FLG_BASE)) {
      const ElfW(Verdaux) *aux = (const ElfW(Verdaux) *)((const char *)vd + vd->vd_aux);
      const char *name = strtab + aux->vda_name;
      char *end;
      if (strncmp(name, node_fmt, prefix) == 0) {
        long minor = strtol(name + prefix, &end, 10);
        if (*end == '\0' && end != name + prefix && minor > best) {
          best = minor;
          snprintf(node, node_size, "%s", name);
        }
      }
    }
    if (!vd->vd_next)
      break;
    vd = (const ElfW(Verdef) *)((const char *)vd + vd->vd_next);
  }
}

static void bind_symbols(rdmadl_lib which, struct lib_info *lib) {
  for (size_t i = 0; i < RDMADL_NSYMS; i++) {
    const struct rdmadl_sym_meta *m = &rdmadl_sym_meta[i];
    if (m->lib != which)
      continue;
    void *f = dlvsym(lib->handle, m->name, m->node);
    if (f && in_self(f)) {
      logf_debug("%s@%s resolves to rdmadl itself; not bound", m->name, m->node);
      f = NULL;
    }
    if (!f) {
      lib->nmissing++;
      logf_debug("%s@%s: missing", m->name, m->node);
      continue;
    }
    logf_debug("%s@%s: %p", m->name, m->node, f);
    __atomic_store_n(&rdmadl_fn[i], f, __ATOMIC_RELEASE);
  }
}

static void load_one(rdmadl_lib which) {
  struct lib_info *lib = &libs[which];
  const char *override = secure_getenv(lib->env);
  lib->requested = (override && *override) ? override : lib->soname;

  if (override && *override) {
    struct stat st;
    if (stat(override, &st) != 0) {
      lib->state = RDMADL_STATE_NOT_FOUND;
      lib->error = dup_printf("%s=%s: %s", lib->env, override, strerror(errno));
      logf_debug("%s", lib->error);
      return;
    }
  }
  logf_debug("dlopen(\"%s\")", lib->requested);
  loading_path = lib->requested;
  dlerror();
  void *h = dlopen(lib->requested, RTLD_NOW | RTLD_LOCAL);
  loading_path = NULL;
  if (!h) {
    const char *err = dlerror();
    lib->error = dup_printf("%s", err ? err : "dlopen failed");
    /* A search by soname that finds nothing is "not found"; everything
     * else (a garbage file, missing dependencies) is a failed load. */
    lib->state = (!override || !*override) && err && strstr(err, "No such file")
                     ? RDMADL_STATE_NOT_FOUND
                     : RDMADL_STATE_LOAD_FAILED;
    logf_debug("dlopen failed: %s", lib->error);
    return;
  }
  lib->handle = h;
  struct link_map *map = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map) {
    char real[PATH_MAX];
    lib->path = realpath(map->l_name, real) ? strdup(real) : strdup(map->l_name);
    const char *soname = NULL;
    read_dynamic(map, lib->node_fmt, &soname, lib->node, sizeof lib->node);
    logf_debug("loaded %s (soname %s, highest node %s)", lib->path ? lib->path : "?",
               soname ? soname : "none", lib->node[0] ? lib->node : "none");
    if ((const void *)map->l_addr == self_base() && self_base()) {
      lib->state = RDMADL_STATE_INCOMPATIBLE;
      lib->error = dup_printf("%s is rdmadl itself, not rdma-core's library", lib->requested);
      return;
    }
    if (!soname || strcmp(soname, lib->soname) != 0) {
      lib->state = RDMADL_STATE_INCOMPATIBLE;
      lib->error = dup_printf("%s has soname %s, expected %s", lib->path ? lib->path : "?",
                              soname ? soname : "(none)", lib->soname);
      logf_debug("%s", lib->error);
      return;
    }
  }
  lib->nmissing = 0;
  bind_symbols(which, lib);
  if (lib->nmissing == lib->nsyms) {
    lib->state = RDMADL_STATE_INCOMPATIBLE;
    lib->error = dup_printf("%s exports none of its %zu symbols at their %s* version nodes",
                            lib->path ? lib->path : lib->requested, lib->nsyms, lib->node_fmt);
  } else {
    lib->state = lib->nmissing ? RDMADL_STATE_PARTIAL : RDMADL_STATE_LOADED;
  }
}

static int usable(rdmadl_state s) {
  return s == RDMADL_STATE_LOADED || s == RDMADL_STATE_PARTIAL;
}

static void build_reason(void) {
  const struct lib_info *v = &libs[RDMADL_LIB_IBVERBS], *c = &libs[RDMADL_LIB_RDMACM];
  switch (v->state) {
  case RDMADL_STATE_DISABLED:
    snprintf(reason, sizeof reason, "RDMA disabled by RDMADL_DISABLE");
    return;
  case RDMADL_STATE_LOADED:
  case RDMADL_STATE_PARTIAL:
    break;
  default:
    snprintf(reason, sizeof reason, "%s %s: %s", v->requested, rdmadl_state_name(v->state),
             v->error ? v->error : "unknown error");
    return;
  }
  int n = snprintf(reason, sizeof reason, "%s loaded (%s, %s", v->path ? v->path : v->requested,
                   v->node[0] ? v->node : "no version node", rdmadl_state_name(v->state));
  if (v->nmissing && n > 0 && (size_t)n < sizeof reason)
    n += snprintf(reason + n, sizeof reason - (size_t)n, ": %zu of %zu symbols missing",
                  v->nmissing, v->nsyms);
  if (n > 0 && (size_t)n < sizeof reason) {
    if (usable(c->state))
      snprintf(reason + n, sizeof reason - (size_t)n, "); librdmacm %s",
               rdmadl_state_name(c->state));
    else
      snprintf(reason + n, sizeof reason - (size_t)n, "); librdmacm %s: %s",
               rdmadl_state_name(c->state), c->error ? c->error : "unknown error");
  }
}

static void load_all(void) {
  int saved = errno;
  debug = env_flag("RDMADL_DEBUG");
  /* Until something binds, every symbol of each library is missing. */
  for (size_t k = 0; k < RDMADL_NSYMS; k++)
    libs[rdmadl_sym_meta[k].lib].nsyms++;
  for (int i = 0; i < 2; i++)
    libs[i].nmissing = libs[i].nsyms;
  if (env_flag("RDMADL_DISABLE")) {
    for (int i = 0; i < 2; i++) {
      libs[i].state = RDMADL_STATE_DISABLED;
      libs[i].requested = libs[i].soname;
      libs[i].error = dup_printf("disabled by RDMADL_DISABLE");
    }
    logf_debug("disabled by RDMADL_DISABLE");
  } else {
    load_one(RDMADL_LIB_IBVERBS);
    if (usable(libs[RDMADL_LIB_IBVERBS].state)) {
      load_one(RDMADL_LIB_RDMACM);
    } else {
      struct lib_info *c = &libs[RDMADL_LIB_RDMACM];
      const char *override = secure_getenv(c->env);
      c->requested = (override && *override) ? override : c->soname;
      c->state = RDMADL_STATE_SKIPPED;
      c->error = dup_printf("not loaded because libibverbs is unusable");
    }
  }
  build_reason();
  logf_debug("%s", reason);
  errno = saved;
}

__attribute__((constructor)) static void rdmadl_constructor(void) {
  rdmadl_load();
}

void *rdmadl_resolve_slow(enum rdmadl_sym_index idx) {
  int saved = errno;
  const char *path = loading_path;
  void *f = NULL;
  if (path) {
    /* Re-entered from inside our own dlopen on this thread. */
    const struct rdmadl_sym_meta *m = &rdmadl_sym_meta[idx];
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (h) {
      f = dlvsym(h, m->name, m->node);
      if (in_self(f))
        f = NULL;
    }
    logf_debug("%s@%s requested during dlopen: %p", m->name, m->node, f);
  } else {
    pthread_once(&load_once, load_all);
    f = __atomic_load_n(&rdmadl_fn[idx], __ATOMIC_ACQUIRE);
  }
  errno = saved;
  return f;
}

static void ensure(void) {
  if (!loading_path)
    pthread_once(&load_once, load_all);
}

int rdmadl_load(void) {
  ensure();
  return usable(libs[RDMADL_LIB_IBVERBS].state) ? 0 : EOPNOTSUPP;
}

static const struct lib_info *lib_at(rdmadl_lib lib) {
  ensure();
  return (lib == RDMADL_LIB_IBVERBS || lib == RDMADL_LIB_RDMACM) ? &libs[lib] : NULL;
}

rdmadl_state rdmadl_lib_state(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l ? l->state : RDMADL_STATE_NOT_FOUND;
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
  }
  return "unknown";
}

const char *rdmadl_lib_requested(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l ? l->requested : NULL;
}

const char *rdmadl_lib_path(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l ? l->path : NULL;
}

const char *rdmadl_lib_error(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l ? l->error : NULL;
}

const char *rdmadl_lib_version_node(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l && l->node[0] ? l->node : NULL;
}

size_t rdmadl_lib_symbol_count(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l ? l->nsyms : 0;
}

size_t rdmadl_lib_missing_count(rdmadl_lib lib) {
  const struct lib_info *l = lib_at(lib);
  return l ? l->nmissing : 0;
}

const char *rdmadl_lib_missing_symbol(rdmadl_lib lib, size_t i) {
  if (!lib_at(lib))
    return NULL;
  for (size_t k = 0; k < RDMADL_NSYMS; k++) {
    if (rdmadl_sym_meta[k].lib != lib || __atomic_load_n(&rdmadl_fn[k], __ATOMIC_ACQUIRE))
      continue;
    if (i-- == 0)
      return rdmadl_sym_meta[k].name;
  }
  return NULL;
}

int rdmadl_symbol_status(const char *name, const char **node) {
  ensure();
  for (size_t k = 0; name && k < RDMADL_NSYMS; k++) {
    if (strcmp(rdmadl_sym_meta[k].name, name) != 0)
      continue;
    if (node)
      *node = rdmadl_sym_meta[k].node;
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
  return rdmadl_sym_meta[i].name;
}

rdmadl_stack rdmadl_stack_state(void) {
  ensure();
  if (libs[RDMADL_LIB_IBVERBS].state == RDMADL_STATE_DISABLED)
    return RDMADL_STACK_DISABLED;
  struct ibv_device **(*get)(int *) = (struct ibv_device * *(*)(int *))
      __atomic_load_n(&rdmadl_fn[RDMADL_IDX_ibv_get_device_list], __ATOMIC_ACQUIRE);
  void (*release)(struct ibv_device **) = (void (*)(struct ibv_device **))__atomic_load_n(
      &rdmadl_fn[RDMADL_IDX_ibv_free_device_list], __ATOMIC_ACQUIRE);
  if (!get || !release)
    return RDMADL_STACK_NO_LIBRARY;
  int saved = errno, n = 0;
  errno = 0;
  struct ibv_device **list = get(&n);
  int err = errno;
  errno = saved;
  if (!list)
    return err == ENOSYS ? RDMADL_STACK_NO_KERNEL_SUPPORT : RDMADL_STACK_NO_DEVICES;
  release(list);
  return n > 0 ? RDMADL_STACK_READY : RDMADL_STACK_NO_DEVICES;
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
  ensure();
  return reason;
}

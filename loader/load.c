/* SPDX-License-Identifier: MIT */
/*
 * The run-time loader: dlopens libibverbs.so.1 and librdmacm.so.1 once, binds
 * their symbols of symbols.def at their version nodes (in librdmadl-verbs.a
 * those the program links first, the rest when needed: bind.c), and records
 * what it found for include/rdmadl/loader.h.
 *
 * Loading happens in a constructor and on the first call of any stub, so
 * nothing depends on constructor order. The libraries are never dlclosed.
 * The providers' direct-verbs libraries and libibumad ("lazy" libraries) are
 * loaded only on the first call of one of their functions, under one mutex,
 * so a program that never uses them pays nothing at start-up. librdmacm is
 * loaded by the constructor when the program uses it (cm_used below) and
 * otherwise the way a lazy library is, on its first call: a program that
 * calls no rdma_* function pays for librdmacm no more than a directly linked
 * one, which has no NEEDED on it.
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
 * This file is the load itself; libs.h says which file does the rest.
 *
 * One load per process, tracked by rdmadl_load_state. A stub called back while this
 * thread is inside dlopen (a library's constructor calling an exported ibv_*
 * name that binds to a drop-in stub) resolves that one symbol from the object
 * being loaded. Another thread waits; if it has waited DEADLOCK_SECONDS while
 * the loader is still inside dlopen (a constructor that joins a thread which
 * calls verbs), its call fails instead of hanging. A fork() child whose
 * loading thread is gone loads again from scratch.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "libs.h"

enum { DEADLOCK_SECONDS = 5 };

/* Keeps the object this loader is in mapped for the rest of the process:
 * the strings the diagnostics return (and every library path, error and
 * state name) live in it, and a caller may keep them after dlclosing a
 * plugin that embeds the static drop-in. The shared drop-in is linked
 * -z nodelete for the same reason; the program itself is never unloaded. */
#ifndef RDMADL_DROPIN_SHARED
/* The start of the object this code is linked into: its ELF header, and
 * its program headers after it (GNU ld, gold, lld and mold define it when
 * the headers are mapped). An array of unknown size, as it is read past
 * the header. */
extern const unsigned char __ehdr_start[] __attribute__((weak, visibility("hidden")));

/* 1 when this code is part of the program, 0 when of a shared object, -1
 * when its own headers cannot say. A program is ET_EXEC or, as a PIE, has
 * an interpreter; a shared library has neither. No libc call: each first
 * call of a libc function costs a symbol lookup at start-up. */
static int in_program(void) {
  const unsigned char *start = __ehdr_start;
  if (!start)
    return -1;
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)start;
  if (eh->e_type == ET_EXEC)
    return 1;
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(start + eh->e_phoff);
  for (ElfW(Half) i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_INTERP)
      return 1;
  return 0;
}

/* dl_iterate_phdr's first object is the program: 1 when ADDR is in one of
 * its loadable segments, 2 when not (either stops the walk). */
static int in_first_object(struct dl_phdr_info *info, size_t size, void *addr) {
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
  int program = in_program();
  if (program == 1 || (program < 0 && dl_iterate_phdr(in_first_object, (void *)&pin_self) == 1))
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

#ifdef RDMADL_DROPIN_SHARED
/* Whether the program uses librdmacm. The shared drop-in holds every stub,
 * so it asks the objects loaded with it: one linked against rdma_*
 * functions (the drop-in's or rdma-core's) requires an RDMACM_1.x version
 * node. An object dlopened later finds librdmacm loaded on its first call. */
static int cm_used(void) {
  /* The namespace's list of objects, from the libibverbs just loaded (no
   * _r_debug: one relocation less to process at start-up). */
  const struct link_map *m = rdmadl_libs[RDMADL_LIB_IBVERBS].map;
  while (m && m->l_prev)
    m = m->l_prev;
  for (; m; m = m->l_next)
    if (rdmadl_elf_needs_node(m, RDMADL_PREFIX_CM))
      return 1;
  return 0;
}
#elif defined(RDMADL_BIND_LINKED)
/* librdmadl-verbs.a: a linked stub of librdmacm's recorded its row. */
static int cm_used(void) {
  return rdmadl_linked_rows(&rdmadl_libs[RDMADL_LIB_RDMACM]) != 0;
}
#else
/* Defined by stubs_cm.c: in a static library the linker brings that object
 * in only when something calls one of librdmacm's stubs. */
extern const char rdmadl_cm_linked __attribute__((weak, visibility("hidden")));
static int cm_used(void) {
  return &rdmadl_cm_linked != NULL;
}
#endif

/* The uncontended load takes no lock: LOAD_NONE -> LOAD_RUNNING by
 * compare-and-swap, LOAD_DONE published with a store. Threads that must wait
 * announce themselves in nwaiters first, then sleep on load_cv; the loader
 * broadcasts only when nwaiters says someone may be there (both sides use
 * sequentially consistent operations, so one of them always sees the other). */
int rdmadl_load_state; /* atomic */
/* Set in the loading thread while LOAD_RUNNING (a thread-local flag, not
 * pthread_self(): one libc function less to bind at start-up). */
static __thread int loading_here RDMADL_TLS_IE;
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
void *rdmadl_loader_dlopen(const char *name, int flags) {
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

/* Loads both libraries from scratch (a fork child may run it again after
 * its parent's loading thread was cut off midway). Returns 0 without
 * deciding anything when the environment cannot be read. */
static int load_all(void) {
  int saved = errno;
  struct rdmadl_env env;
  if (!rdmadl_env_read(&env)) {
    errno = saved;
    return 0;
  }
  const char *dbg = env.debug, *dis = env.disable;
  int debug_understood, level = rdmadl_parse_debug_level(dbg, &debug_understood);
  rdmadl_log_set_env_level(level);
  /* A load again (a fork child whose parent's loading thread was cut off)
   * starts from an empty table; the first one finds it empty (382 stores
   * were 1.5 k instructions of every start-up). Only this thread exists
   * then. */
  static int loaded_before;
  if (loaded_before)
    memset(rdmadl_fn, 0, sizeof rdmadl_fn);
  loaded_before = 1;
  for (int i = 0; i < RDMADL_LIB_COUNT; i++) {
    struct lib_info *l = &rdmadl_libs[i];
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
    __atomic_store_n(&l->rest, 0, __ATOMIC_RELAXED);
    /* Only this load ever set it (a strdup of RDMADL_<LIB>_PATH): a load
     * again frees the cut-off load's copy instead of leaking it. */
    if (l->lazy_override) {
      free(l->lazy_override);
      l->lazy_override = NULL;
    }
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
  rdmadl_reason_text = NULL;
  rdmadl_reason_text_cm_unused = NULL;
  int disable = rdmadl_parse_bool(dis);
  if (disable < 0)
    WARNF("RDMADL_DISABLE=%s is not a boolean (1/true/yes/on, 0/false/no/off); ignored", dis);
  if (!debug_understood)
    WARNF("RDMADL_DEBUG=%s is not understood (0, 1, 2, info, debug, symbols); logging the summary",
          dbg);
  if (disable == 1) {
    for (int i = 0; i < RDMADL_LIB_COUNT; i++) {
      rdmadl_libs[i].state = RDMADL_STATE_DISABLED;
      rdmadl_libs[i].error = "disabled by RDMADL_DISABLE";
      __atomic_store_n(&rdmadl_libs[i].lazy_done, 1, __ATOMIC_RELEASE);
    }
    DEBUGF("%s", RDMADL_DISABLED_SENTENCE);
  } else {
    rdmadl_load_one(RDMADL_LIB_IBVERBS, env.path[RDMADL_LIB_IBVERBS]);
    struct lib_info *c = &rdmadl_libs[RDMADL_LIB_RDMACM];
    if (rdmadl_usable(rdmadl_libs[RDMADL_LIB_IBVERBS].state)) {
      if (cm_used()) {
        rdmadl_load_one(RDMADL_LIB_RDMACM, c->lazy_override);
        __atomic_store_n(&c->lazy_done, 1, __ATOMIC_RELEASE);
      } else {
        DEBUGF("%s: %s; loaded on its first call", c->soname, RDMADL_CM_UNUSED_ERROR);
      }
    } else {
      c->state = RDMADL_STATE_SKIPPED;
      c->error = "not loaded because libibverbs is unusable";
      __atomic_store_n(&c->lazy_done, 1, __ATOMIC_RELEASE);
      /* Nor is any provider library: each belongs to a libibverbs. */
      for (int i = 0; i < RDMADL_LIB_COUNT; i++)
        if (rdmadl_libs[i].kind == KIND_PROVIDER) {
          rdmadl_libs[i].state = RDMADL_STATE_SKIPPED;
          rdmadl_libs[i].error = "not loaded because libibverbs is unusable";
          __atomic_store_n(&rdmadl_libs[i].lazy_done, 1, __ATOMIC_RELEASE);
        }
    }
  }
  if (rdmadl_libs[RDMADL_LIB_IBVERBS].state == RDMADL_STATE_DISABLED) {
    INFOF("%s", RDMADL_DISABLED_SENTENCE);
  } else {
    rdmadl_log_lib_summary(&rdmadl_libs[RDMADL_LIB_IBVERBS]);
    rdmadl_log_lib_summary(&rdmadl_libs[RDMADL_LIB_RDMACM]);
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
  rdmadl_log_after_fork();
  rdmadl_verdict_after_fork();
#ifdef RDMADL_BIND_LINKED
  rdmadl_bind_after_fork();
#endif
  if (__atomic_load_n(&lazy_busy, __ATOMIC_RELAXED) &&
      !pthread_equal(__atomic_load_n(&lazy_owner, __ATOMIC_RELAXED), pthread_self()))
    __atomic_store_n(&lazy_busy, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&nwaiters, 0, __ATOMIC_RELAXED);
  if (__atomic_load_n(&rdmadl_load_state, __ATOMIC_RELAXED) == LOAD_RUNNING && !loading_here) {
    __atomic_store_n(&loader_in_dlopen, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&rdmadl_load_state, LOAD_NONE, __ATOMIC_RELAXED);
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
    int s = __atomic_load_n(&rdmadl_load_state, __ATOMIC_SEQ_CST);
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
      /* clock_gettime's own GLIBC_2.17 version node would be one more to
       * check at every start-up; this wait is rare. */
      syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &deadline);
      deadline.tv_sec += DEADLOCK_SECONDS;
    }
    if (pthread_cond_clockwait(&load_cv, &load_mu, CLOCK_MONOTONIC, &deadline) == ETIMEDOUT &&
        __atomic_load_n(&rdmadl_load_state, __ATOMIC_SEQ_CST) == LOAD_RUNNING &&
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

int rdmadl_ensure_slow(const char *what) {
  for (;;) {
    int s = __atomic_load_n(&rdmadl_load_state, __ATOMIC_ACQUIRE);
    if (s == LOAD_DONE)
      return ENSURE_DONE;
    if (s == LOAD_NONE) {
      if (__atomic_compare_exchange_n(&rdmadl_load_state, &s, LOAD_RUNNING, 0, __ATOMIC_SEQ_CST,
                                      __ATOMIC_ACQUIRE))
        break;
      continue;
    }
    if (loading_here)
      return ENSURE_REENTERED;
    int r = wait_for_load(what);
    if (r != ENSURE_RETRY)
      return r;
  }
  loading_here = 1;
  const int first = !__atomic_exchange_n(&atfork_registered, 1, __ATOMIC_RELAXED);
  if (first)
    pthread_atfork(NULL, NULL, after_fork_child);
  int latched = load_all();
  if (first)
    pin_self();
  __atomic_store_n(&rdmadl_load_state, latched ? LOAD_DONE : LOAD_NONE, __ATOMIC_SEQ_CST);
  loading_here = 0;
  wake_waiters();
  /* The summary ends with the verdict (it lists the devices: only asked). */
  if (latched && rdmadl_log_on(RDMADL_LOG_INFO)) {
    int saved = errno;
    rdmadl_stack st;
    int ok;
    char *raw = rdmadl_build_verdict(&st, &ok);
    INFOF("verdict: %s", raw ? raw : "out of memory");
    free(raw);
    errno = saved;
  }
  return latched ? ENSURE_DONE : ENSURE_FAILED;
}

__attribute__((constructor)) static void rdmadl_constructor(int argc, char **argv, char **envp) {
  (void)argc;
  (void)argv;
  __atomic_store_n(&rdmadl_ctor_envp, envp, __ATOMIC_RELEASE);
  rdmadl_ensure();
  __atomic_store_n(&rdmadl_ctor_envp, NULL, __ATOMIC_RELEASE);
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
    rdmadl_elf_view_init(&v, map, rdmadl_libs[rdmadl_sym_meta[idx].lib].prefix);
    int fallback = 0;
    if (!v.rdmadl) {
      f = rdmadl_elf_lookup(&v, idx, &fallback);
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
void rdmadl_load_lazy(struct lib_info *lib) {
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
    rdmadl_load_one((rdmadl_lib)(lib - rdmadl_libs), lib->lazy_override);
    rdmadl_log_lib_summary(lib);
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
  switch (rdmadl_ensure_named(rdmadl_sym_name(idx))) {
  case ENSURE_DONE:
    f = __atomic_load_n(&rdmadl_fn[idx], __ATOMIC_ACQUIRE);
    if (!f) {
      /* A row the load left for later (bind.c), or one the library lacks. */
      rdmadl_bind_rest();
      f = __atomic_load_n(&rdmadl_fn[idx], __ATOMIC_ACQUIRE);
    }
    if (!f && rdmadl_libs[rdmadl_sym_meta[idx].lib].kind != KIND_EAGER) {
      rdmadl_load_lazy(&rdmadl_libs[rdmadl_sym_meta[idx].lib]);
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
  rdmadl_ensure_bound();
  return rdmadl_usable(rdmadl_libs[RDMADL_LIB_IBVERBS].state) ? 0 : EOPNOTSUPP;
}

int rdmadl_lazy_pending(const struct lib_info *l) {
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

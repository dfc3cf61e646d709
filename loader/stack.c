/* SPDX-License-Identifier: MIT */
/*
 * The stack's state and the verdict: whether RDMA works here (library,
 * kernel support, devices, an active port), asked of libibverbs each time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "libs.h"

#undef ibv_get_device_list

/* Every distinct verdict sentence given out, so that each stays valid. */
static pthread_mutex_t verdict_mu = PTHREAD_MUTEX_INITIALIZER;
struct interned {
  struct interned *next;
  char *text;
};
static struct interned *verdicts;

void rdmadl_verdict_after_fork(void) {
  pthread_mutex_init(&verdict_mu, NULL);
}

/* The errno that libibverbs sets: its libc's. In a program linked -static,
 * dlopen gives the library a libc of its own whose errno is not the
 * program's, so the cause (ENOSYS: no kernel support) is read from there. */
#define RDMADL_FN_LOADED(name)                                                                     \
  ((__typeof__(&name))__atomic_load_n(&rdmadl_fn[RDMADL_IDX_##name], __ATOMIC_ACQUIRE))

static int *library_errno(void) {
  void *h = rdmadl_libs[RDMADL_LIB_IBVERBS].handle;
  int *(*loc)(void) = h ? (int *(*)(void))dlsym(h, "__errno_location") : NULL;
  return loc ? loc() : &errno;
}

/* The stack's state as last seen (refusal.h): an rdmadl_stack, or -1. */
static int stack_seen = -1; /* atomic */

rdmadl_stack rdmadl_stack_seen(void) {
  int s = __atomic_load_n(&stack_seen, __ATOMIC_RELAXED);
  return s >= 0 ? (rdmadl_stack)s : rdmadl_stack_state();
}

void rdmadl_stack_seen_note(rdmadl_stack state) {
  __atomic_store_n(&stack_seen, (int)state, __ATOMIC_RELAXED);
}

/* Asks libibverbs for its device list once: the stack's state, the list
 * (NULL unless READY; the caller frees it) and the errno of a failure. */
static rdmadl_stack list_devices_now(struct ibv_device ***out, int *n, int *err) {
  *out = NULL;
  *n = 0;
  *err = 0;
  if (rdmadl_libs[RDMADL_LIB_IBVERBS].state == RDMADL_STATE_DISABLED)
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

/* list_devices_now, remembered as the state last seen. */
static rdmadl_stack list_devices(struct ibv_device ***out, int *n, int *err) {
  rdmadl_stack st = list_devices_now(out, n, err);
  rdmadl_stack_seen_note(st);
  return st;
}

rdmadl_stack rdmadl_stack_state(void) {
  rdmadl_ensure_bound();
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
  va_list ap;
  va_start(ap, fmt);
  char *more = rdmadl_vdup_printf(fmt, ap);
  va_end(ap);
  char *joined = more ? rdmadl_dup_printf("%s%s", b->s ? b->s : "", more) : NULL;
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
    out = rdmadl_dup_printf("RDMA is usable: %d device%s (%s), active: %s%s", n, n == 1 ? "" : "s",
                            names.s ? names.s : "", active.s ? active.s : "",
                            nactive > VERDICT_MAX_NAMED ? ", ..." : "");
  else if (!opened && failed)
    out = rdmadl_dup_printf("RDMA devices exist (%s) but none can be opened (%s: %s)",
                            names.s ? names.s : "", failed,
                            open_err ? strerror(open_err) : "ibv_open_device failed");
  else
    out = rdmadl_dup_printf("RDMA devices exist (%s) but no port is active: bring a link up "
                            "(Soft-RoCE: its network interface must be up)",
                            names.s ? names.s : "");
  free(names.s);
  free(active.s);
  return out;
}

/* The verdict, unescaped: one sentence and what the stack is. */
char *rdmadl_build_verdict(rdmadl_stack *stack_out, int *usable_out) {
  *usable_out = 0;
  rdmadl_bind_rest();
  struct lib_info *v = &rdmadl_libs[RDMADL_LIB_IBVERBS];
  struct ibv_device **list;
  int n, err;
  rdmadl_stack st = list_devices(&list, &n, &err);
  *stack_out = st;
  char *out = NULL;
  switch (st) {
  case RDMADL_STACK_DISABLED:
    out = strdup(RDMADL_DISABLED_SENTENCE);
    break;
  case RDMADL_STACK_NO_LIBRARY: {
    char *d = rdmadl_describe_lib(v);
    const char *hint = "";
    if (v->state == RDMADL_STATE_NOT_FOUND && v->requested == v->soname)
      hint = ": install rdma-core's libibverbs (Debian/Ubuntu: libibverbs1 and "
             "ibverbs-providers; Fedora/RHEL: libibverbs)";
    out = rdmadl_dup_printf("no usable libibverbs: %s%s", d ? d : "?", hint);
    free(d);
    break;
  }
  case RDMADL_STACK_NO_KERNEL_SUPPORT: {
    const char *path = rdmadl_lib_file(v);
    out = rdmadl_dup_printf("libibverbs is installed (%s) but the kernel has no RDMA support "
                            "(ibv_get_device_list: ENOSYS): load an RDMA driver, or Soft-RoCE: "
                            "modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IFACE",
                            path ? path : v->requested);
    break;
  }
  case RDMADL_STACK_NO_DEVICES:
    out = err ? rdmadl_dup_printf("the kernel supports RDMA but the devices cannot be listed "
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

/* S (escaped, allocated) from the list of given-out sentences: the list
 * keeps S when it is new, else S is freed. Nothing is copied (a memcpy call
 * would need one more GLIBC_* version node at every start-up). */
static const char *intern(char *s) {
  pthread_mutex_lock(&verdict_mu);
  struct interned *e = verdicts;
  for (; e; e = e->next)
    if (strcmp(e->text, s) == 0)
      break;
  if (e) {
    free(s);
  } else if ((e = malloc(sizeof *e)) != NULL) {
    e->text = s;
    e->next = verdicts;
    verdicts = e;
  } else {
    free(s);
  }
  pthread_mutex_unlock(&verdict_mu);
  return e ? e->text : NULL;
}

const char *rdmadl_verdict_state(rdmadl_stack *stack, int *usable_out) {
  rdmadl_stack st = RDMADL_STACK_NO_LIBRARY;
  int ok = 0;
  const char *out;
  if (rdmadl_ensure_bound() != ENSURE_DONE) {
    out = "rdmadl has not loaded rdma-core yet";
  } else {
    char *raw = rdmadl_build_verdict(&st, &ok);
    char *esc = raw ? rdmadl_escape_dup(raw) : NULL;
    out = esc ? intern(esc) : NULL;
    free(raw);
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

/* The names of the values 0 to RDMADL_STACK_READY, in order. */
static const char stack_names[][24] = {"disabled", "no-library", "no-kernel-support", "no-devices",
                                       "ready"};
_Static_assert(sizeof stack_names / sizeof stack_names[0] == RDMADL_STACK_READY + 1,
               "a name for each value");

const char *rdmadl_stack_name(rdmadl_stack value) {
  return RDMADL_NAME_IN(stack_names, value);
}

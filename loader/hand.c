/* SPDX-License-Identifier: MIT */
/*
 * The HAND and EMU entries of symbols.def: stubs whose failure or fallback
 * needs more than the generated form. Compiled in both modes, like stubs.c.
 *
 * An EMU stub forwards to the loaded library when it has the symbol and
 * otherwise runs a fallback built only from calls that library has, with the
 * semantics rdma-core 65.0 gives the call (read from its source and man pages
 * and checked against its build). Fallbacks call the dispatch table, never an
 * exported ibv_* name: in the shared drop-in that name could bind to another
 * copy of libibverbs in the process.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "extra_decls.h"
#include "internal.h"
#include "rdmadl/loader.h"
#include "str_tables.h"

#undef ibv_get_device_list
#undef ibv_reg_mr

#define RDMADL_FN(name) ((__typeof__(&name))rdmadl_load_fn(RDMADL_IDX_##name))

/* Same contract as ibv_get_device_list(3), and *num_devices = 0 on failure. */
RDMADL_STUB_API struct ibv_device **RDMADL_NAME(ibv_get_device_list)(int *num_devices) {
  __typeof__(&ibv_get_device_list) f = RDMADL_FN(ibv_get_device_list);
  if (f)
    return f(num_devices);
  if (num_devices)
    *num_devices = 0;
  rdmadl_refuse(RDMADL_IDX_ibv_get_device_list);
  return NULL;
}

/* ibv_reg_mr_iova2 itself, or its fallback: on a library older than
 * IBVERBS_1.8, iova == addr is exactly what ibv_reg_mr always did. */
static struct ibv_mr *reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                   unsigned int access) {
  __typeof__(&ibv_reg_mr_iova2) f = RDMADL_FN(ibv_reg_mr_iova2);
  if (f)
    return f(pd, addr, length, iova, access);
  __typeof__(&ibv_reg_mr) old = RDMADL_FN(ibv_reg_mr);
  if (old && iova == (uint64_t)(uintptr_t)addr)
    return old(pd, addr, length, (int)access);
  rdmadl_refuse(RDMADL_IDX_ibv_reg_mr_iova2);
  return NULL;
}

/* rdma-core 65.0's ibv_reg_mr() inline calls ibv_reg_mr_iova2 (IBVERBS_1.8). */
RDMADL_STUB_API struct ibv_mr *RDMADL_NAME(ibv_reg_mr_iova2)(struct ibv_pd *pd, void *addr,
                                                             size_t length, uint64_t iova,
                                                             unsigned int access) {
  return reg_mr_iova2(pd, addr, length, iova, access);
}

/*
 * ibv_buf (IBVERBS_1.17) on an older library. rdma-core 65.0 gives a provider
 * without its own allocator (rxe, and every provider of an older release) a
 * default: a calloc'd handle holding base, size, PD and "no dma-buf" (fd -1),
 * the memory from posix_memalign at the page size, a plain registration of
 * any range inside it by the PD that allocated it, and ENODATA when asked for
 * its dma-buf. The fallback is that default. Whether ibv_buf calls go to the
 * fallbacks is decided once per process, by the library alone: without
 * ibv_alloc_buf every handle the program holds is a fallback one, so none
 * ever reaches the library and no library handle ever reaches a fallback.
 */
struct rdmadl_buf {
  void *addr;
  size_t length;
  struct ibv_pd *pd;
  int fd; /* -1: not backed by a dma-buf */
  uint32_t tag;
};
#define RDMADL_BUF_TAG 0x72646d62u

static bool bufs_emulated(void) {
  return rdmadl_load() == 0 && !RDMADL_FN(ibv_alloc_buf);
}

/* The fallback handle behind BUF, or NULL when BUF is not one. */
static struct rdmadl_buf *own_buf(struct ibv_buf *buf) {
  struct rdmadl_buf *b = (struct rdmadl_buf *)buf;
  return b && b->tag == RDMADL_BUF_TAG ? b : NULL;
}

RDMADL_STUB_API void *RDMADL_NAME(ibv_alloc_buf)(struct ibv_pd *pd, size_t size,
                                                 struct ibv_buf **buf) {
  __typeof__(&ibv_alloc_buf) f = RDMADL_FN(ibv_alloc_buf);
  if (f)
    return f(pd, size, buf);
  if (!bufs_emulated()) {
    rdmadl_refuse(RDMADL_IDX_ibv_alloc_buf);
    return NULL;
  }
  if (!buf) {
    errno = EINVAL;
    return NULL;
  }
  struct rdmadl_buf *b = calloc(1, sizeof *b);
  if (!b) {
    errno = ENOMEM;
    return NULL;
  }
  long page = sysconf(_SC_PAGESIZE);
  void *mem = NULL;
  int ret = posix_memalign(&mem, page > 0 ? (size_t)page : 4096, size);
  if (ret) {
    free(b);
    errno = ret;
    return NULL;
  }
  *b = (struct rdmadl_buf){.addr = mem, .length = size, .pd = pd, .fd = -1, .tag = RDMADL_BUF_TAG};
  *buf = (struct ibv_buf *)b;
  return mem;
}

RDMADL_STUB_API void RDMADL_NAME(ibv_free_buf)(struct ibv_buf *buf) {
  __typeof__(&ibv_free_buf) f = RDMADL_FN(ibv_free_buf);
  if (f && !bufs_emulated()) {
    f(buf);
    return;
  }
  if (!bufs_emulated()) {
    errno = EOPNOTSUPP;
    return;
  }
  struct rdmadl_buf *b = own_buf(buf);
  if (!b) {
    errno = EINVAL;
    return;
  }
  b->tag = 0;
  free(b->addr);
  free(b);
}

/* 65.0 answers ENODATA for a buffer without a dma-buf, which every fallback
 * buffer is. */
RDMADL_STUB_API int RDMADL_NAME(ibv_export_buf_dmabuf_fd)(struct ibv_buf *buf) {
  __typeof__(&ibv_export_buf_dmabuf_fd) f = RDMADL_FN(ibv_export_buf_dmabuf_fd);
  if (f && !bufs_emulated())
    return f(buf);
  errno = !bufs_emulated() ? EOPNOTSUPP : own_buf(buf) ? ENODATA : EINVAL;
  return -1;
}

enum {
  REG_MR_KNOWN =
      IBV_REG_MR_MASK_IOVA | IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET,
};

/*
 * ibv_reg_mr_ex (IBVERBS_1.15) from older calls, with 65.0's checks: a BUF
 * request is checked against its (fallback) buffer and becomes a plain ADDR
 * registration; then, as 65.0's generic path for providers without their own
 * reg_mr_ex: DMAH or an unknown bit is EOPNOTSUPP; FD needs FD_OFFSET and IOVA
 * and no ADDR, and is ibv_reg_dmabuf_mr; otherwise ADDR without FD_OFFSET is
 * ibv_reg_mr_iova2 at IOVA (default: addr); anything else is EINVAL.
 */
static struct ibv_mr *reg_mr_ex_fallback(struct ibv_pd *pd, const struct ibv_mr_init_attr *in) {
  struct ibv_mr_init_attr a = *in;
  if (a.comp_mask & IBV_REG_MR_MASK_BUF) {
    struct rdmadl_buf *b = own_buf(a.buf);
    uintptr_t at = (uintptr_t)a.addr, base = b ? (uintptr_t)b->addr : 0;
    if (!b || b->pd != pd || !(a.comp_mask & IBV_REG_MR_MASK_ADDR) || at < base ||
        at - base > b->length || b->length - (at - base) < a.length ||
        (a.comp_mask & (IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET))) {
      errno = EINVAL;
      return NULL;
    }
    a.comp_mask &= ~(uint64_t)IBV_REG_MR_MASK_BUF;
    a.buf = NULL;
  }
  __typeof__(&ibv_reg_mr_ex) real = RDMADL_FN(ibv_reg_mr_ex);
  if (real)
    return real(pd, &a);
  if (a.comp_mask & ~(uint64_t)REG_MR_KNOWN) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  uint64_t addr_or_offset = a.comp_mask & (IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_FD_OFFSET);
  if (a.comp_mask & IBV_REG_MR_MASK_FD) {
    if (addr_or_offset != IBV_REG_MR_MASK_FD_OFFSET || !(a.comp_mask & IBV_REG_MR_MASK_IOVA)) {
      errno = EINVAL;
      return NULL;
    }
    __typeof__(&ibv_reg_dmabuf_mr) dmabuf = RDMADL_FN(ibv_reg_dmabuf_mr);
    if (!dmabuf) {
      rdmadl_refuse(RDMADL_IDX_ibv_reg_dmabuf_mr);
      return NULL;
    }
    return dmabuf(pd, a.fd_offset, a.length, a.iova, a.fd, a.access);
  }
  if (addr_or_offset != IBV_REG_MR_MASK_ADDR) {
    errno = EINVAL;
    return NULL;
  }
  uint64_t iova = (a.comp_mask & IBV_REG_MR_MASK_IOVA) ? a.iova : (uint64_t)(uintptr_t)a.addr;
  return reg_mr_iova2(pd, a.addr, a.length, iova, (unsigned int)a.access);
}

RDMADL_STUB_API struct ibv_mr *RDMADL_NAME(ibv_reg_mr_ex)(struct ibv_pd *pd,
                                                          struct ibv_mr_init_attr *mr_init_attr) {
  __typeof__(&ibv_reg_mr_ex) f = RDMADL_FN(ibv_reg_mr_ex);
  bool emulated_buf =
      mr_init_attr && (mr_init_attr->comp_mask & IBV_REG_MR_MASK_BUF) && bufs_emulated();
  if (f && !emulated_buf)
    return f(pd, mr_init_attr);
  if (rdmadl_load() != 0) {
    rdmadl_refuse(RDMADL_IDX_ibv_reg_mr_ex);
    return NULL;
  }
  if (!mr_init_attr) {
    errno = EINVAL;
    return NULL;
  }
  return reg_mr_ex_fallback(pd, mr_init_attr);
}

/* 65.0's ibv_reg_buf_mr is ibv_reg_mr_ex(ADDR | BUF). */
RDMADL_STUB_API struct ibv_mr *RDMADL_NAME(ibv_reg_buf_mr)(struct ibv_pd *pd, struct ibv_buf *buf,
                                                           void *addr, size_t length, int access) {
  __typeof__(&ibv_reg_buf_mr) f = RDMADL_FN(ibv_reg_buf_mr);
  if (f && !bufs_emulated())
    return f(pd, buf, addr, length, access);
  if (!bufs_emulated()) {
    rdmadl_refuse(RDMADL_IDX_ibv_reg_buf_mr);
    return NULL;
  }
  struct ibv_mr_init_attr a = {.length = length,
                               .access = access,
                               .comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_BUF,
                               .addr = addr,
                               .buf = buf};
  return reg_mr_ex_fallback(pd, &a);
}

/* Reads one GID attribute the way libibverbs < 1.11 users did: from sysfs. */
static int gid_attr(struct ibv_context *ctx, uint32_t port, uint32_t index, const char *what,
                    char *buf, size_t size) {
  __typeof__(&ibv_get_device_name) name = RDMADL_FN(ibv_get_device_name);
  const char *dev = name ? name(ctx->device) : NULL;
  if (!dev)
    return -1;
  char path[256];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/gid_attrs/%s/%u", dev, port, what,
           index);
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
    n--;
  buf[n] = '\0';
  return 0;
}

/* One GID entry from ibv_query_gid + sysfs. Returns 0 or an errno value. */
static int gid_entry_fallback(struct ibv_context *ctx, uint32_t port, uint32_t index,
                              struct ibv_gid_entry *entry) {
  __typeof__(&ibv_query_gid) query = RDMADL_FN(ibv_query_gid);
  __typeof__(&ibv_query_port) qport = RDMADL_FN(ibv_query_port);
  if (!query || !qport)
    return EOPNOTSUPP;
  struct ibv_port_attr pattr;
  memset(&pattr, 0, sizeof pattr);
  if (qport(ctx, (uint8_t)port, (struct _compat_ibv_port_attr *)&pattr))
    return errno ? errno : EINVAL;
  if (index >= (uint32_t)pattr.gid_tbl_len)
    return EINVAL;
  memset(entry, 0, sizeof *entry);
  if (query(ctx, (uint8_t)port, (int)index, &entry->gid))
    return errno ? errno : EINVAL;
  static const union ibv_gid zero;
  if (memcmp(&entry->gid, &zero, sizeof zero) == 0)
    return ENODATA;
  entry->gid_index = index;
  entry->port_num = port;
  char buf[64];
  if (pattr.link_layer != IBV_LINK_LAYER_ETHERNET) {
    entry->gid_type = IBV_GID_TYPE_IB;
  } else if (gid_attr(ctx, port, index, "types", buf, sizeof buf) == 0) {
    entry->gid_type = strcmp(buf, "RoCE v2") == 0 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
#ifdef RDMADL_TEST_BREAK_EMULATION
    /* A deliberately wrong fallback, only for showing that the VM tier's
     * rc28 suite fails (ci/vm/README.md): no build option sets it. */
    entry->gid_type = IBV_GID_TYPE_ROCE_V1;
#endif
    if (gid_attr(ctx, port, index, "ndevs", buf, sizeof buf) == 0)
      entry->ndev_ifindex = if_nametoindex(buf);
  } else {
    entry->gid_type = IBV_GID_TYPE_ROCE_V1;
  }
  return 0;
}

/* Behind ibv_query_gid_ex() (IBVERBS_1.11); falls back to ibv_query_gid. */
RDMADL_STUB_API int RDMADL_NAME(_ibv_query_gid_ex)(struct ibv_context *context, uint32_t port_num,
                                                   uint32_t gid_index, struct ibv_gid_entry *entry,
                                                   uint32_t flags, size_t entry_size) {
  __typeof__(&_ibv_query_gid_ex) f = RDMADL_FN(_ibv_query_gid_ex);
  if (f)
    return f(context, port_num, gid_index, entry, flags, entry_size);
  if (!RDMADL_FN(ibv_query_gid)) {
    rdmadl_refuse(RDMADL_IDX__ibv_query_gid_ex);
    return EOPNOTSUPP;
  }
  if (flags || entry_size < sizeof *entry)
    return EINVAL;
  return gid_entry_fallback(context, port_num, gid_index, entry);
}

/* Behind ibv_query_gid_table() (IBVERBS_1.11); falls back to walking every
 * port's table with ibv_query_gid. Returns entries read or -errno. */
RDMADL_STUB_API ssize_t RDMADL_NAME(_ibv_query_gid_table)(struct ibv_context *context,
                                                          struct ibv_gid_entry *entries,
                                                          size_t max_entries, uint32_t flags,
                                                          size_t entry_size) {
  __typeof__(&_ibv_query_gid_table) f = RDMADL_FN(_ibv_query_gid_table);
  if (f)
    return f(context, entries, max_entries, flags, entry_size);
  __typeof__(&ibv_query_device) qdev = RDMADL_FN(ibv_query_device);
  if (!qdev || !RDMADL_FN(ibv_query_gid)) {
    rdmadl_refuse(RDMADL_IDX__ibv_query_gid_table);
    return -EOPNOTSUPP;
  }
  if (flags || entry_size < sizeof *entries)
    return -EINVAL;
  struct ibv_device_attr dattr;
  int ret = qdev(context, &dattr);
  if (ret)
    return -ret;
  size_t n = 0;
  for (uint32_t port = 1; port <= dattr.phys_port_cnt; port++) {
    for (uint32_t i = 0;; i++) {
      struct ibv_gid_entry e;
      ret = gid_entry_fallback(context, port, i, &e);
      if (ret == EINVAL)
        break; /* past the end of this port's table */
      if (ret == ENODATA)
        continue; /* an empty slot: ibv_query_gid_table skips them too */
      if (ret)
        return -ret;
      if (n == max_entries)
        return -EINVAL;
      memcpy((char *)entries + n * entry_size, &e, sizeof e);
      n++;
    }
  }
  return (ssize_t)n;
}

/* Deprecated and bound only as the non-default IBVERBS_1.1 entry; the shared
 * drop-in exports it the same way, as ibv_register_driver@IBVERBS_1.1 (the
 * version script leaves the name out, so only this versioned alias remains). */
#ifdef RDMADL_DROPIN_SHARED
__asm__(".symver ibv_register_driver, ibv_register_driver@IBVERBS_1.1");
#endif
RDMADL_STUB_API void RDMADL_NAME(ibv_register_driver)(const char *name,
                                                      rdmadl_ibv_driver_init_func init_func) {
  __typeof__(&ibv_register_driver) f = RDMADL_FN(ibv_register_driver);
  if (f)
    f(name, init_func);
  else
    errno = EOPNOTSUPP;
}

#ifdef RDMADL_DROPIN_SHARED
/* libmlx5's old-ABI mlx5dv_init_obj@MLX5_1.0 (the table binds the default
 * MLX5_1.2 one), which programs linked against rdma-core before MLX5_1.2
 * reference: the shared drop-in exports it too, as that non-default entry,
 * and forwards it to the loaded libmlx5's own MLX5_1.0 entry; without one it
 * fails as mlx5dv_init_obj(3) documents, with EOPNOTSUPP. */
struct mlx5dv_obj;
__attribute__((visibility("default"))) int mlx5dv_init_obj_1_0_compat(struct mlx5dv_obj *obj,
                                                                      uint64_t obj_type);
__asm__(".symver mlx5dv_init_obj_1_0_compat, mlx5dv_init_obj@MLX5_1.0");
int mlx5dv_init_obj_1_0_compat(struct mlx5dv_obj *obj, uint64_t obj_type) {
  static void *entry; /* atomic */
  void *f = __atomic_load_n(&entry, __ATOMIC_ACQUIRE);
  if (!f && rdmadl_lib_load(RDMADL_LIB_MLX5) == 0) {
    const char *path = rdmadl_lib_path(RDMADL_LIB_MLX5);
    void *h = path ? dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (h) {
      f = dlvsym(h, "mlx5dv_init_obj", "MLX5_1.0");
      dlclose(h); /* the loader's own reference keeps it loaded */
      __atomic_store_n(&entry, f, __ATOMIC_RELEASE);
    }
  }
  if (f)
    return ((int (*)(struct mlx5dv_obj *, uint64_t))f)(obj, obj_type);
  rdmadl_refuse(RDMADL_IDX_mlx5dv_init_obj);
  return EOPNOTSUPP;
}
#endif

/* The string functions keep working without a library: the same strings
 * rdma-core returns, "unknown" (or "UNKNOWN EVENT") outside the enum. */
#define RDMADL_STR_STUB(name, type, table, unknown)                                                \
  RDMADL_STUB_API const char *RDMADL_NAME(name)(type value) {                                      \
    __typeof__(&name) f = RDMADL_FN(name);                                                         \
    if (f)                                                                                         \
      return f(value);                                                                             \
    const char *s = RDMADL_STR_AT(table, value);                                                   \
    return s ? s : unknown;                                                                        \
  }

RDMADL_STR_STUB(ibv_wc_status_str, enum ibv_wc_status, wc_status_strs, "unknown")
RDMADL_STR_STUB(ibv_event_type_str, enum ibv_event_type, event_type_strs, "unknown")
RDMADL_STR_STUB(ibv_node_type_str, enum ibv_node_type, node_type_strs, "unknown")
RDMADL_STR_STUB(ibv_port_state_str, enum ibv_port_state, port_state_strs, "unknown")

/* The rate conversions are pure table lookups in libibverbs (verbs.c); they
 * answer from the same table without a library, errno untouched: rdma-core
 * 65.0's rates (44.0 has the same), -1 (a rate with no whole multiple of
 * 2.5 Gbit/s, or none at all) and IBV_RATE_MAX where it answers so. */
static const struct {
  enum ibv_rate rate;
  int mult, mbps;
} rates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},       {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},       {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},      {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},      {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},    {IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},      {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},    {IBV_RATE_25_GBPS, -1, 25781},
    {IBV_RATE_100_GBPS, -1, 103125},    {IBV_RATE_200_GBPS, -1, 206250},
    {IBV_RATE_300_GBPS, -1, 309375},    {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},      {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},   {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};
enum { NRATES = sizeof rates / sizeof rates[0] };

/* A rate's multiple of 2.5 Gbit/s (BY_MBPS 0) or its Mbit/s (1); -1 for none. */
static int rate_measure(enum ibv_rate rate, int by_mbps) {
  for (size_t i = 0; i < NRATES; i++)
    if (rates[i].rate == rate)
      return by_mbps ? rates[i].mbps : rates[i].mult;
  return -1;
}

/* The rate whose measure (as rate_measure) is the positive VALUE; else
 * IBV_RATE_MAX. */
static enum ibv_rate rate_of_measure(int value, int by_mbps) {
  for (size_t i = 0; i < NRATES; i++)
    if (value > 0 && (by_mbps ? rates[i].mbps : rates[i].mult) == value)
      return rates[i].rate;
  return IBV_RATE_MAX;
}

/* A conversion that asks the library when loaded and the table otherwise. */
#define RDMADL_RATE_STUB(name, ret, type, fallback)                                                \
  RDMADL_STUB_API ret RDMADL_NAME(name)(type value) {                                              \
    __typeof__(&name) f = RDMADL_FN(name);                                                         \
    return f ? f(value) : fallback;                                                                \
  }

RDMADL_RATE_STUB(ibv_rate_to_mult, int, enum ibv_rate, rate_measure(value, 0))
RDMADL_RATE_STUB(mult_to_ibv_rate, enum ibv_rate, int, rate_of_measure(value, 0))
RDMADL_RATE_STUB(ibv_rate_to_mbps, int, enum ibv_rate, rate_measure(value, 1))
RDMADL_RATE_STUB(mbps_to_ibv_rate, enum ibv_rate, int, rate_of_measure(value, 1))

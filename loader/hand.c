/* SPDX-License-Identifier: MIT */
/*
 * The HAND and EMU entries of symbols.def whose failure or fallback needs
 * more than the generated form, in files by concern: this one the memory
 * registrations and buffers, hand_devices.c ibv_get_device_list, hand_gid.c
 * the GID queries, hand_str.c and hand_rate.c the functions that answer
 * without a library, hand_compat.c the old-ABI entries, hand_umad.c
 * libibumad's. Compiled in both modes, like stubs.c; in librdmadl-verbs.a
 * each file is an archive member that records the rows of its stubs
 * (RDMADL_LINKED, loader/bind.c).
 *
 * An EMU stub forwards to the loaded library when it has the symbol and
 * otherwise runs a fallback built only from calls that library has, with the
 * semantics rdma-core 65.0 gives the call (read from its source and man pages
 * and checked against its build). Fallbacks call the dispatch table, never an
 * exported ibv_* name: in the shared drop-in that name could bind to another
 * copy of libibverbs in the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "extra_decls.h"
#include "internal.h"
#include "rdmadl/loader.h"

#undef ibv_reg_mr

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

RDMADL_LINKED(ibv_reg_mr_iova2)
RDMADL_LINKED(ibv_alloc_buf)
RDMADL_LINKED(ibv_free_buf)
RDMADL_LINKED(ibv_export_buf_dmabuf_fd)
RDMADL_LINKED(ibv_reg_mr_ex)
RDMADL_LINKED(ibv_reg_buf_mr)

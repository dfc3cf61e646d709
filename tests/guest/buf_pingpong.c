/* SPDX-License-Identifier: MIT */
/*
 * buf_pingpong - a program written as rdma-core 65.0's examples are: its
 * buffers come from ibv_alloc_buf (IBVERBS_1.17), are registered with
 * ibv_reg_buf_mr and freed with ibv_free_buf; two RC QPs on one device
 * exchange checked data. It also registers with ibv_reg_mr_ex (1.15) in the
 * comp_mask combinations rdmadl maps onto older calls, and asks for a
 * buffer's dma-buf (1.18).
 *
 * Every check expects the same outcome on every release: on 65.0 the library
 * answers, on 33.2, 44.0 and 56.1 rdmadl's fallbacks (loader/hand.c) must
 * answer the same. "buf.status" checks that rdmadl reports each of these
 * symbols resolved where the release exports it (EXPECTED-LIST, the "name
 * node" lines ci/test-vm.sh derives with readelf) and emulated where not.
 *
 *   buf_pingpong EXPECTED-LIST | --absent
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdmadl/loader.h>

#include "common.h"

enum { MSG = 6000, TIMEOUT = 5000 };

struct side {
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  struct ibv_buf *handle;
  struct ibv_mr *mr;
  uint8_t *buf;
};

static struct t_dev dev;
static struct side a, b;
static size_t page, size;
static const int mr_access =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

/* True when LIST has a line "NAME <node>". */
static bool listed(const char *list, const char *name) {
  FILE *f = fopen(list, "r");
  if (!f)
    return false;
  char line[256];
  size_t n = strlen(name);
  bool found = false;
  while (!found && fgets(line, sizeof line, f))
    found = strncmp(line, name, n) == 0 && line[n] == ' ';
  fclose(f);
  return found;
}

static void check_status(const char *list) {
  static const char *const names[] = {"ibv_alloc_buf", "ibv_reg_buf_mr", "ibv_free_buf",
                                      "ibv_reg_mr_ex", "ibv_export_buf_dmabuf_fd"};
  bool ok = access(list, R_OK) == 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int want = listed(list, names[i]) ? RDMADL_SYMBOL_RESOLVED : RDMADL_SYMBOL_EMULATED;
    int got = rdmadl_symbol_status(names[i], NULL);
    printf("buf_pingpong: %s: %s\n", names[i],
           got == RDMADL_SYMBOL_RESOLVED   ? "resolved"
           : got == RDMADL_SYMBOL_EMULATED ? "emulated"
                                           : "missing");
    if (got != want) {
      fprintf(stderr, "buf_pingpong: %s status %d, want %d\n", names[i], got, want);
      ok = false;
    }
  }
  t_check("buf.status", ok, "list %s", list);
}

static int make_side(struct side *s) {
  errno = 0;
  s->buf = ibv_alloc_buf(dev.pd, size, &s->handle);
  if (!s->buf)
    return errno ? errno : EINVAL;
  memset(s->buf, 0, size);
  s->mr = ibv_reg_buf_mr(dev.pd, s->handle, s->buf, size, mr_access);
  s->cq = s->mr ? ibv_create_cq(dev.ctx, 16, NULL, NULL, 0) : NULL;
  if (!s->cq)
    return errno;
  struct ibv_qp_init_attr qa = t_qp_attr(s->cq, s->cq, IBV_QPT_RC, 8);
  s->qp = ibv_create_qp(dev.pd, &qa);
  return s->qp ? 0 : errno;
}

static bool wait_one(struct side *s, enum ibv_wc_opcode op, struct ibv_wc *wc) {
  return t_poll(s->cq, wc, 1, 1, TIMEOUT) == 1 && t_wc_ok(wc, 1) && wc->opcode == op;
}

/* a sends MSG bytes at OFF of its buffer into b's buffer at OFF. */
static void test_send_recv(const char *name, size_t off) {
  t_fill(a.buf + off, MSG, 17);
  memset(b.buf + off, 0, MSG + 16);
  struct ibv_sge rs = {.addr = (uintptr_t)b.buf + off, .length = MSG + 16, .lkey = b.mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &rs, .num_sge = 1}, *rbad;
  struct ibv_wc sw, rw = {0};
  bool ok = ibv_post_recv(b.qp, &rwr, &rbad) == 0 &&
            t_post1(a.qp, IBV_WR_SEND, 1, a.buf + off, MSG, a.mr->lkey, 0, 0, 0) == 0 &&
            wait_one(&a, IBV_WC_SEND, &sw) && wait_one(&b, IBV_WC_RECV, &rw);
  t_check(name,
          ok && rw.byte_len == MSG && t_same(name, b.buf + off, a.buf + off, MSG) &&
              b.buf[off + MSG] == 0,
          "completed %d, byte_len %u", ok, rw.byte_len);
}

/* a RDMA-writes MSG bytes into b's buffer at OFF through MR, whose first
 * byte is addressed as BASE (its iova). */
static bool write_through(const char *name, struct ibv_mr *mr, uint64_t base, size_t off,
                          unsigned seed) {
  if (!mr)
    return false;
  t_fill(a.buf + off, MSG, seed);
  memset(b.buf + off, 0, MSG);
  uint64_t raddr = base + (off - (size_t)((uint8_t *)mr->addr - b.buf));
  struct ibv_wc wc;
  return t_post1(a.qp, IBV_WR_RDMA_WRITE, 3, a.buf + off, MSG, a.mr->lkey, raddr, mr->rkey, 0) ==
             0 &&
         wait_one(&a, IBV_WC_RDMA_WRITE, &wc) && t_same(name, b.buf + off, a.buf + off, MSG);
}

static struct ibv_mr_init_attr attr(void *addr, size_t len, uint64_t mask) {
  struct ibv_mr_init_attr ia = {
      .length = len, .access = mr_access, .comp_mask = mask, .addr = addr};
  return ia;
}

/* ibv_reg_mr_ex fails with WANT (and registers nothing). */
static bool refused(struct ibv_mr_init_attr ia, int want) {
  errno = 0;
  struct ibv_mr *mr = ibv_reg_mr_ex(dev.pd, &ia);
  int err = errno;
  if (mr) {
    ibv_dereg_mr(mr);
    return false;
  }
  if (err != want)
    fprintf(stderr, "buf_pingpong: comp_mask 0x%llx: errno %d, want %d\n",
            (unsigned long long)ia.comp_mask, err, want);
  return err == want;
}

static void test_reg_mr_ex(void) {
  /* ADDR | IOVA: b's second and third pages, addressed from 0x10000 on. */
  struct ibv_mr_init_attr ia =
      attr(b.buf + page, 2 * page, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_IOVA);
  ia.iova = 0x10000;
  struct ibv_mr *mr = ibv_reg_mr_ex(dev.pd, &ia);
  t_check("reg_mr_ex.iova", write_through("reg_mr_ex.iova", mr, 0x10000, page, 23),
          "mr %p errno %d", (void *)mr, mr ? 0 : errno);
  T_FREE(ibv_dereg_mr, mr);

  /* BUF | ADDR: a sub-range of b's ibv_buf, at its own address. */
  ia = attr(b.buf + 2 * page, 2 * page, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_BUF);
  ia.buf = b.handle;
  mr = ibv_reg_mr_ex(dev.pd, &ia);
  t_check("reg_mr_ex.buf",
          write_through("reg_mr_ex.buf", mr, (uintptr_t)b.buf + 2 * page, 2 * page, 29),
          "mr %p errno %d", (void *)mr, mr ? 0 : errno);
  T_FREE(ibv_dereg_mr, mr);

  /* 65.0's checks. */
  struct ibv_mr_init_attr bad = attr(b.buf, 64, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_FD);
  bool einval = refused(bad, EINVAL);
  einval &= refused(attr(b.buf, 64, 0), EINVAL);
  einval &= refused(attr(b.buf, 64, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_FD_OFFSET), EINVAL);
  bad = attr(b.buf + size - page, 2 * page, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_BUF);
  bad.buf = b.handle;
  einval &= refused(bad, EINVAL); /* past the buffer's end */
  t_check("reg_mr_ex.einval", einval, "see above");
  t_check("reg_mr_ex.eopnotsupp",
          refused(attr(b.buf, 64, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH), EOPNOTSUPP),
          "a DMA handle");

  /* A dma-buf fd: the same answer as ibv_reg_dmabuf_mr gives (no exporter
   * here; fd -1). */
  errno = 0;
  struct ibv_mr *direct = ibv_reg_dmabuf_mr(dev.pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
  int want = errno;
  ia = attr(NULL, 4096, IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET | IBV_REG_MR_MASK_IOVA);
  ia.fd = -1;
  ia.access = IBV_ACCESS_LOCAL_WRITE;
  t_check("reg_mr_ex.dmabuf", !direct && want != 0 && refused(ia, want),
          "ibv_reg_dmabuf_mr: mr %p errno %d", (void *)direct, want);
  T_FREE(ibv_dereg_mr, direct);
}

static void test_buf_checks(void) {
  /* Another PD, a range outside the buffer: EINVAL. */
  struct ibv_pd *other = ibv_alloc_pd(dev.ctx);
  errno = 0;
  struct ibv_mr *m1 = other ? ibv_reg_buf_mr(other, b.handle, b.buf, page, mr_access) : NULL;
  int e1 = errno;
  errno = 0;
  struct ibv_mr *m2 = ibv_reg_buf_mr(dev.pd, b.handle, b.buf + page, size, mr_access);
  int e2 = errno;
  t_check("buf.reg.einval", other && !m1 && e1 == EINVAL && !m2 && e2 == EINVAL,
          "other pd: mr %p errno %d; too long: mr %p errno %d", (void *)m1, e1, (void *)m2, e2);
  T_FREE(ibv_dereg_mr, m1);
  T_FREE(ibv_dereg_mr, m2);
  T_FREE(ibv_dealloc_pd, other);
  /* Ordinary memory has no dma-buf behind it. */
  errno = 0;
  int fd = ibv_export_buf_dmabuf_fd(b.handle);
  int err = errno;
  t_check("buf.export", fd == -1 && err == ENODATA, "fd %d errno %d (%s)", fd, err, strerror(err));
  if (fd >= 0)
    close(fd);
}

int main(int argc, char **argv) {
  t_init(argc, argv, "buf_pingpong");
  int r = t_open(&dev);
  if (r)
    return r < 0 ? 1 : t_exit();
  check_status(argc > 1 ? argv[1] : "");
  page = (size_t)sysconf(_SC_PAGESIZE);
  /* Room for the sends at 0 and page + 100 and the MSG-byte writes at page
   * and 2 * page. */
  size = 4 * page > 2 * page + MSG ? 4 * page : 2 * page + MSG;
  int err = make_side(&a);
  err = err ? err : make_side(&b);
  t_check("buf.alloc",
          err == 0 && (uintptr_t)a.buf % page == 0 && (uintptr_t)b.buf % page == 0 && a.handle &&
              b.handle,
          "ibv_alloc_buf + ibv_reg_buf_mr + QP: %s", strerror(err));
  if (err)
    return t_exit();
  err = t_rc_connect(&dev, a.qp, b.qp->qp_num, mr_access);
  err = err ? err : t_rc_connect(&dev, b.qp, a.qp->qp_num, mr_access);
  t_check("buf.connect", err == 0, "%s", strerror(err));
  if (err)
    return t_exit();
  test_send_recv("buf.send_recv", 0);
  test_send_recv("buf.send_recv.offset", page + 100); /* not page aligned */
  test_reg_mr_ex();
  test_buf_checks();
  bool ok = true;
  struct side *sides[] = {&a, &b};
  for (int i = 0; i < 2; i++) {
    struct side *s = sides[i];
    ok &= ibv_destroy_qp(s->qp) == 0 && ibv_destroy_cq(s->cq) == 0 && ibv_dereg_mr(s->mr) == 0;
    ibv_free_buf(s->handle);
  }
  t_check("buf.free", ok, "teardown");
  /* The whole 65.0-style flow, for ci/releases.txt's feature table. */
  t_check("feature.alloc_buf", ok && t_exit() == 0, "see the buf.* checks");
  t_close(&dev);
  return t_exit();
}

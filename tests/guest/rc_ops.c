/* SPDX-License-Identifier: MIT */
/*
 * rc_ops - two RC QPs on one device, connected to each other: send/recv, send
 * with immediate, RDMA write, write with immediate, RDMA read, atomics
 * (fetch-and-add, compare-and-swap) and batch polling of a CQ. Every transfer
 * is checked byte for byte.
 *
 * Across two nodes: "--listen" is side b (the target: receives, is written,
 * read and updated), "--connect IP" side a (the initiator). They trade QP
 * number, GID, buffer address and rkey over the side channel and meet at a
 * barrier around each operation; each prints the checks it can verify (a its
 * completions and what it reads back, b what landed in its memory).
 */
#define _DEFAULT_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { BUF = 65536, MSG = 3000, BATCH_N = 32, BATCH_SZ = 256, TIMEOUT = 5000 };

struct side {
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  struct ibv_mr *mr;
  uint8_t *buf;
};

static struct t_dev dev;
static struct side a, b; /* a initiates, b is the target */
/* Side a's view of b's buffer (b's own in one process, the peer's across nodes). */
static uint64_t remote_base;
static uint32_t remote_rkey;
static uint32_t step;
static uint8_t expect[MSG]; /* the pattern a sender used, rebuilt on the receiver */

static bool is_a(void) {
  return t_role() != T_LISTEN;
}

static bool is_b(void) {
  return t_role() != T_CONNECT;
}

/* Across nodes: a barrier before the next phase of an operation. */
static bool sync_peer(void) {
  return t_role() == T_LOCAL || t_peer_sync(++step);
}

static const uint8_t *pattern(unsigned seed, size_t len) {
  t_fill(expect, len, seed);
  return expect;
}

static int make_side(struct side *s) {
  s->buf = aligned_alloc(4096, BUF);
  if (!s->buf)
    return ENOMEM;
  memset(s->buf, 0, BUF);
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (dev.attr.atomic_cap != IBV_ATOMIC_NONE)
    access |= IBV_ACCESS_REMOTE_ATOMIC;
  s->mr = ibv_reg_mr(dev.pd, s->buf, BUF, access);
  s->cq = s->mr ? t_create_cq(dev.ctx, 2 * BATCH_N + 8) : NULL;
  if (!s->cq)
    return errno;
  struct ibv_qp_init_attr qa = {.send_cq = s->cq,
                                .recv_cq = s->cq,
                                .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = BATCH_N + 4,
                                        .max_recv_wr = BATCH_N + 4,
                                        .max_send_sge = 1,
                                        .max_recv_sge = 1}};
  s->qp = ibv_create_qp(dev.pd, &qa);
  return s->qp ? 0 : errno;
}

static int post_recv(struct side *s, uint64_t id, size_t off, size_t len) {
  struct ibv_sge sge = {
      .addr = (uintptr_t)s->buf + off, .length = (uint32_t)len, .lkey = s->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = len ? 1 : 0}, *bad;
  return ibv_post_recv(s->qp, &wr, &bad);
}

/* One signaled work request from a. REMOTE_OFF is an offset into b's buffer. */
static int post_a(enum ibv_wr_opcode op, uint64_t id, size_t off, size_t len, size_t remote_off,
                  uint32_t imm) {
  return t_post1(a.qp, op, id, a.buf + off, (uint32_t)len, a.mr->lkey, remote_base + remote_off,
                 remote_rkey, imm);
}

static int post_atomic(enum ibv_wr_opcode op, uint64_t id, size_t off, size_t remote_off,
                       uint64_t add_or_compare, uint64_t swap) {
  struct ibv_sge sge = {.addr = (uintptr_t)a.buf + off, .length = 8, .lkey = a.mr->lkey};
  struct ibv_send_wr wr = {.wr_id = id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  wr.wr.atomic.remote_addr = remote_base + remote_off;
  wr.wr.atomic.rkey = remote_rkey;
  wr.wr.atomic.compare_add = add_or_compare;
  wr.wr.atomic.swap = swap;
  return ibv_post_send(a.qp, &wr, &bad);
}

/* Waits for N completions on S's CQ; checks status, and opcode of the first. */
static bool wait_wc(struct side *s, int n, struct ibv_wc *wc, enum ibv_wc_opcode op) {
  int got = t_poll(s->cq, wc, n, n, TIMEOUT);
  if (got != n) {
    fprintf(stderr, "rc_ops: %d of %d completions\n", got, n);
    return false;
  }
  if (!t_wc_ok(wc, n))
    return false;
  if (wc[0].opcode != op) {
    fprintf(stderr, "rc_ops: opcode %d, want %d\n", wc[0].opcode, op);
    return false;
  }
  return true;
}

static void test_send(bool imm) {
  const char *name = imm ? "rc.send_imm" : "rc.send_recv";
  size_t off = imm ? 8192 : 0;
  unsigned seed = imm ? 2 : 1;
  struct ibv_wc sw, rw = {0};
  bool ok_a = true, ok_b = true;
  if (is_a())
    t_fill(a.buf + off, MSG, seed);
  if (is_b()) {
    memset(b.buf + off, 0, MSG + 16);
    ok_b = post_recv(&b, 11, off, MSG + 16) == 0;
  }
  bool synced = sync_peer();
  if (is_a())
    ok_a = synced &&
           post_a(imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, 1, off, MSG, 0, 0xfeed0001) == 0 &&
           wait_wc(&a, 1, &sw, IBV_WC_SEND);
  if (is_b()) {
    ok_b = ok_b && synced && wait_wc(&b, 1, &rw, IBV_WC_RECV);
    ok_b = ok_b && rw.byte_len == MSG && rw.wr_id == 11 && rw.qp_num == b.qp->qp_num &&
           (!imm || ((rw.wc_flags & IBV_WC_WITH_IMM) && ntohl(rw.imm_data) == 0xfeed0001));
    ok_b = ok_b && t_same(name, b.buf + off, pattern(seed, MSG), MSG) && b.buf[off + MSG] == 0;
  }
  t_check(name, ok_a && ok_b, "completed a %d b %d, byte_len %u wr_id %llu wc_flags 0x%x imm 0x%x",
          ok_a, ok_b, rw.byte_len, (unsigned long long)rw.wr_id, rw.wc_flags, ntohl(rw.imm_data));
}

static void test_write(bool imm) {
  const char *name = imm ? "rc.write_imm" : "rc.write";
  size_t off = imm ? 24576 : 16384;
  unsigned seed = imm ? 4 : 3;
  struct ibv_wc sw, rw;
  bool ok_a = true, ok_b = true;
  if (is_a())
    t_fill(a.buf + off, MSG, seed);
  if (is_b()) {
    memset(b.buf + off, 0, MSG + 16);
    ok_b = !imm || post_recv(&b, 12, 0, 0) == 0;
  }
  bool synced = sync_peer();
  if (is_a())
    ok_a = synced &&
           post_a(imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, 2, off, MSG, off,
                  0xfeed0002) == 0 &&
           wait_wc(&a, 1, &sw, IBV_WC_RDMA_WRITE);
  if (is_b() && imm) {
    ok_b = ok_b && synced && wait_wc(&b, 1, &rw, IBV_WC_RECV_RDMA_WITH_IMM);
    if (ok_b && !((rw.wc_flags & IBV_WC_WITH_IMM) && ntohl(rw.imm_data) == 0xfeed0002 &&
                  rw.byte_len == MSG)) {
      fprintf(stderr, "rc_ops: write_imm: wc_flags 0x%x imm 0x%x byte_len %u\n", rw.wc_flags,
              ntohl(rw.imm_data), rw.byte_len);
      ok_b = false;
    }
  }
  synced = sync_peer() && synced; /* a's write completed: it is in b's memory */
  if (is_b())
    ok_b = ok_b && synced && t_same(name, b.buf + off, pattern(seed, MSG), MSG) &&
           b.buf[off + MSG] == 0;
  t_check(name, ok_a && ok_b, "write did not land byte for byte (a %d, b %d)", ok_a, ok_b);
}

static void test_read(void) {
  size_t off = 32768;
  struct ibv_wc sw;
  bool ok = true;
  if (is_b())
    t_fill(b.buf + off, MSG, 5);
  if (is_a())
    memset(a.buf + off, 0, MSG + 16);
  bool synced = sync_peer();
  if (is_a())
    ok = synced && post_a(IBV_WR_RDMA_READ, 3, off, MSG, off, 0) == 0 &&
         wait_wc(&a, 1, &sw, IBV_WC_RDMA_READ) &&
         t_same("rc.read", a.buf + off, pattern(5, MSG), MSG) && a.buf[off + MSG] == 0;
  synced = sync_peer() && synced; /* b's buffer stays until a has read it */
  t_check("rc.read", ok && synced, "read did not land byte for byte");
}

static void test_atomics(void) {
  if (dev.attr.atomic_cap == IBV_ATOMIC_NONE) {
    t_unsupported("rc.atomic_fetch_add", "device", "device atomic_cap is IBV_ATOMIC_NONE");
    t_unsupported("rc.atomic_cmp_swap", "device", "device atomic_cap is IBV_ATOMIC_NONE");
    return;
  }
  size_t roff = 40960, loff = 40960;
  /* Each node has only its own side's buffer. */
  static uint64_t none;
  uint64_t *remote = is_b() ? (uint64_t *)(b.buf + roff) : &none;
  uint64_t *local = is_a() ? (uint64_t *)(a.buf + loff) : &none;
  if (is_b())
    *remote = 0x1122334455667788ull;
  if (is_a())
    *local = 0;
  struct ibv_wc wc;
  bool ok = sync_peer();
  if (is_a())
    ok = ok && post_atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, 4, loff, roff, 0x1000, 0) == 0 &&
         wait_wc(&a, 1, &wc, IBV_WC_FETCH_ADD) && *local == 0x1122334455667788ull;
  ok = sync_peer() && ok;
  if (is_b())
    ok = ok && *remote == 0x1122334455668788ull;
  t_check("rc.atomic_fetch_add", ok, "old 0x%llx new 0x%llx",
          is_a() ? (unsigned long long)*local : 0ull, is_b() ? (unsigned long long)*remote : 0ull);
  /* A matching compare swaps; a mismatching one leaves the value alone. The
   * target has looked at the sum before the first swap may land. */
  uint64_t first = 0;
  ok = sync_peer();
  if (is_a()) {
    *local = 0;
    ok = ok &&
         post_atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 5, loff, roff, 0x1122334455668788ull, 42) == 0 &&
         wait_wc(&a, 1, &wc, IBV_WC_COMP_SWAP) && *local == 0x1122334455668788ull;
    first = *local;
    *local = 0;
    ok = ok && post_atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 6, loff, roff, 7, 99) == 0 &&
         wait_wc(&a, 1, &wc, IBV_WC_COMP_SWAP) && *local == 42;
  }
  ok = sync_peer() && ok;
  if (is_b())
    ok = ok && *remote == 42;
  t_check("rc.atomic_cmp_swap", ok, "first old 0x%llx, second old %llu, remote %llu",
          (unsigned long long)first, is_a() ? (unsigned long long)*local : 0ull,
          is_b() ? (unsigned long long)*remote : 0ull);
}

/* N sends posted as one chain, polled in batches of 8 on both sides. */
static void test_batch(void) {
  size_t base = 0;
  struct ibv_sge sge[BATCH_N];
  struct ibv_send_wr wr[BATCH_N], *bad;
  bool ok = true;
  for (int i = 0; i < BATCH_N; i++) {
    if (is_b()) {
      memset(b.buf + base + i * BATCH_SZ, 0, BATCH_SZ);
      ok = ok && post_recv(&b, 1000 + i, base + i * BATCH_SZ, BATCH_SZ) == 0;
    }
    if (!is_a())
      continue;
    t_fill(a.buf + base + i * BATCH_SZ, BATCH_SZ, 100 + i);
    sge[i] = (struct ibv_sge){
        .addr = (uintptr_t)a.buf + base + i * BATCH_SZ, .length = BATCH_SZ, .lkey = a.mr->lkey};
    wr[i] = (struct ibv_send_wr){.wr_id = 2000 + i,
                                 .sg_list = &sge[i],
                                 .num_sge = 1,
                                 .opcode = IBV_WR_SEND,
                                 .send_flags = IBV_SEND_SIGNALED,
                                 .next = i + 1 < BATCH_N ? &wr[i + 1] : NULL};
  }
  ok = sync_peer() && ok;
  struct ibv_wc sw[BATCH_N], rw[BATCH_N];
  int ns = BATCH_N, nr = BATCH_N;
  if (is_a()) {
    ok = ok && ibv_post_send(a.qp, wr, &bad) == 0;
    ns = ok ? t_poll(a.cq, sw, BATCH_N, 8, TIMEOUT) : 0;
    ok = ok && ns == BATCH_N && t_wc_ok(sw, ns);
  }
  if (is_b()) {
    nr = ok ? t_poll(b.cq, rw, BATCH_N, 8, TIMEOUT) : 0;
    ok = ok && nr == BATCH_N && t_wc_ok(rw, nr);
  }
  /* RC delivers in order: completion i is message i. */
  for (int i = 0; ok && i < BATCH_N; i++) {
    ok = (!is_a() || sw[i].wr_id == (uint64_t)(2000 + i)) &&
         (!is_b() || (rw[i].wr_id == (uint64_t)(1000 + i) && rw[i].byte_len == BATCH_SZ));
    if (!ok)
      fprintf(stderr, "rc_ops: completion %d: send %llu recv %llu len %u\n", i,
              is_a() ? (unsigned long long)sw[i].wr_id : 0ull,
              is_b() ? (unsigned long long)rw[i].wr_id : 0ull, is_b() ? rw[i].byte_len : 0);
  }
  if (is_b()) {
    static uint8_t want[BATCH_N * BATCH_SZ];
    for (int i = 0; i < BATCH_N; i++)
      t_fill(want + i * BATCH_SZ, BATCH_SZ, 100 + i);
    ok = ok && t_same("rc.batch_poll", b.buf + base, want, sizeof want);
  }
  t_check("rc.batch_poll", ok, "%d sends, %d receives of %d", ns, nr, BATCH_N);
}

/* Across nodes: what each side tells the other to connect and to address memory. */
struct wire {
  uint32_t qpn, rkey;
  uint64_t addr;
  uint8_t gid[16];
};

/* Creates this node's side and connects it to the peer's. Returns 0 or an errno. */
static int connect_peer(int access) {
  struct side *me = is_a() ? &a : &b;
  int err = make_side(me);
  if (err)
    return err;
  if (t_peer_open(120000))
    return ENOTCONN;
  struct wire mine = {.qpn = htonl(me->qp->qp_num),
                      .rkey = htonl(me->mr->rkey),
                      .addr = htobe64((uintptr_t)me->buf)},
              theirs;
  memcpy(mine.gid, dev.gid.raw, 16);
  if (t_peer_xchg(&mine, &theirs, sizeof mine))
    return ECONNRESET;
  union ibv_gid dgid;
  memcpy(dgid.raw, theirs.gid, 16);
  remote_base = be64toh(theirs.addr);
  remote_rkey = ntohl(theirs.rkey);
  err = t_rc_connect_gid(&dev, me->qp, ntohl(theirs.qpn), &dgid, access);
  /* Both QPs must be ready to receive before either side sends. */
  return err ? err : sync_peer() ? 0 : ECONNRESET;
}

int main(int argc, char **argv) {
  t_init(argc, argv, "rc_ops");
  int r = t_open(&dev);
  if (r != 0)
    return r > 0 ? t_exit() : 1;
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
               (dev.attr.atomic_cap != IBV_ATOMIC_NONE ? IBV_ACCESS_REMOTE_ATOMIC : 0);
  int err;
  if (t_role() == T_LOCAL) {
    err = make_side(&a);
    err = err ? err : make_side(&b);
    err = err ? err : t_rc_connect(&dev, a.qp, b.qp->qp_num, access);
    err = err ? err : t_rc_connect(&dev, b.qp, a.qp->qp_num, access);
    if (!err) {
      remote_base = (uintptr_t)b.buf;
      remote_rkey = b.mr->rkey;
    }
  } else {
    err = connect_peer(access);
  }
  if (!t_check("rc.connect", err == 0, "setup: %s", strerror(err)))
    return t_exit();
  test_send(false);
  test_send(true);
  test_write(false);
  test_write(true);
  test_read();
  test_atomics();
  test_batch();
  /* The target's memory stays registered until the initiator is done. */
  sync_peer();
  struct side *sides[] = {&a, &b};
  for (int i = 0; i < 2; i++) {
    if (!sides[i]->qp)
      continue;
    ibv_destroy_qp(sides[i]->qp);
    t_destroy_cq(sides[i]->cq);
    ibv_dereg_mr(sides[i]->mr);
    free(sides[i]->buf);
  }
  t_peer_close();
  t_close(&dev);
  return t_exit();
}

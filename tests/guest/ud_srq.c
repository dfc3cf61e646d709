/* SPDX-License-Identifier: MIT */
/*
 * ud_srq - UD send/recv through an address handle (the receiver skips the
 * 40-byte GRH), and two RC QPs sharing one shared receive queue. Payloads are
 * checked byte for byte.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { BUF = 16384, GRH = 40, SRQ_MSGS = 4, SRQ_SZ = 1024, TIMEOUT = 5000 };
#define QKEY 0x11111111u

static struct t_dev dev;

static int post_recv_qp(struct ibv_qp *qp, struct ibv_mr *mr, void *at, size_t len, uint64_t id) {
  struct ibv_sge sge = {.addr = (uintptr_t)at, .length = (uint32_t)len, .lkey = mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
  return ibv_post_recv(qp, &wr, &bad);
}

static void test_ud(uint8_t *buf, struct ibv_mr *mr) {
  size_t len = 128u << dev.port_attr.active_mtu; /* the largest UD message: one MTU */
  if (len > BUF / 2 - GRH)
    len = BUF / 2 - GRH;
  struct ibv_cq *cq = ibv_create_cq(dev.ctx, 8, NULL, NULL, 0);
  struct ibv_qp_init_attr qa = t_qp_attr(cq, cq, IBV_QPT_UD, 2);
  struct ibv_qp *s = cq ? ibv_create_qp(dev.pd, &qa) : NULL;
  struct ibv_qp *r = s ? ibv_create_qp(dev.pd, &qa) : NULL;
  struct ibv_ah_attr aa;
  t_ah_attr(&dev, &aa);
  struct ibv_ah *ah = r ? ibv_create_ah(dev.pd, &aa) : NULL;
  if (!t_check("ud.setup", ah && t_ud_ready(&dev, s, QKEY) == 0 && t_ud_ready(&dev, r, QKEY) == 0,
               "cq %p qp %p/%p ah %p: %s", (void *)cq, (void *)s, (void *)r, (void *)ah,
               strerror(errno)))
    goto out;
  uint8_t *src = buf, *dst = buf + BUF / 2;
  t_fill(src, len, 21);
  memset(dst, 0, GRH + len + 8);
  struct ibv_sge sge = {.addr = (uintptr_t)src, .length = (uint32_t)len, .lkey = mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 1,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = r->qp_num;
  wr.wr.ud.remote_qkey = QKEY;
  struct ibv_wc wc[2];
  bool ok = post_recv_qp(r, mr, dst, GRH + len, 7) == 0 && ibv_post_send(s, &wr, &bad) == 0 &&
            t_poll(cq, wc, 2, 2, TIMEOUT) == 2 && t_wc_ok(wc, 2);
  struct ibv_wc *rw = ok ? (wc[0].opcode == IBV_WC_RECV ? &wc[0] : &wc[1]) : NULL;
  ok = ok && rw->opcode == IBV_WC_RECV && rw->byte_len == GRH + len && rw->src_qp == s->qp_num &&
       (rw->wc_flags & IBV_WC_GRH);
  t_check("ud.send_recv", ok && t_same("ud.send_recv", dst + GRH, src, len),
          "completion: byte_len %u src_qp %u (want %zu from %u)", rw ? rw->byte_len : 0,
          rw ? rw->src_qp : 0, GRH + len, s->qp_num);
out:
  T_FREE(ibv_destroy_ah, ah);
  T_FREE(ibv_destroy_qp, r);
  T_FREE(ibv_destroy_qp, s);
  T_FREE(ibv_destroy_cq, cq);
}

/* Two senders, two receivers; both receivers draw buffers from one SRQ. */
static void test_srq(uint8_t *buf, struct ibv_mr *mr) {
  struct ibv_cq *scq = ibv_create_cq(dev.ctx, 16, NULL, NULL, 0);
  struct ibv_cq *rcq = ibv_create_cq(dev.ctx, 16, NULL, NULL, 0);
  struct ibv_srq_init_attr sa = {.attr = {.max_wr = SRQ_MSGS, .max_sge = 1}};
  struct ibv_srq *srq = rcq && scq ? ibv_create_srq(dev.pd, &sa) : NULL;
  struct ibv_qp *snd[2] = {NULL, NULL}, *rcv[2] = {NULL, NULL};
  int access = IBV_ACCESS_LOCAL_WRITE;
  bool ok = srq != NULL;
  for (int i = 0; ok && i < 2; i++) {
    struct ibv_qp_init_attr qa = t_qp_attr(scq, rcq, IBV_QPT_RC, 4);
    snd[i] = ibv_create_qp(dev.pd, &qa);
    qa.srq = srq;
    rcv[i] = snd[i] ? ibv_create_qp(dev.pd, &qa) : NULL;
    ok = rcv[i] && t_rc_connect(&dev, snd[i], rcv[i]->qp_num, access) == 0 &&
         t_rc_connect(&dev, rcv[i], snd[i]->qp_num, access) == 0;
  }
  uint8_t *src = buf, *dst = buf + BUF / 2;
  memset(dst, 0, SRQ_MSGS * SRQ_SZ);
  for (int i = 0; ok && i < SRQ_MSGS; i++) {
    struct ibv_sge sge = {.addr = (uintptr_t)dst + i * SRQ_SZ, .length = SRQ_SZ, .lkey = mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = 100 + i, .sg_list = &sge, .num_sge = 1}, *bad;
    ok = ibv_post_srq_recv(srq, &wr, &bad) == 0;
  }
  if (!t_check("srq.setup", ok, "srq %p: %s", (void *)srq, strerror(errno)))
    goto out;
  /* Message m goes out on sender m % 2 and carries its own pattern. */
  for (int m = 0; ok && m < SRQ_MSGS; m++) {
    t_fill(src + m * SRQ_SZ, SRQ_SZ, 300 + m);
    struct ibv_sge sge = {.addr = (uintptr_t)src + m * SRQ_SZ, .length = SRQ_SZ, .lkey = mr->lkey};
    struct ibv_send_wr wr = {.wr_id = (uint64_t)m,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    ok = ibv_post_send(snd[m % 2], &wr, &bad) == 0;
    struct ibv_wc wc;
    ok = ok && t_poll(scq, &wc, 1, 1, TIMEOUT) == 1 && t_wc_ok(&wc, 1);
  }
  struct ibv_wc rw[SRQ_MSGS];
  int n = ok ? t_poll(rcq, rw, SRQ_MSGS, SRQ_MSGS, TIMEOUT) : 0;
  ok = ok && n == SRQ_MSGS && t_wc_ok(rw, n);
  /* The SRQ hands out buffers in posting order: receive k used buffer k. */
  for (int k = 0; ok && k < SRQ_MSGS; k++) {
    int slot = (int)(rw[k].wr_id - 100);
    ok = slot == k && rw[k].byte_len == SRQ_SZ && rw[k].qp_num == rcv[k % 2]->qp_num;
    if (!ok)
      fprintf(stderr, "ud_srq: srq receive %d: wr_id %llu qp %u len %u\n", k,
              (unsigned long long)rw[k].wr_id, rw[k].qp_num, rw[k].byte_len);
  }
  t_check("srq.send_recv", ok && t_same("srq.send_recv", dst, src, SRQ_MSGS * SRQ_SZ),
          "%d of %d receives through the SRQ", n, SRQ_MSGS);
out:
  for (int i = 0; i < 2; i++) {
    T_FREE(ibv_destroy_qp, rcv[i]);
    T_FREE(ibv_destroy_qp, snd[i]);
  }
  T_FREE(ibv_destroy_srq, srq);
  T_FREE(ibv_destroy_cq, rcq);
  T_FREE(ibv_destroy_cq, scq);
}

int main(int argc, char **argv) {
  t_init(argc, argv, "ud_srq");
  int r = t_open(&dev);
  if (r != 0)
    return r > 0 ? t_exit() : 1;
  uint8_t *buf = aligned_alloc(4096, BUF);
  struct ibv_mr *mr = buf ? ibv_reg_mr(dev.pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE) : NULL;
  if (!t_check("ud_srq.reg_mr", mr != NULL, "%s", strerror(errno)))
    return t_exit();
  test_ud(buf, mr);
  test_srq(buf, mr);
  ibv_dereg_mr(mr);
  free(buf);
  t_close(&dev);
  return t_exit();
}

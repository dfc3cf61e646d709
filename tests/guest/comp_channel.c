/* SPDX-License-Identifier: MIT */
/*
 * comp_channel - event-driven completion: ibv_req_notify_cq, poll() on the
 * channel's fd with a timeout, ibv_get_cq_event, ibv_ack_cq_events. First no
 * event may arrive while nothing is posted; then a send must wake the receiver.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { BUF = 8192, MSG = 2048 };

int main(int argc, char **argv) {
  t_init(argc, argv, "comp_channel");
  struct t_dev dev;
  int r = t_open(&dev);
  if (r != 0)
    return r > 0 ? t_exit() : 1;
  uint8_t *buf = aligned_alloc(4096, BUF);
  struct ibv_mr *mr = buf ? ibv_reg_mr(dev.pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE) : NULL;
  struct ibv_comp_channel *ch = mr ? ibv_create_comp_channel(dev.ctx) : NULL;
  int cq_tag = 42;
  struct ibv_cq *rcq = ch ? ibv_create_cq(dev.ctx, 4, &cq_tag, ch, 0) : NULL;
  struct ibv_cq *scq = rcq ? ibv_create_cq(dev.ctx, 4, NULL, NULL, 0) : NULL;
  struct ibv_qp_init_attr qa = t_qp_attr(scq, rcq, IBV_QPT_RC, 2);
  struct ibv_qp *s = scq ? ibv_create_qp(dev.pd, &qa) : NULL;
  struct ibv_qp *rq = s ? ibv_create_qp(dev.pd, &qa) : NULL;
  bool ok = rq && t_rc_connect(&dev, s, rq->qp_num, IBV_ACCESS_LOCAL_WRITE) == 0 &&
            t_rc_connect(&dev, rq, s->qp_num, IBV_ACCESS_LOCAL_WRITE) == 0 &&
            fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0;
  if (!t_check("cq.channel.setup", ok, "%s", strerror(errno)))
    return t_exit();

  uint8_t *src = buf, *dst = buf + BUF / 2;
  t_fill(src, MSG, 77);
  memset(dst, 0, MSG);
  struct ibv_sge rsge = {.addr = (uintptr_t)dst, .length = MSG, .lkey = mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 5, .sg_list = &rsge, .num_sge = 1}, *rbad;
  ok = ibv_post_recv(rq, &rwr, &rbad) == 0 && ibv_req_notify_cq(rcq, 0) == 0;

  /* Nothing sent yet: the fd must stay quiet for the timeout. */
  struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
  int quiet = ok ? poll(&pfd, 1, 200) : -1;
  t_check("cq.channel.timeout", ok && quiet == 0, "poll returned %d before any send", quiet);

  struct ibv_sge ssge = {.addr = (uintptr_t)src, .length = MSG, .lkey = mr->lkey};
  struct ibv_send_wr swr = {.wr_id = 6, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND},
                     *sbad;
  ok = ok && ibv_post_send(s, &swr, &sbad) == 0;
  int ready = ok ? poll(&pfd, 1, 5000) : -1;
  struct ibv_cq *ev_cq = NULL;
  void *ev_ctx = NULL;
  ok = ok && ready == 1 && (pfd.revents & POLLIN) && ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0;
  if (ok)
    ibv_ack_cq_events(ev_cq, 1);
  ok = ok && ev_cq == rcq && ev_ctx == &cq_tag && ibv_req_notify_cq(rcq, 0) == 0;
  struct ibv_wc wc;
  int n = ok ? t_poll(rcq, &wc, 1, 1, 1000) : 0;
  ok = ok && n == 1 && t_wc_ok(&wc, 1) && wc.wr_id == 5 && wc.byte_len == MSG;
  t_check("cq.channel.event", ok && t_same("cq.channel.event", dst, src, MSG),
          "poll %d revents 0x%x cq %p (want %p) ctx %p completions %d", ready, pfd.revents,
          (void *)ev_cq, (void *)rcq, ev_ctx, n);

  ibv_destroy_qp(rq);
  ibv_destroy_qp(s);
  ibv_destroy_cq(scq);
  ibv_destroy_cq(rcq);
  ibv_destroy_comp_channel(ch);
  ibv_dereg_mr(mr);
  free(buf);
  t_close(&dev);
  return t_exit();
}

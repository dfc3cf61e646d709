/* SPDX-License-Identifier: MIT */
/* rdmadl-bench-postpoll-c ITERS [prebuilt|fair]: the same loop as
 * postpoll.cpp, written by hand in C against verbs (the drop-in
 * rdmadl::verbs_static). "prebuilt" (the default) posts one work request
 * built before the loop; "fair" fills its work request on every post, as the
 * C++ API's post_write() does. Device from RDMADL_TEST_DEVICE (default: the
 * first), GID index from RDMADL_TEST_GID_INDEX (default 1). Prints
 * "iters N polls M". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq) {
  struct ibv_qp_init_attr a = {.send_cq = cq,
                               .recv_cq = cq,
                               .qp_type = IBV_QPT_RC,
                               .cap = {.max_send_wr = 64,
                                       .max_recv_wr = 64,
                                       .max_send_sge = 1,
                                       .max_recv_sge = 1,
                                       .max_inline_data = 64}};
  return ibv_create_qp(pd, &a);
}

static int connect_qp(struct ibv_qp *qp, uint32_t dqpn, union ibv_gid *gid, int gidx) {
  struct ibv_qp_attr a = {
      .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return 1;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dqpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = *gid;
  a.ah_attr.grh.sgid_index = (uint8_t)gidx;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return 1;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int die(const char *what) {
  fprintf(stderr, "rdmadl-bench-postpoll-c: %s failed\n", what);
  return 1;
}

int main(int argc, char **argv) {
  alarm(250); /* default action: killed, the runner reports it */
  long iters = argc > 1 ? atol(argv[1]) : 1000;
  int fair = argc > 2 && strcmp(argv[2], "fair") == 0;
  const char *dev = getenv("RDMADL_TEST_DEVICE");
  const char *gi = getenv("RDMADL_TEST_GID_INDEX");
  int gidx = gi ? atoi(gi) : 1;
  int n;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n < 1)
    return die("ibv_get_device_list");
  int k = 0;
  while (dev && k < n && strcmp(ibv_get_device_name(list[k]), dev) != 0)
    k++;
  if (k == n)
    return die("finding RDMADL_TEST_DEVICE");
  struct ibv_context *ctx = ibv_open_device(list[k]);
  struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
  struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
  struct ibv_qp *a = cq ? make_qp(pd, cq) : NULL, *b = cq ? make_qp(pd, cq) : NULL;
  union ibv_gid gid;
  if (!a || !b || ibv_query_gid(ctx, 1, gidx, &gid) || connect_qp(a, b->qp_num, &gid, gidx) ||
      connect_qp(b, a->qp_num, &gid, gidx))
    return die("setting up the QP pair");
  static char buf[64];
  struct ibv_mr *mr =
      ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr)
    return die("ibv_reg_mr");
  struct ibv_sge sge = {(uintptr_t)buf, 8, mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_SIGNALED,
                           .wr.rdma = {(uintptr_t)buf + 8, mr->rkey}},
                     *bad;
  struct ibv_wc wc;
  long polls = 0;
  for (long i = 0; i < iters; i++) {
    if (fair) {
      /* What a caller without a prepared request writes each time. */
      struct ibv_sge s = {(uintptr_t)buf, 8, mr->lkey};
      struct ibv_send_wr w;
      w.wr_id = 1;
      w.next = NULL;
      w.sg_list = &s;
      w.num_sge = 1;
      w.opcode = IBV_WR_RDMA_WRITE;
      w.send_flags = IBV_SEND_SIGNALED;
      w.wr.rdma.remote_addr = (uintptr_t)buf + 8;
      w.wr.rdma.rkey = mr->rkey;
      if (ibv_post_send(a, &w, &bad))
        return die("ibv_post_send");
    } else if (ibv_post_send(a, &wr, &bad)) {
      return die("ibv_post_send");
    }
    int got;
    do
      polls++;
    while ((got = ibv_poll_cq(cq, 1, &wc)) == 0);
    if (got < 0 || wc.status != IBV_WC_SUCCESS)
      return die("the RDMA write's completion");
  }
  printf("iters %ld polls %ld\n", iters, polls);
  return 0;
}

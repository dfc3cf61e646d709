/* SPDX-License-Identifier: MIT */
/*
 * ex_api - the extended verbs a release may or may not have: the WR API
 * (ibv_qp_to_qp_ex + ibv_wr_*), extended CQ polling (ibv_create_cq_ex +
 * ibv_start_poll/ibv_next_poll/ibv_end_poll), ibv_query_gid_ex/_table,
 * ibv_reg_mr_ex, ibv_query_qp_data_in_order, ibv_reg_dmabuf_mr and
 * ibv_query_port_speed. A feature the loaded library lacks must come back from
 * rdmadl as EOPNOTSUPP / NULL and is then reported UNSUPPORTED, unless rdmadl
 * emulates it (ibv_reg_mr_ex: loader/hand.c), when it must work; ci/test-vm.sh
 * compares those lines with ci/releases.txt.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdmadl/loader.h>

#include "common.h"

enum { BUF = 65536, MSG = 1500, TIMEOUT = 5000 };

static struct t_dev dev;
static uint8_t *abuf, *bbuf;
static struct ibv_mr *amr, *bmr;
static struct ibv_cq *acq, *bcq;
static struct ibv_cq_ex *bcqx; /* b's CQ when the extended CQ exists */
static struct ibv_qp *aqp, *bqp;
static int qp_ex_err; /* ibv_create_qp_ex with send ops: EOPNOTSUPP from the provider */
static const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

/* True when rdmadl bound NAME in the loaded library. */
static bool has_symbol(const char *name) {
  return rdmadl_symbol_status(name, NULL) == 1;
}

/* The library lacks NAME and the call failed the way rdmadl's stub must: the
 * feature is unsupported. Anything else is a failure. */
static void missing(const char *check, const char *name, bool failed_cleanly, int err) {
  if (!has_symbol(name) && failed_cleanly && err == EOPNOTSUPP) {
    char why[128];
    snprintf(why, sizeof why, "rdmadl: %s not in this libibverbs", name);
    t_unsupported(check, "library", why);
  } else {
    t_check(check, false, "%s: symbol status %d, errno %d (%s)", name,
            rdmadl_symbol_status(name, NULL), err, strerror(err));
  }
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int post_recv_b(uint64_t id, size_t off, size_t len) {
  struct ibv_sge sge = {.addr = (uintptr_t)bbuf + off, .length = (uint32_t)len, .lkey = bmr->lkey};
  struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
  return ibv_post_recv(bqp, &wr, &bad);
}

/* One receive completion on b's CQ, through the extended poll API if b's CQ
 * is extended. Returns true with *id / *len filled in. */
static bool recv_one(uint64_t *id, uint32_t *len) {
  if (!bcqx) {
    struct ibv_wc wc;
    if (t_poll(bcq, &wc, 1, 1, TIMEOUT) != 1 || !t_wc_ok(&wc, 1) || wc.opcode != IBV_WC_RECV)
      return false;
    *id = wc.wr_id;
    *len = wc.byte_len;
    return true;
  }
  struct ibv_poll_cq_attr pa = {0};
  long end = now_ms() + TIMEOUT;
  int ret;
  while ((ret = ibv_start_poll(bcqx, &pa)) == ENOENT && now_ms() < end)
    ;
  if (ret) {
    fprintf(stderr, "ex_api: ibv_start_poll: %d\n", ret);
    return false;
  }
  bool ok = bcqx->status == IBV_WC_SUCCESS && ibv_wc_read_opcode(bcqx) == IBV_WC_RECV &&
            ibv_wc_read_qp_num(bcqx) == bqp->qp_num;
  *id = bcqx->wr_id;
  *len = ibv_wc_read_byte_len(bcqx);
  /* Exactly one completion was expected: the next poll must say ENOENT. */
  ret = ibv_next_poll(bcqx);
  ibv_end_poll(bcqx);
  if (!ok || ret != ENOENT)
    fprintf(stderr, "ex_api: extended poll: status %d next_poll %d\n", bcqx->status, ret);
  return ok && ret == ENOENT;
}

static int setup(void) {
  abuf = aligned_alloc(4096, BUF);
  bbuf = aligned_alloc(4096, BUF);
  if (!abuf || !bbuf)
    return ENOMEM;
  memset(abuf, 0, BUF);
  memset(bbuf, 0, BUF);
  amr = ibv_reg_mr(dev.pd, abuf, BUF, access);
  bmr = amr ? ibv_reg_mr(dev.pd, bbuf, BUF, access) : NULL;
  acq = bmr ? ibv_create_cq(dev.ctx, 16, NULL, NULL, 0) : NULL;
  if (!acq)
    return errno;
  /* Extended CQ for b's receives. */
  struct ibv_cq_init_attr_ex ca = {.cqe = 16,
                                   .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM};
  errno = 0;
  bcqx = ibv_create_cq_ex(dev.ctx, &ca);
  if (bcqx) {
    bcq = ibv_cq_ex_to_cq(bcqx);
  } else {
    int err = errno;
    if (err == EOPNOTSUPP) /* no symbol: the library asks the provider */
      t_unsupported("feature.cq_ex", "device", "ibv_create_cq_ex: EOPNOTSUPP");
    else
      t_check("feature.cq_ex", false, "ibv_create_cq_ex: %s", strerror(err));
    bcq = ibv_create_cq(dev.ctx, 16, NULL, NULL, 0);
    if (!bcq)
      return errno;
  }
  /* a: created with ibv_create_qp_ex and the WR API's send ops; a provider
   * without them says EOPNOTSUPP, and a classic QP stands in. */
  struct ibv_qp_init_attr_ex qa = {
      .send_cq = acq,
      .recv_cq = acq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
      .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
      .pd = dev.pd,
      .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND};
  errno = 0;
  aqp = ibv_create_qp_ex(dev.ctx, &qa);
  if (!aqp && errno != EOPNOTSUPP)
    return errno;
  if (!aqp) {
    qp_ex_err = EOPNOTSUPP;
    struct ibv_qp_init_attr qc = {
        .send_cq = acq, .recv_cq = acq, .qp_type = IBV_QPT_RC, .cap = qa.cap};
    aqp = ibv_create_qp(dev.pd, &qc);
    if (!aqp)
      return errno;
  }
  struct ibv_qp_init_attr qb = t_qp_attr(bcq, bcq, IBV_QPT_RC, 8);
  bqp = ibv_create_qp(dev.pd, &qb);
  if (!bqp)
    return errno;
  int err = t_rc_connect(&dev, aqp, bqp->qp_num, access);
  return err ? err : t_rc_connect(&dev, bqp, aqp->qp_num, access);
}

/* WR API: an RDMA write and a send in one ibv_wr_start/ibv_wr_complete batch,
 * then the send's receive through the extended CQ. */
static void test_wr_api(void) {
  size_t woff = 4096, soff = 8192;
  t_fill(abuf + woff, MSG, 31);
  t_fill(abuf + soff, MSG, 32);
  errno = 0;
  struct ibv_qp_ex *qpx = qp_ex_err ? NULL : ibv_qp_to_qp_ex(aqp);
  int err = qp_ex_err ? qp_ex_err : errno;
  bool ok = post_recv_b(9, soff, MSG + 64) == 0;
  if (qpx) {
    ibv_wr_start(qpx);
    qpx->wr_id = 1;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qpx, bmr->rkey, (uintptr_t)bbuf + woff);
    ibv_wr_set_sge(qpx, amr->lkey, (uintptr_t)abuf + woff, MSG);
    qpx->wr_id = 2;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(qpx);
    ibv_wr_set_sge(qpx, amr->lkey, (uintptr_t)abuf + soff, MSG);
    ok = ok && ibv_wr_complete(qpx) == 0;
    struct ibv_wc wc[2];
    ok = ok && t_poll(acq, wc, 2, 2, TIMEOUT) == 2 && t_wc_ok(wc, 2) && wc[0].wr_id == 1 &&
         wc[0].opcode == IBV_WC_RDMA_WRITE && wc[1].wr_id == 2 && wc[1].opcode == IBV_WC_SEND;
    t_check("feature.wr_api", ok && t_same("feature.wr_api", bbuf + woff, abuf + woff, MSG),
            "ibv_wr_* write + send did not complete or land");
  } else {
    if (qp_ex_err && has_symbol("ibv_qp_to_qp_ex"))
      t_unsupported("feature.wr_api", "device",
                    "ibv_create_qp_ex with send_ops_flags: EOPNOTSUPP from the provider");
    else
      missing("feature.wr_api", "ibv_qp_to_qp_ex", true, err);
    /* The send the extended CQ check needs, the classic way. */
    struct ibv_wc wc;
    ok = ok && t_post1(aqp, IBV_WR_SEND, 2, abuf + soff, MSG, amr->lkey, 0, 0, 0) == 0 &&
         t_poll(acq, &wc, 1, 1, TIMEOUT) == 1 && t_wc_ok(&wc, 1);
  }
  uint64_t id = 0;
  uint32_t len = 0;
  ok = ok && recv_one(&id, &len) && id == 9 && len == MSG;
  const char *name = bcqx ? "feature.cq_ex" : "ex_api.recv";
  t_check(name, ok && t_same(name, bbuf + soff, abuf + soff, MSG), "receive wr_id %llu len %u",
          (unsigned long long)id, len);
}

static void test_query_gid_ex(void) {
  struct ibv_gid_entry e;
  memset(&e, 0, sizeof e);
  errno = 0;
  int ret = ibv_query_gid_ex(dev.ctx, dev.port, (uint32_t)dev.gid_index, &e, 0);
  if (ret == EOPNOTSUPP) {
    missing("feature.query_gid_ex", "_ibv_query_gid_ex", true, ret);
    return;
  }
  struct ibv_gid_entry table[256];
  ssize_t n = ibv_query_gid_table(dev.ctx, table, 256, 0);
  bool in_table = false;
  for (ssize_t i = 0; i < n; i++)
    in_table |= table[i].gid_index == (uint32_t)dev.gid_index && table[i].port_num == dev.port &&
                memcmp(&table[i].gid, &dev.gid, sizeof dev.gid) == 0 &&
                table[i].gid_type == IBV_GID_TYPE_ROCE_V2;
  t_check("feature.query_gid_ex",
          ret == 0 && memcmp(&e.gid, &dev.gid, sizeof dev.gid) == 0 &&
              e.gid_type == IBV_GID_TYPE_ROCE_V2 && e.gid_index == (uint32_t)dev.gid_index &&
              e.port_num == dev.port && in_table,
          "ret %d type %u index %u port %u; table %zd entries, ours %s", ret, e.gid_type,
          e.gid_index, e.port_num, n, in_table ? "found" : "missing");
}

/* ibv_reg_mr_ex (IBVERBS_1.15): register, then RDMA-write into it. */
static void test_reg_mr_ex(void) {
  size_t off = 16384;
  struct ibv_mr_init_attr ia = {
      .length = MSG, .access = access, .comp_mask = IBV_REG_MR_MASK_ADDR, .addr = bbuf + off};
  errno = 0;
  struct ibv_mr *mr = ibv_reg_mr_ex(dev.pd, &ia);
  if (!mr) {
    missing("feature.reg_mr_ex", "ibv_reg_mr_ex", true, errno);
    return;
  }
  t_fill(abuf + off, MSG, 41);
  memset(bbuf + off, 0, MSG);
  struct ibv_wc wc;
  bool ok = t_post1(aqp, IBV_WR_RDMA_WRITE, 3, abuf + off, MSG, amr->lkey, (uintptr_t)bbuf + off,
                    mr->rkey, 0) == 0 &&
            t_poll(acq, &wc, 1, 1, TIMEOUT) == 1 && t_wc_ok(&wc, 1);
  t_check("feature.reg_mr_ex", ok && t_same("feature.reg_mr_ex", bbuf + off, abuf + off, MSG),
          "write through the ibv_reg_mr_ex key");
  ibv_dereg_mr(mr);
}

/* ibv_query_qp_data_in_order (IBVERBS_1.14): a capability mask of known bits. */
static void test_data_in_order(void) {
  errno = 0;
  int caps =
      ibv_query_qp_data_in_order(aqp, IBV_WR_RDMA_WRITE, IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS);
  int err = errno;
  if (!has_symbol("ibv_query_qp_data_in_order")) {
    missing("feature.data_in_order", "ibv_query_qp_data_in_order", caps == 0, err);
    return;
  }
  t_check("feature.data_in_order",
          (caps & ~(IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG |
                    IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES)) == 0,
          "caps 0x%x", caps);
}

/* ibv_reg_dmabuf_mr (IBVERBS_1.12). No dmabuf exporter in the guest: with
 * the symbol present the call must reach libibverbs and fail there on the
 * bad fd; without it rdmadl must say EOPNOTSUPP. */
static void test_dmabuf(void) {
  errno = 0;
  struct ibv_mr *mr = ibv_reg_dmabuf_mr(dev.pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
  int err = errno;
  if (!has_symbol("ibv_reg_dmabuf_mr")) {
    missing("feature.reg_dmabuf_mr", "ibv_reg_dmabuf_mr", mr == NULL, err);
    return;
  }
  t_check("feature.reg_dmabuf_mr", mr == NULL && err != 0, "fd -1 gave mr %p errno %d (%s)",
          (void *)mr, err, strerror(err));
  if (mr)
    ibv_dereg_mr(mr);
}

/* ibv_query_port_speed (IBVERBS_1.16): a non-zero speed for an active port. */
static void test_port_speed(void) {
  uint64_t speed = 0;
  errno = 0;
  int ret = ibv_query_port_speed(dev.ctx, dev.port, &speed);
  if (!has_symbol("ibv_query_port_speed")) {
    missing("feature.query_port_speed", "ibv_query_port_speed", ret == EOPNOTSUPP, errno);
    return;
  }
  fprintf(stderr, "ex_api: port speed %llu x 100 Mb/s\n", (unsigned long long)speed);
  if (ret == EOPNOTSUPP) {
    t_unsupported("feature.query_port_speed", "device",
                  "ibv_query_port_speed: EOPNOTSUPP from the library/provider");
    return;
  }
  t_check("feature.query_port_speed", ret == 0 && speed > 0, "ret %d (%s) speed %llu", ret,
          strerror(ret), (unsigned long long)speed);
}

int main(int argc, char **argv) {
  t_init(argc, argv, "ex_api");
  int r = t_open(&dev);
  if (r != 0)
    return r > 0 ? t_exit() : 1;
  int err = setup();
  if (!t_check("ex_api.setup", err == 0, "%s", strerror(err)))
    return t_exit();
  test_wr_api();
  test_query_gid_ex();
  test_reg_mr_ex();
  test_data_in_order();
  test_dmabuf();
  test_port_speed();
  ibv_destroy_qp(bqp);
  ibv_destroy_qp(aqp);
  ibv_destroy_cq(bcq);
  ibv_destroy_cq(acq);
  ibv_dereg_mr(bmr);
  ibv_dereg_mr(amr);
  t_close(&dev);
  return t_exit();
}

// SPDX-License-Identifier: MIT
// The scripted fake provider (tests/fakes/fake_provider.c) proven through the
// drop-in C API: what it answers, what it records, its teardown rules and its
// knobs. ctest runs it with RDMADL_IBVERBS_PATH at the fake and
// RDMADL_RDMACM_PATH at a missing file. Each case starts from a reset fake
// and ends with nothing live and no violation, unless it is about them.
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <vector>

#include <infiniband/verbs.h>

#include <doctest/doctest.h>

#include "fake_provider_case.hpp"

namespace {

ibv_context *open_fake() {
  int n = -1;
  ibv_device **list = ibv_get_device_list(&n);
  REQUIRE(list != nullptr);
  REQUIRE(n == 1);
  ibv_context *ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  REQUIRE(ctx != nullptr);
  return ctx;
}

// An RC QP on PD whose sends and receives complete on CQ, DEPTH deep, one SGE.
ibv_qp *small_rc_qp(ibv_pd *pd, ibv_cq *cq, std::uint32_t depth = 4) {
  ibv_qp_init_attr qa{};
  qa.qp_type = IBV_QPT_RC;
  qa.send_cq = qa.recv_cq = cq;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = depth;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ibv_qp *qp = ibv_create_qp(pd, &qa);
  REQUIRE(qp);
  return qp;
}

// Two RC (or UC/UD) QPs on one context, connected to each other, with one
// registered buffer each.
struct pair {
  ibv_context *ctx = nullptr;
  ibv_pd *pd = nullptr;
  ibv_cq *cq[2] = {};
  ibv_qp *qp[2] = {};
  alignas(64) std::array<std::array<unsigned char, 256>, 2> buf{}; // atomics: 8-byte aligned
  ibv_mr *mr[2] = {};
  ibv_qp_type type;

  explicit pair(ibv_qp_type t = IBV_QPT_RC, bool ex = false) : type(t) {
    ctx = open_fake();
    pd = ibv_alloc_pd(ctx);
    REQUIRE(pd);
    for (int i = 0; i < 2; i++) {
      cq[i] = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
      REQUIRE(cq[i]);
      mr[i] = ibv_reg_mr(pd, buf[i].data(), buf[i].size(),
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_REMOTE_ATOMIC);
      REQUIRE(mr[i]);
      ibv_qp_init_attr_ex a{};
      a.qp_type = t;
      a.send_cq = a.recv_cq = cq[i];
      a.cap.max_send_wr = a.cap.max_recv_wr = 8;
      a.cap.max_send_sge = a.cap.max_recv_sge = 2;
      a.cap.max_inline_data = 32;
      a.pd = pd;
      a.comp_mask = IBV_QP_INIT_ATTR_PD;
      if (ex) {
        a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
        if (t != IBV_QPT_UD)
          a.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
        if (t == IBV_QPT_RC)
          a.send_ops_flags |= IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                              IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
      }
      qp[i] = ibv_create_qp_ex(ctx, &a);
      REQUIRE(qp[i]);
    }
    for (int i = 0; i < 2; i++)
      connect(i, qp[1 - i]->qp_num);
  }
  void connect(int i, uint32_t dest) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (type == IBV_QPT_UD) {
      a.qkey = 0x11111111;
      mask |= IBV_QP_QKEY;
    } else {
      a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
      mask |= IBV_QP_ACCESS_FLAGS;
    }
    REQUIRE(ibv_modify_qp(qp[i], &a, mask) == 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    mask = IBV_QP_STATE;
    if (type != IBV_QPT_UD) {
      a.path_mtu = IBV_MTU_1024;
      a.dest_qp_num = dest;
      a.rq_psn = 0x123;
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.sgid_index = 1;
      a.ah_attr.grh.hop_limit = 64;
      a.ah_attr.port_num = 1;
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if (type == IBV_QPT_RC) {
        a.max_dest_rd_atomic = 4;
        a.min_rnr_timer = 12;
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      }
    }
    REQUIRE(ibv_modify_qp(qp[i], &a, mask) == 0);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0x456;
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (type == IBV_QPT_RC) {
      a.timeout = 14;
      a.retry_cnt = 7;
      a.rnr_retry = 7;
      a.max_rd_atomic = 4;
      mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    REQUIRE(ibv_modify_qp(qp[i], &a, mask) == 0);
  }
  uint64_t addr(int i, size_t off = 0) const {
    return reinterpret_cast<uint64_t>(buf[static_cast<size_t>(i)].data() + off);
  }
  void post_recv(int i, uint64_t wr_id, size_t off, uint32_t len) {
    ibv_sge s{addr(i, off), len, mr[i]->lkey};
    ibv_recv_wr w{};
    w.wr_id = wr_id;
    w.sg_list = &s;
    w.num_sge = 1;
    ibv_recv_wr *bad = nullptr;
    REQUIRE(ibv_post_recv(qp[i], &w, &bad) == 0);
  }
  std::vector<ibv_wc> poll(int i, int want) {
    std::vector<ibv_wc> v(static_cast<size_t>(want) + 1);
    int n = ibv_poll_cq(cq[i], want + 1, v.data());
    REQUIRE(n >= 0);
    v.resize(static_cast<size_t>(n));
    CHECK(n == want);
    return v;
  }
  ~pair() {
    for (int i = 0; i < 2; i++) {
      CHECK(ibv_destroy_qp(qp[i]) == 0);
      CHECK(ibv_dereg_mr(mr[i]) == 0);
      CHECK(ibv_destroy_cq(cq[i]) == 0);
    }
    CHECK(ibv_dealloc_pd(pd) == 0);
    CHECK(ibv_close_device(ctx) == 0);
  }
};

ibv_send_wr send_wr(uint64_t id, ibv_wr_opcode op, ibv_sge *sge, int n, unsigned flags) {
  ibv_send_wr w{};
  w.wr_id = id;
  w.opcode = op;
  w.sg_list = sge;
  w.num_sge = n;
  w.send_flags = flags;
  return w;
}

} // namespace

TEST_CASE("fakeprov: one device fake0 whose context is a verbs_context with the fake's ops") {
  start();
  int n = -1;
  ibv_device **list = ibv_get_device_list(&n);
  REQUIRE(list);
  REQUIRE(n == 1);
  CHECK(list[1] == nullptr);
  CHECK(std::string(ibv_get_device_name(list[0])) == FAKEPROV_DEVICE_NAME);
  CHECK(be64toh(ibv_get_device_guid(list[0])) == FAKEPROV_NODE_GUID);
  CHECK(list[0]->node_type == IBV_NODE_CA);
  CHECK(list[0]->transport_type == IBV_TRANSPORT_IB);
  CHECK(fp().fakeprov_live(FAKEPROV_DEVICE_LIST) == 1);
  ibv_context *ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  CHECK(fp().fakeprov_live(FAKEPROV_DEVICE_LIST) == 0);
  REQUIRE(ctx);
  CHECK(verbs_get_ctx(ctx) != nullptr);
  CHECK(verbs_get_ctx_op(ctx, create_cq_ex) != nullptr);
  CHECK(verbs_get_ctx_op(ctx, create_qp_ex) != nullptr);
  CHECK(verbs_get_ctx_op(ctx, query_port) != nullptr);
  CHECK(ctx->ops.post_send != nullptr);
  CHECK(ctx->ops.poll_cq != nullptr);

  ibv_device_attr d{};
  REQUIRE(ibv_query_device(ctx, &d) == 0);
  CHECK(d.max_qp_wr == 64);
  CHECK(d.max_sge == 4);
  CHECK(d.max_cqe == 256);
  CHECK(d.max_qp_rd_atom == 4);
  CHECK(d.max_srq == 8);
  CHECK(d.phys_port_cnt == 1);
  CHECK(be64toh(d.node_guid) == FAKEPROV_NODE_GUID);
  ibv_device_attr_ex dx{};
  REQUIRE(ibv_query_device_ex(ctx, nullptr, &dx) == 0);
  CHECK(dx.orig_attr.max_cqe == 256);

  ibv_port_attr p{};
  REQUIRE(ibv_query_port(ctx, 1, &p) == 0);
  CHECK(p.state == IBV_PORT_ACTIVE);
  CHECK(p.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(p.active_mtu == IBV_MTU_1024);
  CHECK(p.max_mtu == IBV_MTU_4096);
  CHECK(p.gid_tbl_len == FAKEPROV_GID_TBL_LEN);
  CHECK(p.lid == 0);
  CHECK(ibv_query_port(ctx, 2, &p) == EINVAL);

  std::array<ibv_gid_entry, 8> t{};
  ssize_t got = ibv_query_gid_table(ctx, t.data(), t.size(), 0);
  REQUIRE(got == 3);
  CHECK(t[0].gid_index == 0);
  CHECK(t[0].gid_type == IBV_GID_TYPE_ROCE_V1);
  CHECK(t[0].gid.raw[0] == 0xfe);
  CHECK(t[1].gid_index == 1);
  CHECK(t[1].gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(t[1].gid.raw[10] == 0xff);
  CHECK(t[1].gid.raw[12] == 192);
  CHECK(t[2].gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(ibv_query_gid_table(ctx, t.data(), 2, 0) == -EINVAL);
  ibv_gid_entry e{};
  CHECK(ibv_query_gid_ex(ctx, 1, 1, &e, 0) == 0);
  CHECK(e.gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(ibv_query_gid_ex(ctx, 1, 3, &e, 0) == ENODATA);
  CHECK(ibv_query_gid_ex(ctx, 1, 4, &e, 0) == EINVAL);
  ibv_gid g{};
  CHECK(ibv_query_gid(ctx, 1, 1, &g) == 0);
  CHECK(g.raw[15] == 1);

  // InfiniBand link layer: one IB GID, the LID knob.
  fp().fakeprov_set(FAKEPROV_PORT_LINK_LAYER, IBV_LINK_LAYER_INFINIBAND);
  fp().fakeprov_set(FAKEPROV_PORT_LID, 7);
  REQUIRE(ibv_query_port(ctx, 1, &p) == 0);
  CHECK(p.link_layer == IBV_LINK_LAYER_INFINIBAND);
  CHECK(p.lid == 7);
  CHECK(ibv_query_gid_table(ctx, t.data(), t.size(), 0) == 1);
  CHECK(t[0].gid_type == IBV_GID_TYPE_IB);

  // The CQ size limit; max_cqe <= 0 is reported as is and limits nothing.
  errno = 0;
  CHECK(ibv_create_cq(ctx, 257, nullptr, nullptr, 0) == nullptr);
  CHECK(errno == EINVAL);
  CHECK(ibv_create_cq(ctx, 0, nullptr, nullptr, 0) == nullptr);
  fp().fakeprov_set(FAKEPROV_MAX_CQE, 0);
  REQUIRE(ibv_query_device(ctx, &d) == 0);
  CHECK(d.max_cqe == 0);
  ibv_cq *big = ibv_create_cq(ctx, 100000, nullptr, nullptr, 0);
  REQUIRE(big);
  CHECK(ibv_destroy_cq(big) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  finish();
}

TEST_CASE("fakeprov: every send opcode is logged in full and loops back to the peer") {
  start();
  {
    pair p;
    std::memcpy(p.buf[0].data(), "hello, peer", 12);
    p.post_recv(1, 100, 0, 64);
    p.post_recv(1, 101, 64, 64);
    ibv_sge s{p.addr(0), 12, p.mr[0]->lkey};
    ibv_send_wr w1 = send_wr(1, IBV_WR_SEND_WITH_IMM, &s, 1, IBV_SEND_SIGNALED);
    w1.imm_data = htobe32(0xabcd);
    ibv_sge s2{p.addr(0, 128), 8, p.mr[0]->lkey};
    std::memcpy(p.buf[0].data() + 128, "writeme!", 8);
    ibv_send_wr w2 = send_wr(2, IBV_WR_RDMA_WRITE_WITH_IMM, &s2, 1, IBV_SEND_SIGNALED);
    w2.wr.rdma.remote_addr = p.addr(1, 200);
    w2.wr.rdma.rkey = p.mr[1]->rkey;
    w2.imm_data = htobe32(7);
    w1.next = &w2;
    ibv_send_wr *bad = nullptr;
    REQUIRE(ibv_post_send(p.qp[0], &w1, &bad) == 0);
    CHECK(bad == nullptr);

    auto log = wr_log(p.qp[0]->qp_num);
    REQUIRE(log.size() == 2);
    CHECK(log[0].kind == FAKEPROV_WR_SEND);
    CHECK(log[0].chain_index == 0);
    CHECK(log[0].chain_length == 2);
    CHECK(log[0].wr_id == 1);
    CHECK(log[0].opcode == IBV_WR_SEND_WITH_IMM);
    CHECK(log[0].imm_data == htobe32(0xabcd));
    CHECK(log[0].num_sge == 1);
    CHECK(log[0].sge[0].addr == p.addr(0));
    CHECK(log[0].sge[0].lkey == p.mr[0]->lkey);
    CHECK(log[0].via_wr_api == 0);
    CHECK(log[1].opcode == IBV_WR_RDMA_WRITE_WITH_IMM);
    CHECK(log[1].remote_addr == p.addr(1, 200));
    CHECK(log[1].rkey == p.mr[1]->rkey);
    CHECK(log[1].seq > log[0].seq);
    auto rlog = wr_log(p.qp[1]->qp_num);
    REQUIRE(rlog.size() == 2);
    CHECK(rlog[0].kind == FAKEPROV_WR_RECV);
    CHECK(rlog[0].wr_id == 100);

    auto sc = p.poll(0, 2);
    CHECK(sc[0].status == IBV_WC_SUCCESS);
    CHECK(sc[0].opcode == IBV_WC_SEND);
    CHECK(sc[0].wr_id == 1);
    CHECK(sc[0].qp_num == p.qp[0]->qp_num);
    CHECK(sc[0].byte_len == 12);
    CHECK(sc[1].opcode == IBV_WC_RDMA_WRITE);
    auto rc = p.poll(1, 2);
    CHECK(rc[0].status == IBV_WC_SUCCESS);
    CHECK(rc[0].opcode == IBV_WC_RECV);
    CHECK(rc[0].wr_id == 100);
    CHECK(rc[0].byte_len == 12);
    CHECK(rc[0].src_qp == p.qp[0]->qp_num);
    CHECK(rc[0].qp_num == p.qp[1]->qp_num);
    CHECK((rc[0].wc_flags & IBV_WC_WITH_IMM));
    CHECK(rc[0].imm_data == htobe32(0xabcd));
    CHECK(std::memcmp(p.buf[1].data(), "hello, peer", 12) == 0);
    CHECK(rc[1].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
    CHECK(rc[1].wr_id == 101);
    CHECK(rc[1].byte_len == 8);
    CHECK(rc[1].imm_data == htobe32(7));
    CHECK(std::memcmp(p.buf[1].data() + 200, "writeme!", 8) == 0);

    // RDMA read, atomics (unsignalled first: no completion), inline send.
    std::memcpy(p.buf[1].data() + 16, "remote", 6);
    ibv_sge rs{p.addr(0, 32), 6, p.mr[0]->lkey};
    ibv_send_wr r = send_wr(3, IBV_WR_RDMA_READ, &rs, 1, 0);
    r.wr.rdma.remote_addr = p.addr(1, 16);
    r.wr.rdma.rkey = p.mr[1]->rkey;
    REQUIRE(ibv_post_send(p.qp[0], &r, &bad) == 0);
    CHECK(std::memcmp(p.buf[0].data() + 32, "remote", 6) == 0);
    CHECK(p.poll(0, 0).empty());
    uint64_t v = 40;
    std::memcpy(p.buf[1].data() + 64 + 64, &v, 8); // 8-aligned: offset 128
    ibv_sge as{p.addr(0, 48), 8, p.mr[0]->lkey};
    ibv_send_wr fa = send_wr(4, IBV_WR_ATOMIC_FETCH_AND_ADD, &as, 1, IBV_SEND_SIGNALED);
    fa.wr.atomic.remote_addr = p.addr(1, 128);
    fa.wr.atomic.rkey = p.mr[1]->rkey;
    fa.wr.atomic.compare_add = 2;
    ibv_send_wr cs = send_wr(5, IBV_WR_ATOMIC_CMP_AND_SWP, &as, 1, IBV_SEND_SIGNALED);
    cs.wr.atomic.remote_addr = p.addr(1, 128);
    cs.wr.atomic.rkey = p.mr[1]->rkey;
    cs.wr.atomic.compare_add = 42;
    cs.wr.atomic.swap = 99;
    fa.next = &cs;
    REQUIRE(ibv_post_send(p.qp[0], &fa, &bad) == 0);
    std::memcpy(&v, p.buf[1].data() + 128, 8);
    CHECK(v == 99);
    std::memcpy(&v, p.buf[0].data() + 48, 8);
    CHECK(v == 42); // the value before the compare-and-swap
    auto ac = p.poll(0, 2);
    CHECK(ac[0].opcode == IBV_WC_FETCH_ADD);
    CHECK(ac[0].byte_len == 8);
    CHECK(ac[1].opcode == IBV_WC_COMP_SWAP);
    log = wr_log(p.qp[0]->qp_num);
    REQUIRE(log.size() == 5);
    CHECK(log[3].compare_add == 2);
    CHECK(log[4].compare_add == 42);
    CHECK(log[4].swap == 99);
    CHECK(log[4].remote_addr == p.addr(1, 128));

    char inl[16] = "inline bytes";
    ibv_sge is{reinterpret_cast<uint64_t>(inl), 13, 0}; // no MR: inline needs none
    ibv_send_wr iw = send_wr(6, IBV_WR_SEND, &is, 1, IBV_SEND_INLINE | IBV_SEND_SIGNALED);
    REQUIRE(ibv_post_send(p.qp[0], &iw, &bad) == 0);
    std::memset(inl, 'x', sizeof(inl)); // recorded at post, not later
    log = wr_log(p.qp[0]->qp_num);
    REQUIRE(log.size() == 6);
    CHECK(log[5].inline_length == 13);
    CHECK(std::memcmp(log[5].inline_data, "inline bytes", 13) == 0);
    p.post_recv(1, 102, 0, 64);
    CHECK(std::memcmp(p.buf[1].data(), "inline bytes", 13) == 0);
    CHECK(p.poll(1, 1)[0].byte_len == 13);
    CHECK(p.poll(0, 1)[0].wr_id == 6);
  }
  finish();
}

TEST_CASE("fakeprov: bad work requests are refused with bad_wr, and errors complete") {
  start();
  {
    pair p;
    ibv_sge s{p.addr(0), 8, p.mr[0]->lkey};
    ibv_send_wr ok = send_wr(1, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED);
    ok.wr.rdma.remote_addr = p.addr(1);
    ok.wr.rdma.rkey = p.mr[1]->rkey;
    std::array<ibv_sge, 3> three{s, s, s};
    ibv_send_wr toomany = send_wr(2, IBV_WR_SEND, three.data(), 3, 0);
    ok.next = &toomany;
    ibv_send_wr *bad = nullptr;
    CHECK(ibv_post_send(p.qp[0], &ok, &bad) == EINVAL);
    CHECK(bad == &toomany);
    CHECK(wr_log(p.qp[0]->qp_num).size() == 1); // the WR before the bad one is posted
    CHECK(p.poll(0, 1)[0].status == IBV_WC_SUCCESS);
    // A chain longer than the send queue.
    std::vector<ibv_send_wr> chain(9, send_wr(3, IBV_WR_RDMA_WRITE, &s, 1, 0));
    for (size_t i = 0; i + 1 < chain.size(); i++) {
      chain[i].wr.rdma = ok.wr.rdma;
      chain[i].next = &chain[i + 1];
    }
    chain.back().wr.rdma = ok.wr.rdma;
    CHECK(ibv_post_send(p.qp[0], chain.data(), &bad) == ENOMEM);
    CHECK(bad == &chain[8]);
    // A wrong rkey: remote access error, and the QP goes to the error state.
    fp().fakeprov_wr_log_clear();
    ibv_send_wr wrong = ok;
    wrong.next = nullptr;
    wrong.wr.rdma.rkey = 0xdead;
    REQUIRE(ibv_post_send(p.qp[0], &wrong, &bad) == 0);
    auto c = p.poll(0, 1);
    CHECK(c[0].status == IBV_WC_REM_ACCESS_ERR);
    CHECK(fp().fakeprov_qp_state(p.qp[0]->qp_num) == IBV_QPS_ERR);
    // In the error state, new WRs are flushed.
    REQUIRE(ibv_post_send(p.qp[0], &wrong, &bad) == 0);
    CHECK(p.poll(0, 1)[0].status == IBV_WC_WR_FLUSH_ERR);
    // A local SGE outside any MR of the PD.
    char stray[8];
    ibv_sge ls{reinterpret_cast<uint64_t>(stray), 8, p.mr[1]->lkey};
    ibv_send_wr lw = send_wr(4, IBV_WR_SEND, &ls, 1, 0);
    REQUIRE(ibv_post_send(p.qp[1], &lw, &bad) == 0);
    CHECK(p.poll(1, 1)[0].status == IBV_WC_LOC_PROT_ERR);
    // Posting to a QP that is not ready to send.
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    REQUIRE(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE) == 0);
    CHECK(ibv_post_send(p.qp[0], &ok, &bad) == EINVAL);
    ibv_recv_wr rw{};
    ibv_recv_wr *rbad = nullptr;
    CHECK(ibv_post_recv(p.qp[0], &rw, &rbad) == EINVAL);
    CHECK(rbad == &rw);
  }
  finish();
}

TEST_CASE("fakeprov: modify_qp records transitions and refuses invalid ones") {
  start();
  {
    pair p;
    uint32_t qpn = p.qp[0]->qp_num;
    std::array<fakeprov_modify_record, 8> m{};
    REQUIRE(fp().fakeprov_modify_log(qpn, m.data(), m.size()) == 3);
    CHECK(m[0].from_state == IBV_QPS_RESET);
    CHECK(m[0].to_state == IBV_QPS_INIT);
    CHECK(m[0].port_num == 1);
    CHECK(m[1].to_state == IBV_QPS_RTR);
    CHECK(m[1].dest_qp_num == p.qp[1]->qp_num);
    CHECK(m[1].path_mtu == IBV_MTU_1024);
    CHECK(m[1].rq_psn == 0x123);
    CHECK(m[1].is_global == 1);
    CHECK(m[1].sgid_index == 1);
    CHECK(m[1].max_dest_rd_atomic == 4);
    CHECK((m[1].attr_mask & IBV_QP_AV));
    CHECK(m[2].to_state == IBV_QPS_RTS);
    CHECK(m[2].sq_psn == 0x456);
    CHECK(m[2].timeout == 14);
    CHECK(fp().fakeprov_qp_state(qpn) == IBV_QPS_RTS);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR; // RTS -> RTR is not a transition
    CHECK(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE) == EINVAL);
    a.qp_state = IBV_QPS_RESET;
    REQUIRE(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE) == 0);
    a.qp_state = IBV_QPS_INIT; // missing the port and P_Key index
    CHECK(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE) == EINVAL);
    a.qp_state = IBV_QPS_RTS;
    CHECK(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE) == EINVAL);
    CHECK(fp().fakeprov_modify_log(qpn, nullptr, 0) == 4);
    ibv_qp_attr q{};
    ibv_qp_init_attr qi{};
    REQUIRE(ibv_query_qp(p.qp[0], &q, IBV_QP_STATE, &qi) == 0);
    CHECK(q.qp_state == IBV_QPS_RESET);
    CHECK(qi.cap.max_send_wr == 8);
    // RoCE needs a GRH in the address vector.
    p.connect(0, p.qp[1]->qp_num);
    a = {};
    a.qp_state = IBV_QPS_RESET;
    REQUIRE(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE) == 0);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    REQUIRE(ibv_modify_qp(p.qp[0], &a,
                          IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS) ==
            0);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.ah_attr.port_num = 1;
    CHECK(ibv_modify_qp(p.qp[0], &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) ==
          EINVAL);
  }
  finish();
}

TEST_CASE("fakeprov: the WR API records what post_send would, and counts its misuse") {
  start();
  {
    pair p(IBV_QPT_RC, true);
    ibv_qp_ex *x = ibv_qp_to_qp_ex(p.qp[0]);
    REQUIRE(x);
    p.post_recv(1, 200, 0, 64);
    std::memcpy(p.buf[0].data(), "wr api", 6);
    ibv_wr_start(x);
    x->wr_id = 11;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send_imm(x, htobe32(5));
    ibv_wr_set_sge(x, p.mr[0]->lkey, p.addr(0), 6);
    x->wr_id = 12;
    x->wr_flags = 0;
    ibv_wr_rdma_write(x, p.mr[1]->rkey, p.addr(1, 100));
    std::array<ibv_sge, 2> sl{ibv_sge{p.addr(0), 2, p.mr[0]->lkey},
                              ibv_sge{p.addr(0, 4), 2, p.mr[0]->lkey}};
    ibv_wr_set_sge_list(x, 2, sl.data());
    x->wr_id = 13;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write_imm(x, p.mr[1]->rkey, p.addr(1, 120), htobe32(9));
    ibv_wr_set_inline_data(x, const_cast<char *>("inl"), 3);
    x->wr_id = 14;
    ibv_wr_rdma_read(x, p.mr[1]->rkey, p.addr(1, 100));
    ibv_wr_set_sge(x, p.mr[0]->lkey, p.addr(0, 50), 4);
    x->wr_id = 15;
    ibv_wr_atomic_cmp_swp(x, p.mr[1]->rkey, p.addr(1, 128), 0, 5);
    ibv_wr_set_sge(x, p.mr[0]->lkey, p.addr(0, 64), 8);
    x->wr_id = 16;
    ibv_wr_atomic_fetch_add(x, p.mr[1]->rkey, p.addr(1, 128), 3);
    ibv_wr_set_sge(x, p.mr[0]->lkey, p.addr(0, 72), 8);
    CHECK(wr_log(p.qp[0]->qp_num).empty()); // nothing posted before wr_complete
    REQUIRE(ibv_wr_complete(x) == 0);
    auto log = wr_log(p.qp[0]->qp_num);
    REQUIRE(log.size() == 6);
    for (int i = 0; i < 6; i++) {
      CHECK(log[static_cast<size_t>(i)].via_wr_api == 1);
      CHECK(log[static_cast<size_t>(i)].chain_index == i);
      CHECK(log[static_cast<size_t>(i)].chain_length == 6);
      CHECK(log[static_cast<size_t>(i)].wr_id == static_cast<uint64_t>(11 + i));
    }
    CHECK(log[0].opcode == IBV_WR_SEND_WITH_IMM);
    CHECK(log[0].imm_data == htobe32(5));
    CHECK(log[0].send_flags == IBV_SEND_SIGNALED);
    CHECK(log[1].opcode == IBV_WR_RDMA_WRITE);
    CHECK(log[1].num_sge == 2);
    CHECK(log[1].sge[1].addr == p.addr(0, 4));
    CHECK(log[1].send_flags == 0);
    CHECK(log[2].opcode == IBV_WR_RDMA_WRITE_WITH_IMM);
    CHECK(log[2].inline_length == 3);
    CHECK((log[2].send_flags & IBV_SEND_INLINE));
    CHECK(log[3].opcode == IBV_WR_RDMA_READ);
    CHECK(log[4].opcode == IBV_WR_ATOMIC_CMP_AND_SWP);
    CHECK(log[4].swap == 5);
    CHECK(log[5].opcode == IBV_WR_ATOMIC_FETCH_AND_ADD);
    CHECK(log[5].compare_add == 3);
    CHECK(std::memcmp(p.buf[1].data(), "wr api", 6) == 0);
    CHECK(std::memcmp(p.buf[1].data() + 100, "wrpi", 4) == 0);
    CHECK(std::memcmp(p.buf[1].data() + 120, "inl", 3) == 0);
    CHECK(std::memcmp(p.buf[0].data() + 50, "wrpi", 4) == 0);
    uint64_t v;
    std::memcpy(&v, p.buf[1].data() + 128, 8);
    CHECK(v == 8);
    CHECK(p.poll(0, 5).size() == 5); // all but the unsignalled write
    CHECK(p.poll(1, 1)[0].byte_len == 6);
    CHECK(fp().fakeprov_violations() == 0);

    // Aborted batches post nothing.
    fp().fakeprov_wr_log_clear();
    ibv_wr_start(x);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, p.mr[0]->lkey, p.addr(0), 6);
    ibv_wr_abort(x);
    CHECK(wr_log(p.qp[0]->qp_num).empty());
    // More WRs than the send queue holds: wr_complete fails, nothing posted.
    ibv_wr_start(x);
    for (int i = 0; i < 9; i++) {
      ibv_wr_send(x);
      ibv_wr_set_sge(x, p.mr[0]->lkey, p.addr(0), 6);
    }
    CHECK(ibv_wr_complete(x) == ENOMEM);
    CHECK(wr_log(p.qp[0]->qp_num).empty());
    CHECK(fp().fakeprov_violations() == 0);
    // Misuse: nested wr_start, a builder outside a batch, post_send inside one.
    ibv_wr_start(x);
    ibv_wr_start(x);
    CHECK(fp().fakeprov_violations() == 1);
    ibv_send_wr w{};
    ibv_send_wr *bad = nullptr;
    CHECK(ibv_post_send(p.qp[0], &w, &bad) == EINVAL);
    CHECK(fp().fakeprov_violations() == 2);
    ibv_wr_abort(x);
    ibv_wr_send(x);
    CHECK(fp().fakeprov_violations() == 3);
    CHECK(std::string(fp().fakeprov_last_violation()).find("outside") != std::string::npos);
    fp().fakeprov_reset();
  }
  finish();
  {
    pair plain; // created without send_ops_flags
    CHECK(ibv_qp_to_qp_ex(plain.qp[0]) == nullptr);
  }
  finish();
}

TEST_CASE("fakeprov: an extended CQ polls in sessions and checks what is read") {
  start();
  ibv_context *ctx = open_fake();
  ibv_pd *pd = ibv_alloc_pd(ctx);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 8;
  ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID;
  ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
  REQUIRE(cqx);
  ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
  ibv_qp *qp = small_rc_qp(pd, cq);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  REQUIRE(ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  ibv_recv_wr rw{};
  rw.wr_id = 77;
  ibv_recv_wr *bad = nullptr;
  REQUIRE(ibv_post_recv(qp, &rw, &bad) == 0);
  rw.wr_id = 78;
  REQUIRE(ibv_post_recv(qp, &rw, &bad) == 0);
  ibv_poll_cq_attr pa{};
  CHECK(ibv_start_poll(cqx, &pa) == ENOENT);
  CHECK(fp().fakeprov_complete_recv(qp->qp_num, 0, 1, htobe32(3), 0x99) == 0);
  fp().fakeprov_complete_with(1, IBV_WC_REM_OP_ERR, 0x42);
  CHECK(fp().fakeprov_complete_recv(qp->qp_num, 0, 0, 0, 0x99) == 0);
  CHECK(fp().fakeprov_complete_recv(qp->qp_num, 0, 0, 0, 0x99) == ENOENT);
  CHECK(fp().fakeprov_cq_pending(cq) == 2);
  REQUIRE(ibv_start_poll(cqx, &pa) == 0);
  CHECK(cqx->wr_id == 77);
  CHECK(cqx->status == IBV_WC_SUCCESS);
  CHECK(ibv_wc_read_opcode(cqx) == IBV_WC_RECV);
  CHECK(ibv_wc_read_byte_len(cqx) == 0);
  CHECK(ibv_wc_read_imm_data(cqx) == htobe32(3));
  CHECK(ibv_wc_read_qp_num(cqx) == qp->qp_num);
  CHECK(ibv_wc_read_src_qp(cqx) == 0x99);
  CHECK((ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM));
  CHECK(ibv_wc_read_slid(cqx) == 0);
  REQUIRE(ibv_next_poll(cqx) == 0);
  CHECK(cqx->wr_id == 78);
  CHECK(cqx->status == IBV_WC_REM_OP_ERR);
  CHECK(ibv_wc_read_vendor_err(cqx) == 0x42);
  CHECK(ibv_next_poll(cqx) == ENOENT);
  ibv_end_poll(cqx);
  CHECK(fp().fakeprov_violations() == 0);
  // Reading outside a session, or a field not asked for at creation.
  ibv_wc_read_byte_len(cqx);
  CHECK(fp().fakeprov_violations() == 1);
  fp().fakeprov_complete_recv(qp->qp_num, 0, 0, 0, 0);
  CHECK(ibv_start_poll(cqx, &pa) == ENOENT); // no receive posted: nothing completed
  rw.wr_id = 79;
  REQUIRE(ibv_post_recv(qp, &rw, &bad) == 0);
  REQUIRE(fp().fakeprov_complete_recv(qp->qp_num, 0, 0, 0, 0) == 0);
  REQUIRE(ibv_start_poll(cqx, &pa) == 0);
  ibv_wc_read_sl(cqx);
  CHECK(fp().fakeprov_violations() == 2);
  ibv_end_poll(cqx);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  CHECK(fp().fakeprov_live_total() == baseline);
  CHECK(fp().fakeprov_violations() == 2);
}

TEST_CASE("fakeprov: UD sends go through an address handle; SRQ receives are shared") {
  start();
  {
    pair p(IBV_QPT_UD);
    ibv_ah_attr aa{};
    aa.port_num = 1;
    CHECK(ibv_create_ah(p.pd, &aa) == nullptr); // RoCE: GRH needed
    aa.is_global = 1;
    aa.grh.sgid_index = 1;
    ibv_ah *ah = ibv_create_ah(p.pd, &aa);
    REQUIRE(ah);
    CHECK(fp().fakeprov_live(FAKEPROV_AH) == 1);
    p.post_recv(1, 5, 0, 100);
    std::memcpy(p.buf[0].data(), "datagram", 8);
    ibv_sge s{p.addr(0), 8, p.mr[0]->lkey};
    ibv_send_wr w = send_wr(9, IBV_WR_SEND, &s, 1, IBV_SEND_SIGNALED);
    w.wr.ud.ah = ah;
    w.wr.ud.remote_qpn = p.qp[1]->qp_num;
    w.wr.ud.remote_qkey = 0x11111111;
    ibv_send_wr *bad = nullptr;
    REQUIRE(ibv_post_send(p.qp[0], &w, &bad) == 0);
    auto log = wr_log(p.qp[0]->qp_num);
    REQUIRE(log.size() == 1);
    CHECK(log[0].ud_ah == ah);
    CHECK(log[0].ud_remote_qpn == p.qp[1]->qp_num);
    CHECK(log[0].ud_remote_qkey == 0x11111111);
    auto rc = p.poll(1, 1);
    CHECK(rc[0].byte_len == 48); // with the 40-byte GRH
    CHECK((rc[0].wc_flags & IBV_WC_GRH));
    CHECK(std::memcmp(p.buf[1].data() + 40, "datagram", 8) == 0);
    CHECK(p.poll(0, 1)[0].opcode == IBV_WC_SEND);
    // RDMA on UD is refused.
    ibv_send_wr rd = send_wr(10, IBV_WR_RDMA_WRITE, &s, 1, 0);
    rd.wr.ud.ah = ah;
    CHECK(ibv_post_send(p.qp[0], &rd, &bad) == EINVAL);
    CHECK(ibv_dealloc_pd(p.pd) == EBUSY);
    CHECK(ibv_destroy_ah(ah) == 0);
  }
  finish();

  ibv_context *ctx = open_fake();
  ibv_pd *pd = ibv_alloc_pd(ctx);
  ibv_cq *cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 100;
  sa.attr.max_sge = 1;
  CHECK(ibv_create_srq(pd, &sa) == nullptr); // above max_srq_wr
  sa.attr.max_wr = 4;
  ibv_srq *srq = ibv_create_srq(pd, &sa);
  REQUIRE(srq);
  ibv_qp_init_attr qa{};
  qa.qp_type = IBV_QPT_RC;
  qa.send_cq = qa.recv_cq = cq;
  qa.srq = srq;
  qa.cap.max_send_wr = 4;
  qa.cap.max_send_sge = 1;
  ibv_qp *qp = ibv_create_qp(pd, &qa);
  REQUIRE(qp);
  ibv_recv_wr rw{};
  rw.wr_id = 31;
  ibv_recv_wr *bad = nullptr;
  CHECK(ibv_post_recv(qp, &rw, &bad) == EINVAL); // the QP receives from its SRQ
  REQUIRE(ibv_post_srq_recv(srq, &rw, &bad) == 0);
  auto log = wr_log(srq->handle);
  REQUIRE(log.size() == 1);
  CHECK(log[0].kind == FAKEPROV_WR_SRQ_RECV);
  REQUIRE(fp().fakeprov_complete_recv(qp->qp_num, 16, 0, 0, 3) == 0);
  ibv_wc wc{};
  REQUIRE(ibv_poll_cq(cq, 1, &wc) == 1);
  CHECK(wc.wr_id == 31);
  CHECK(wc.qp_num == qp->qp_num);
  CHECK(wc.byte_len == 16);
  CHECK(ibv_destroy_srq(srq) == EBUSY);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_srq(srq) == 0);
  fp().fakeprov_set(FAKEPROV_MAX_SRQ, 0);
  errno = 0;
  CHECK(ibv_create_srq(pd, &sa) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  finish();
}

TEST_CASE("fakeprov: teardown follows the real library's EBUSY rules; misuse is counted") {
  start();
  ibv_context *ctx = open_fake();
  ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
  REQUIRE(ch);
  ibv_pd *pd = ibv_alloc_pd(ctx);
  ibv_cq *cq = ibv_create_cq(ctx, 4, nullptr, ch, 0);
  REQUIRE(cq);
  char b[16];
  ibv_mr *mr = ibv_reg_mr(pd, b, sizeof(b), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr);
  CHECK(mr->lkey != mr->rkey);
  ibv_qp *qp = small_rc_qp(pd, cq, 1);
  CHECK(fp().fakeprov_live(FAKEPROV_CONTEXT) == 1);
  CHECK(fp().fakeprov_live(FAKEPROV_COMP_CHANNEL) == 1);
  CHECK(fp().fakeprov_live(FAKEPROV_PD) == 1);
  CHECK(fp().fakeprov_live(FAKEPROV_CQ) == 1);
  CHECK(fp().fakeprov_live(FAKEPROV_MR) == 1);
  CHECK(fp().fakeprov_live(FAKEPROV_QP) == 1);
  CHECK(ibv_dealloc_pd(pd) == EBUSY);
  CHECK(ibv_destroy_cq(cq) == EBUSY);
  errno = 0;
  CHECK(ibv_destroy_comp_channel(ch) == -1);
  CHECK(errno == EBUSY);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_dealloc_pd(pd) == EBUSY); // the MR still uses it
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_destroy_comp_channel(ch) == 0);
  CHECK(fp().fakeprov_violations() == 0);
  // Use after destroy and double destroy: refused and counted.
  CHECK(ibv_dealloc_pd(pd) == EINVAL);
  CHECK(fp().fakeprov_violations() == 1);
  CHECK(std::string(fp().fakeprov_last_violation()).find("destroyed") != std::string::npos);
  ibv_wc wc;
  CHECK(ibv_poll_cq(cq, 1, &wc) == -1);
  ibv_send_wr w{};
  ibv_send_wr *bad = nullptr;
  CHECK(ibv_post_send(qp, &w, &bad) == EINVAL);
  CHECK(fp().fakeprov_violations() == 3);
  CHECK(ibv_alloc_pd(reinterpret_cast<ibv_context *>(&wc)) == nullptr); // never handed out
  CHECK(fp().fakeprov_violations() == 4);
  CHECK(fp().fakeprov_live_total() == baseline + 1);
  // Closing with live children: done, and counted.
  CHECK(ibv_alloc_pd(ctx) != nullptr);
  CHECK(ibv_close_device(ctx) == 0);
  CHECK(fp().fakeprov_violations() == 5);
  CHECK(std::string(fp().fakeprov_last_violation()).find("live children") != std::string::npos);
  CHECK(fp().fakeprov_live(FAKEPROV_PD) == 1); // leaked
  CHECK(ibv_close_device(ctx) == -1);
  CHECK(fp().fakeprov_violations() == 6);
}

TEST_CASE("fakeprov: scripted failures, and the extended ops missing or refused") {
  start();
  fp().fakeprov_fail_next(FAKEPROV_OP_OPEN_DEVICE, ENOMEM, 1);
  int n = 0;
  ibv_device **list = ibv_get_device_list(&n);
  REQUIRE(list);
  errno = 0;
  CHECK(ibv_open_device(list[0]) == nullptr);
  CHECK(errno == ENOMEM);
  ibv_context *ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  REQUIRE(ctx);
  fp().fakeprov_fail_next(FAKEPROV_OP_GET_DEVICE_LIST, EPERM, 1);
  errno = 0;
  CHECK(ibv_get_device_list(&n) == nullptr);
  CHECK(errno == EPERM);
  fp().fakeprov_fail_next(FAKEPROV_OP_ALLOC_PD, EAGAIN, 2);
  CHECK(ibv_alloc_pd(ctx) == nullptr);
  CHECK(ibv_alloc_pd(ctx) == nullptr);
  ibv_pd *pd = ibv_alloc_pd(ctx);
  REQUIRE(pd);
  fp().fakeprov_fail_next(FAKEPROV_OP_QUERY_PORT, EIO, 1);
  ibv_port_attr pa{};
  CHECK(ibv_query_port(ctx, 1, &pa) == EIO);
  fp().fakeprov_fail_next(FAKEPROV_OP_QUERY_GID, EIO, 1);
  std::array<ibv_gid_entry, 4> t{};
  CHECK(ibv_query_gid_table(ctx, t.data(), t.size(), 0) == -EIO);
  fp().fakeprov_fail_next(FAKEPROV_OP_REG_MR, ENOMEM, 1);
  char b[8];
  errno = 0;
  CHECK(ibv_reg_mr(pd, b, sizeof(b), IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == ENOMEM);
  CHECK(ibv_reg_mr(pd, b, sizeof(b), IBV_ACCESS_REMOTE_WRITE) == nullptr); // needs local write

  // The extended CQ and QP: refused with EOPNOTSUPP (rdma-core 33.2's rxe).
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 4;
  fp().fakeprov_set(FAKEPROV_CQ_EX, FAKEPROV_EX_EOPNOTSUPP);
  CHECK(verbs_get_ctx_op(ctx, create_cq_ex) != nullptr);
  errno = 0;
  CHECK(ibv_create_cq_ex(ctx, &ca) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  // ... or absent: the op is NULL.
  fp().fakeprov_set(FAKEPROV_CQ_EX, FAKEPROV_EX_ABSENT);
  CHECK(verbs_get_ctx_op(ctx, create_cq_ex) == nullptr);
  errno = 0;
  CHECK(ibv_create_cq_ex(ctx, &ca) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  ibv_cq *cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  REQUIRE(cq);
  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_RC;
  qa.send_cq = qa.recv_cq = cq;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  qa.pd = pd;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qa.send_ops_flags = IBV_QP_EX_WITH_SEND;
  fp().fakeprov_set(FAKEPROV_QP_EX, FAKEPROV_EX_EOPNOTSUPP);
  errno = 0;
  CHECK(ibv_create_qp_ex(ctx, &qa) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  fp().fakeprov_set(FAKEPROV_QP_EX, FAKEPROV_EX_ABSENT);
  CHECK(verbs_get_ctx_op(ctx, create_qp_ex) == nullptr);
  errno = 0;
  CHECK(ibv_create_qp_ex(ctx, &qa) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  fp().fakeprov_set(FAKEPROV_QP_EX, FAKEPROV_EX_WORKS);
  qa.send_ops_flags = IBV_QP_EX_WITH_TSO; // not offered
  CHECK(ibv_create_qp_ex(ctx, &qa) == nullptr);
  qa.cap.max_send_wr = 1000; // above max_qp_wr
  qa.comp_mask = IBV_QP_INIT_ATTR_PD;
  CHECK(ibv_create_qp_ex(ctx, &qa) == nullptr);
  fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_QP, ENOSPC, 1);
  qa.cap.max_send_wr = 1;
  errno = 0;
  CHECK(ibv_create_qp_ex(ctx, &qa) == nullptr); // PD-only mask: ibv_create_qp
  CHECK(errno == ENOSPC);
  ibv_qp *qp = ibv_create_qp_ex(ctx, &qa);
  REQUIRE(qp);
  fp().fakeprov_fail_next(FAKEPROV_OP_DESTROY_QP, EIO, 1);
  CHECK(ibv_destroy_qp(qp) == EIO);
  CHECK(ibv_destroy_qp(qp) == 0);
  fp().fakeprov_fail_next(FAKEPROV_OP_POLL_CQ, EIO, 1);
  ibv_wc wc;
  CHECK(ibv_poll_cq(cq, 1, &wc) == -1);
  CHECK(ibv_poll_cq(cq, 1, &wc) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  finish();
}

TEST_CASE("fakeprov: a completion channel delivers one event per armed CQ") {
  start();
  ibv_context *ctx = open_fake();
  ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
  REQUIRE(ch);
  int token = 0;
  ibv_cq *cq = ibv_create_cq(ctx, 4, &token, ch, 0);
  REQUIRE(cq);
  ibv_pd *pd = ibv_alloc_pd(ctx);
  ibv_qp_init_attr qa{};
  qa.qp_type = IBV_QPT_UC;
  qa.send_cq = qa.recv_cq = cq;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ibv_qp *qp = ibv_create_qp(pd, &qa);
  REQUIRE(qp);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  REQUIRE(ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  REQUIRE(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0);
  ibv_cq *ev = nullptr;
  void *evctx = nullptr;
  CHECK(ibv_get_cq_event(ch, &ev, &evctx) == -1); // nothing yet
  REQUIRE(ibv_req_notify_cq(cq, 0) == 0);
  ibv_recv_wr rw{};
  ibv_recv_wr *bad = nullptr;
  REQUIRE(ibv_post_recv(qp, &rw, &bad) == 0);
  REQUIRE(ibv_post_recv(qp, &rw, &bad) == 0);
  REQUIRE(fp().fakeprov_complete_recv(qp->qp_num, 0, 0, 0, 0) == 0);
  REQUIRE(fp().fakeprov_complete_recv(qp->qp_num, 0, 0, 0, 0) == 0);
  REQUIRE(ibv_get_cq_event(ch, &ev, &evctx) == 0);
  CHECK(ev == cq);
  CHECK(evctx == &token);
  CHECK(ibv_get_cq_event(ch, &ev, &evctx) == -1); // one event per arming
  ibv_ack_cq_events(cq, 1);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_destroy_comp_channel(ch) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  finish();
}

TEST_CASE("fakeprov: MINIMAL_OPS completes signalled sends and receives at once, logging nothing") {
  start();
  fp().fakeprov_set(FAKEPROV_MINIMAL_OPS, 1);
  ibv_context *ctx = open_fake();
  ibv_pd *pd = ibv_alloc_pd(ctx);
  ibv_cq *cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  REQUIRE(pd);
  REQUIRE(cq);
  ibv_qp *qp = small_rc_qp(pd, cq);
  std::array<unsigned char, 16> buf{};
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 8, 0};
  ibv_send_wr unsignalled{}, signalled{};
  unsignalled.wr_id = 1;
  unsignalled.next = &signalled;
  unsignalled.opcode = signalled.opcode = IBV_WR_RDMA_WRITE;
  signalled.wr_id = 2;
  signalled.sg_list = &sge;
  signalled.num_sge = 1;
  signalled.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr *bad = nullptr;
  // No state check, as promised: the QP is still in RESET.
  REQUIRE(ibv_post_send(qp, &unsignalled, &bad) == 0);
  ibv_recv_wr rw{};
  rw.wr_id = 3;
  rw.sg_list = &sge;
  rw.num_sge = 1;
  ibv_recv_wr *rbad = nullptr;
  REQUIRE(ibv_post_recv(qp, &rw, &rbad) == 0);
  std::array<ibv_wc, 4> wc{};
  REQUIRE(ibv_poll_cq(cq, 4, wc.data()) == 2);
  CHECK(wc[0].wr_id == 2);
  CHECK(wc[0].opcode == IBV_WC_RDMA_WRITE);
  CHECK(wc[0].byte_len == 8);
  CHECK(wc[0].qp_num == qp->qp_num);
  CHECK(wc[1].wr_id == 3);
  CHECK(wc[1].opcode == IBV_WC_RECV);
  CHECK(wc[1].status == IBV_WC_SUCCESS);
  CHECK(ibv_poll_cq(cq, 4, wc.data()) == 0);
  CHECK(fp().fakeprov_wr_log(qp->qp_num, nullptr, 0) == 0);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  fp().fakeprov_reset();
  finish();
}

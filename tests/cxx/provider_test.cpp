// SPDX-License-Identifier: MIT
// The C++ layer against the scripted fake provider (tests/fakes/fake_provider.c),
// run in every host tier: the work request built for every operation, batch
// chaining and its limits, the completion mapping, the extended-CQ and WR-API
// paths and their fallbacks, borrowed QPs' endpoints, every teardown order,
// and injected errors surfacing as the right std::error_code (the checks
// before any modify are in provider_connect_test.cpp). ctest points
// RDMADL_IBVERBS_PATH at the fake. Each case checks at its end that nothing
// is live any more and that the fake saw no use after free, double destroy
// or close with live children.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include "rdmadl/native.hpp" // IBV_* values and native fields only; no ibv_* call

#include "fake_provider_case.hpp"
#include "test_ok.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {

// Two connected queue pairs of one type on one context, a registered buffer
// each, one CQ each.
struct rig {
  context ctx;
  protection_domain pd;
  alignas(64) std::array<std::array<std::byte, 512>, 2> buf{}; // atomics need 8-byte alignment
  memory_region mr[2];
  completion_queue cq[2];
  queue_pair qp[2];

  explicit rig(qp_type t = qp_type::rc, bool extended = false, bool wr_api = false,
               std::uint32_t max_inline = 32) {
    ctx = ok(context::open(FAKEPROV_DEVICE_NAME));
    pd = ok(protection_domain::create(ctx));
    for (int i = 0; i < 2; i++) {
      mr[i] = ok(pd.register_memory(buf[i], access::remote_write | access::remote_read |
                                                access::remote_atomic));
      cq_options co;
      co.depth = 64;
      co.extended = extended;
      cq[i] = ok(completion_queue::create(ctx, co));
      CHECK(cq[i].extended() == extended);
      qp_options qo;
      qo.type = t;
      qo.send_depth = 16;
      qo.recv_depth = 16;
      qo.max_inline = max_inline;
      qo.wr_api = wr_api;
      qp[i] = ok(queue_pair::create(ctx, pd, cq[i], cq[i], qo));
      CHECK(qp[i].uses_wr_api() == wr_api);
    }
    auto e0 = ok(qp[0].local_endpoint());
    auto e1 = ok(qp[1].local_endpoint());
    ok(qp[0].connect(e1));
    ok(qp[1].connect(e0));
  }
  local_slice at(int i, std::size_t off, std::size_t len) { return ok(mr[i].slice(off, len)); }
  remote_region remote(int i, std::size_t off, std::size_t len) {
    return ok(mr[i].remote(off, len));
  }
  std::byte *bytes(int i, std::size_t off) { return buf[static_cast<std::size_t>(i)].data() + off; }
  std::vector<completion> poll(int i, std::size_t want) {
    std::vector<completion> out(want + 1);
    auto n = ok(cq[i].poll(out));
    CHECK(n == want);
    out.resize(n);
    return out;
  }
};

void put(std::byte *p, const char *s) {
  std::memcpy(p, s, std::strlen(s));
}
bool has(const std::byte *p, const char *s) {
  return std::memcmp(p, s, std::strlen(s)) == 0;
}

// Every single-post operation: the WR in the fake's log, the completions on
// both sides and the bytes moved.
void every_operation(bool extended_cq) {
  start();
  {
    rig r(qp_type::rc, extended_cq);
    const std::uint32_t q0 = r.qp[0].qp_num(), q1 = r.qp[1].qp_num();
    ok(r.qp[1].post_recv(r.at(1, 0, 64), 100));
    ok(r.qp[1].post_recv(r.at(1, 64, 64), 101));
    ok(r.qp[1].post_recv(r.at(1, 128, 64), 102));
    put(r.bytes(0, 0), "payload");
    ok(r.qp[0].post_send(r.at(0, 0, 7), 1));
    ok(r.qp[0].post_send_imm(r.at(0, 0, 7), 0xabcdef01, 2, send_flags::signaled));
    put(r.bytes(0, 16), "written");
    ok(r.qp[0].post_write(r.at(0, 16, 7), r.remote(1, 300, 7), 3));
    ok(r.qp[0].post_write_imm(r.at(0, 16, 7), r.remote(1, 310, 7), 77, 4));
    put(r.bytes(1, 320), "readme");
    ok(r.qp[0].post_read(r.at(0, 32, 6), r.remote(1, 320, 6), 5));
    std::uint64_t v = 40;
    std::memcpy(r.bytes(1, 400), &v, 8);
    ok(r.qp[0].post_fetch_add(r.at(0, 64, 8), r.remote(1, 400, 8), 2, 6));
    ok(r.qp[0].post_compare_swap(r.at(0, 72, 8), r.remote(1, 400, 8), 42, 7, 7));
    ok(r.qp[0].post_write(r.at(0, 16, 7), r.remote(1, 300, 7), 8, send_flags::none));

    auto log = wr_log(q0);
    REQUIRE(log.size() == 8);
    const int ops[] = {IBV_WR_SEND,
                       IBV_WR_SEND_WITH_IMM,
                       IBV_WR_RDMA_WRITE,
                       IBV_WR_RDMA_WRITE_WITH_IMM,
                       IBV_WR_RDMA_READ,
                       IBV_WR_ATOMIC_FETCH_AND_ADD,
                       IBV_WR_ATOMIC_CMP_AND_SWP,
                       IBV_WR_RDMA_WRITE};
    for (std::size_t i = 0; i < log.size(); i++) {
      CAPTURE(i);
      const auto &w = log[i];
      CHECK(w.kind == FAKEPROV_WR_SEND);
      CHECK(w.via_wr_api == 0); // single posts are always ibv_post_send
      CHECK(w.chain_length == 1);
      CHECK(w.wr_id == i + 1);
      CHECK(w.opcode == ops[i]);
      CHECK(w.send_flags == (i == 7 ? 0u : unsigned{IBV_SEND_SIGNALED}));
      CHECK(w.num_sge == 1);
    }
    CHECK(log[0].sge[0].addr == reinterpret_cast<std::uint64_t>(r.bytes(0, 0)));
    CHECK(log[0].sge[0].length == 7);
    CHECK(log[0].sge[0].lkey == r.mr[0].lkey());
    CHECK(log[1].imm_data == htobe32(0xabcdef01));
    CHECK(log[2].remote_addr == reinterpret_cast<std::uint64_t>(r.bytes(1, 300)));
    CHECK(log[2].rkey == r.mr[1].rkey());
    CHECK(log[3].imm_data == htobe32(77));
    CHECK(log[4].remote_addr == reinterpret_cast<std::uint64_t>(r.bytes(1, 320)));
    CHECK(log[4].sge[0].length == 6);
    CHECK(log[5].compare_add == 2);
    CHECK(log[5].rkey == r.mr[1].rkey());
    CHECK(log[6].compare_add == 42);
    CHECK(log[6].swap == 7);
    CHECK(log[6].remote_addr == reinterpret_cast<std::uint64_t>(r.bytes(1, 400)));

    // The bytes moved.
    CHECK(has(r.bytes(1, 0), "payload"));
    CHECK(has(r.bytes(1, 64), "payload"));
    CHECK(has(r.bytes(1, 300), "written"));
    CHECK(has(r.bytes(1, 310), "written"));
    CHECK(has(r.bytes(0, 32), "readme"));
    std::memcpy(&v, r.bytes(1, 400), 8);
    CHECK(v == 7); // 40 + 2 = 42, then compare 42 -> swap 7
    std::memcpy(&v, r.bytes(0, 64), 8);
    CHECK(v == 40);
    std::memcpy(&v, r.bytes(0, 72), 8);
    CHECK(v == 42);

    // Sender completions: one per signalled WR, opcode mapped.
    auto sc = r.poll(0, 7);
    const wc_opcode sops[] = {wc_opcode::send,       wc_opcode::send,      wc_opcode::rdma_write,
                              wc_opcode::rdma_write, wc_opcode::rdma_read, wc_opcode::fetch_add,
                              wc_opcode::comp_swap};
    for (std::size_t i = 0; i < sc.size(); i++) {
      CAPTURE(i);
      CHECK(sc[i].ok());
      CHECK(!sc[i].error());
      CHECK(sc[i].wr_id == i + 1);
      CHECK(sc[i].opcode == sops[i]);
      CHECK(sc[i].qp_num == q0);
      CHECK_FALSE(sc[i].has_imm());
    }
    CHECK(sc[4].byte_len == 6);
    CHECK(sc[5].byte_len == 8);
    // Receiver: two sends and one write with immediate.
    auto rc = r.poll(1, 3);
    CHECK(rc[0].wr_id == 100);
    CHECK(rc[0].opcode == wc_opcode::recv);
    CHECK(rc[0].byte_len == 7);
    CHECK(rc[0].src_qp == q0);
    CHECK(rc[0].qp_num == q1);
    CHECK_FALSE(rc[0].has_imm());
    CHECK(rc[0].imm() == 0);
    CHECK(rc[1].wr_id == 101);
    CHECK(rc[1].has_imm());
    CHECK(rc[1].imm() == 0xabcdef01);
    CHECK(rc[1].imm_be == htobe32(0xabcdef01));
    CHECK(rc[2].wr_id == 102);
    CHECK(rc[2].opcode == wc_opcode::recv_rdma_with_imm);
    CHECK(rc[2].imm() == 77);
    CHECK(rc[2].byte_len == 7);
  }
  finish();
}

} // namespace

TEST_CASE("provider: the fake device, its attributes, ports and GID selection") {
  start();
  {
    auto list = ok(device_list::get());
    REQUIRE(list.size() == 1);
    CHECK(list[0].name() == FAKEPROV_DEVICE_NAME);
    CHECK(list[0].guid() == FAKEPROV_NODE_GUID);
    CHECK(list[0].node() == node_type::ca);
    CHECK(list[0].transport_type() == transport::ib);
    CHECK(list.find("nope").error() == errc::no_devices);
    auto ctx = ok(context::open());
    CHECK(ctx.device_name() == FAKEPROV_DEVICE_NAME);
    auto d = ok(ctx.query_device());
    CHECK(d.max_qp_wr == 64);
    CHECK(d.max_sge == 4);
    CHECK(d.max_cqe == 256);
    CHECK(d.max_qp_rd_atom == 4);
    CHECK(d.node_guid == FAKEPROV_NODE_GUID);
    CHECK(d.atomic == atomic_cap::hca);
    CHECK(d.phys_port_cnt == 1);
    auto p = ok(ctx.query_port(1));
    CHECK(p.state == port_state::active);
    CHECK(p.link == link_layer::ethernet);
    CHECK(p.active_mtu == 1024);
    CHECK(p.max_mtu == 4096);
    CHECK(ctx.query_port(2).error() == std::errc::invalid_argument);
    CHECK(ok(ctx.first_active_port()) == 1);
    auto t = ok(ctx.gid_table(1));
    REQUIRE(t.size() == 3);
    CHECK(t[0].type == gid_type::roce_v1);
    CHECK(t[1].type == gid_type::roce_v2);
    CHECK(t[1].value.is_ipv4_mapped());
    CHECK(t[2].type == gid_type::roce_v2);
    CHECK(t[2].value.raw[0] == 0xfe);
    // RoCE: the IPv4-mapped RoCE v2 GID first; never a blind index 0.
    CHECK(ok(ctx.select_gid(1)).index == 1);
    CHECK(ok(ctx.select_gid(1, {gid_type::roce_v1, 0})).index == 0);
    CHECK(ok(ctx.select_gid(1, {gid_type::roce_v2, 0x01020304})).index == 1);
    CHECK(ctx.supports(feature::extended_cq));
    CHECK(ctx.supports(feature::wr_api));
    CHECK(ctx.supports(feature::srq));
    // The object running its data path is the fake libibverbs itself, which
    // rdma-core ships no direct-verbs library for.
    auto pi = ctx.provider();
    CHECK(pi.name == "ibverbs");
    CHECK(pi.file.find("fake_provider/libibverbs.so.1") != std::string::npos);
    CHECK(!pi.direct_verbs);
    CHECK(!pi.direct_verbs_usable);
    CHECK(context{}.provider().name.empty());
    // InfiniBand: GID 0 and the LID.
    fp().fakeprov_set(FAKEPROV_PORT_LINK_LAYER, IBV_LINK_LAYER_INFINIBAND);
    fp().fakeprov_set(FAKEPROV_PORT_LID, 0x2a);
    CHECK(ok(ctx.query_port(1)).link == link_layer::infiniband);
    CHECK(ok(ctx.query_port(1)).lid == 0x2a);
    CHECK(ok(ctx.select_gid(1)).index == 0);
    CHECK(ok(ctx.select_gid(1)).type == gid_type::ib);
    // No active port.
    fp().fakeprov_set(FAKEPROV_PORT_STATE, IBV_PORT_DOWN);
    CHECK(ctx.first_active_port().error() == errc::no_active_port);
    fp().fakeprov_reset();
    fp().fakeprov_set(FAKEPROV_MAX_SRQ, 0);
    CHECK_FALSE(ctx.supports(feature::srq));
  }
  finish();
}

TEST_CASE("provider: every operation's work request and completion, plain CQ") {
  every_operation(false);
}

TEST_CASE("provider: every operation's work request and completion, extended CQ") {
  every_operation(true);
}

TEST_CASE("provider: prepared requests post again after patching; UC refuses reads") {
  start();
  {
    rig r(qp_type::uc);
    const local_slice src = r.at(0, 0, 8); // sg_list points at it
    auto w = send_request::write(src, r.remote(1, 64, 8), 1, send_flags::none);
    for (std::uint64_t id = 1; id <= 3; id++) {
      w.wr_id = id;
      w.wr.rdma.remote_addr = reinterpret_cast<std::uint64_t>(r.bytes(1, 64 + 8 * id));
      ok(r.qp[0].post(w));
    }
    auto log = wr_log(r.qp[0].qp_num());
    REQUIRE(log.size() == 3);
    for (std::uint64_t id = 1; id <= 3; id++) {
      CHECK(log[id - 1].wr_id == id);
      CHECK(log[id - 1].opcode == IBV_WR_RDMA_WRITE);
      CHECK(log[id - 1].remote_addr == reinterpret_cast<std::uint64_t>(r.bytes(1, 64 + 8 * id)));
    }
    // A chain through next is one post.
    auto w2 = w;
    w.next = &w2;
    w2.wr_id = 9;
    ok(r.qp[0].post(w));
    log = wr_log(r.qp[0].qp_num());
    REQUIRE(log.size() == 5);
    CHECK(log[3].chain_length == 2);
    CHECK(log[4].wr_id == 9);
    CHECK(r.poll(0, 0).empty()); // all unsignalled, all fine
    // UC carries sends and writes, not reads or atomics.
    CHECK(r.qp[0].post_read(r.at(0, 0, 8), r.remote(1, 0, 8), 1).error() == errc::wrong_qp_type);
    CHECK(r.qp[0].post_fetch_add(r.at(0, 0, 8), r.remote(1, 0, 8), 1, 1).error() ==
          errc::wrong_qp_type);
    CHECK(r.qp[0].post_compare_swap(r.at(0, 0, 8), r.remote(1, 0, 8), 1, 2, 1).error() ==
          errc::wrong_qp_type);
    auto b = r.qp[0].batch();
    b.read(r.at(0, 0, 8), r.remote(1, 0, 8), 1);
    CHECK(b.commit().error() == errc::wrong_qp_type);
    ok(r.qp[1].post_recv(r.at(1, 0, 16), 4));
    ok(r.qp[0].post_send(r.at(0, 0, 8), 5));
    CHECK(r.poll(1, 1)[0].byte_len == 8);
    CHECK(wr_log(r.qp[0].qp_num()).size() == 6);
    CHECK(queue_pair().post_send(r.at(0, 0, 8), 1).error() == errc::empty_object);
  }
  finish();
}

TEST_CASE("provider: empty and moved-from handles answer empty_object to every post and poll") {
  start();
  {
    rig r(qp_type::rc);
    auto srq = ok(shared_receive_queue::create(r.pd));
    auto s = r.at(0, 0, 8);
    auto w = send_request::write(s, r.remote(1, 0, 8), 7);
    recv_request rw{8, nullptr, &s, 1};
    std::array<completion, 1> c;
    // Their post and poll functions are stubs that fail, so the data path
    // calls them unchecked; each error path names the empty object.
    queue_pair moved_qp = std::move(r.qp[0]);
    completion_queue moved_cq = std::move(r.cq[0]);
    shared_receive_queue moved_srq = std::move(srq);
    queue_pair empty_qp;
    for (queue_pair *q : {&empty_qp, &r.qp[0]}) {
      CHECK(q->post(w).error() == errc::empty_object);
      CHECK(q->post(rw).error() == errc::empty_object);
      CHECK(q->post_recv(s, 9).error() == errc::empty_object);
      CHECK(q->post_write(s, r.remote(1, 0, 8), 10).error() == errc::empty_object);
    }
    CHECK(ok(moved_cq.poll(c)) == 0);
    CHECK(completion_queue().poll(c).error() == errc::empty_object);
    CHECK(r.cq[0].poll(c).error() == errc::empty_object);
    CHECK(shared_receive_queue().post_recv(s, 11).error() == errc::empty_object);
    CHECK(srq.post_recv(s, 12).error() == errc::empty_object);
    // What they were moved into still reaches the provider.
    ok(moved_qp.post(w));
    CHECK(ok(moved_cq.poll(c)) == 1);
    CHECK(c[0].wr_id == 7);
    ok(moved_srq.post_recv(s, 13));
    // Moved back by assignment: the same again the other way.
    r.qp[0] = std::move(moved_qp);
    r.cq[0] = std::move(moved_cq);
    CHECK(moved_qp.post(w).error() == errc::empty_object);
    CHECK(moved_cq.poll(c).error() == errc::empty_object);
    ok(r.qp[0].post(w));
    CHECK(ok(r.cq[0].poll(c)) == 1);
  }
  finish();
}

TEST_CASE("provider: UD sends carry the address handle, QPN and Q_Key; SRQ receives") {
  start();
  {
    rig r(qp_type::ud);
    auto e1 = ok(r.qp[1].local_endpoint());
    CHECK(e1.qkey == 0x11111111);
    auto ah = ok(address_handle::create(r.pd, r.qp[0], e1));
    ok(r.qp[1].post_recv(r.at(1, 0, 128), 9));
    put(r.bytes(0, 0), "datagram");
    ok(r.qp[0].post_send_ud(r.at(0, 0, 8), ah, e1, 5));
    auto log = wr_log(r.qp[0].qp_num());
    REQUIRE(log.size() == 1);
    CHECK(log[0].opcode == IBV_WR_SEND);
    CHECK(log[0].ud_ah == ah.native_handle());
    CHECK(log[0].ud_remote_qpn == e1.qpn);
    CHECK(log[0].ud_remote_qkey == e1.qkey);
    auto rc = r.poll(1, 1);
    CHECK(rc[0].byte_len == 48);
    CHECK((rc[0].wc_flags & IBV_WC_GRH));
    CHECK(has(r.bytes(1, 40), "datagram"));
    CHECK(r.poll(0, 1)[0].opcode == wc_opcode::send);
    // What UD cannot carry is refused before the provider sees it...
    CHECK(r.qp[0].post_write(r.at(0, 0, 8), r.remote(1, 0, 8), 6).error() == errc::wrong_qp_type);
    CHECK(r.qp[0].post_send(r.at(0, 0, 8), 6).error() == errc::wrong_qp_type);
    CHECK(wr_log(r.qp[0].qp_num()).size() == 1);
    // ... and by the provider when posted unchecked.
    const local_slice src = r.at(0, 0, 8);
    auto raw = send_request::write(src, r.remote(1, 0, 8), 6);
    CHECK(r.qp[0].post(raw).error() == std::errc::invalid_argument);
    CHECK(wr_log(r.qp[0].qp_num()).size() == 1);
    // A batch refuses a UD send without an address, and RDMA on UD.
    auto b = r.qp[0].batch();
    b.send(r.at(0, 0, 8), 7);
    CHECK(b.commit().error() == errc::wrong_qp_type);
  }
  finish();

  start();
  {
    auto ctx = ok(context::open());
    auto pd = ok(protection_domain::create(ctx));
    auto cq = ok(completion_queue::create(ctx));
    auto srq = ok(shared_receive_queue::create(pd, 1000, 9)); // clamped to 64 / 4
    std::array<std::byte, 64> mem{};
    auto mr = ok(pd.register_memory(mem));
    qp_options qo;
    qo.srq = &srq;
    auto qp = ok(queue_pair::create(ctx, pd, cq, cq, qo));
    ok(srq.post_recv(ok(mr.slice(0, 32)), 31));
    auto log = wr_log(srq.native_handle()->handle);
    REQUIRE(log.size() == 1);
    CHECK(log[0].kind == FAKEPROV_WR_SRQ_RECV);
    CHECK(log[0].wr_id == 31);
    CHECK(log[0].sge[0].length == 32);
    CHECK(qp.post_recv(ok(mr.slice(0, 32)), 1).error() == std::errc::invalid_argument);
    REQUIRE(fp().fakeprov_complete_recv(qp.qp_num(), 20, 1, htobe32(5), 0x77) == 0);
    std::array<completion, 2> c;
    REQUIRE(ok(cq.poll(c)) == 1);
    CHECK(c[0].wr_id == 31);
    CHECK(c[0].qp_num == qp.qp_num());
    CHECK(c[0].src_qp == 0x77);
    CHECK(c[0].imm() == 5);
    CHECK(c[0].byte_len == 20);
  }
  finish();
}

TEST_CASE("provider: send batches chain one post or use the WR API, and refuse misuse") {
  for (bool wr_api : {false, true}) {
    CAPTURE(wr_api);
    start();
    {
      rig r(qp_type::rc, false, wr_api);
      const std::uint32_t q0 = r.qp[0].qp_num();
      ok(r.qp[1].post_recv(r.at(1, 0, 64), 50));
      put(r.bytes(0, 0), "abcdefgh");
      {
        auto b = r.qp[0].batch();
        b.send(r.at(0, 0, 4), 1)
            .write(r.at(0, 0, 8), r.remote(1, 100, 8), 2, send_flags::none)
            .write_imm(r.at(0, 4, 4), r.remote(1, 200, 4), 9, 3)
            .read(r.at(0, 64, 8), r.remote(1, 100, 8), 4)
            .send_imm(r.at(0, 0, 2), 12, 5, send_flags::signaled | send_flags::inline_data);
        CHECK(b.size() == 5);
        CHECK(wr_log(q0).empty()); // nothing posted before commit()
        // A second batch on the same QP is refused while this one is open.
        {
          auto other = r.qp[0].batch();
          other.send(r.at(0, 0, 4), 99);
          CHECK(other.commit().error() == errc::batch_busy);
          CHECK(other.commit().error() == errc::batch_busy);
        }
        ok(b.commit());
      }
      auto log = wr_log(q0);
      REQUIRE(log.size() == 5);
      for (std::size_t i = 0; i < log.size(); i++) {
        CAPTURE(i);
        CHECK(log[i].via_wr_api == (wr_api ? 1 : 0));
        CHECK(log[i].chain_index == static_cast<int>(i));
        CHECK(log[i].chain_length == 5);
        CHECK(log[i].wr_id == i + 1);
      }
      CHECK(log[0].opcode == IBV_WR_SEND);
      CHECK(log[0].sge[0].length == 4);
      CHECK(log[1].opcode == IBV_WR_RDMA_WRITE);
      CHECK(log[1].send_flags == 0);
      CHECK(log[1].rkey == r.mr[1].rkey());
      CHECK(log[1].remote_addr == reinterpret_cast<std::uint64_t>(r.bytes(1, 100)));
      CHECK(log[2].opcode == IBV_WR_RDMA_WRITE_WITH_IMM);
      CHECK(log[2].imm_data == htobe32(9));
      CHECK(log[3].opcode == IBV_WR_RDMA_READ);
      CHECK(log[4].opcode == IBV_WR_SEND_WITH_IMM);
      CHECK((log[4].send_flags & IBV_SEND_INLINE));
      CHECK(log[4].inline_length == 2);
      CHECK(has(reinterpret_cast<const std::byte *>(log[4].inline_data), "ab"));
      CHECK(has(r.bytes(1, 0), "abcd"));
      CHECK(has(r.bytes(1, 100), "abcdefgh"));
      CHECK(has(r.bytes(1, 200), "efgh"));
      CHECK(has(r.bytes(0, 64), "abcdefgh"));
      CHECK(r.poll(0, 4).size() == 4);

      // Limits: more than max_size requests; more than the QP's send queue.
      {
        auto b = r.qp[0].batch();
        for (std::size_t i = 0; i <= send_batch::max_size; i++)
          b.write(r.at(0, 0, 8), r.remote(1, 100, 8), i, send_flags::none);
        CHECK(b.size() == send_batch::max_size);
        CHECK(b.commit().error() == errc::batch_full);
        // Refilled after the error: 17 > the send queue's 16.
        for (int i = 0; i < 17; i++)
          b.write(r.at(0, 0, 8), r.remote(1, 100, 8), 1000, send_flags::none);
        auto e = b.commit();
        CHECK(e.error() == std::errc::not_enough_memory);
        CHECK(b.commit().error() == errc::empty_span);
      }
      // A batch dropped without commit() posts nothing.
      fp().fakeprov_wr_log_clear();
      {
        auto b = r.qp[0].batch();
        b.send(r.at(0, 0, 4), 1);
      }
      CHECK(wr_log(q0).empty());
      // The batch keeps its queue pair alive past the handle.
      {
        auto b = r.qp[0].batch();
        b.write(r.at(0, 0, 8), r.remote(1, 100, 8), 77);
        r.qp[0] = queue_pair();
        CHECK(fp().fakeprov_live(FAKEPROV_QP) == 2);
        ok(b.commit());
      }
      CHECK(fp().fakeprov_live(FAKEPROV_QP) == 1);
      CHECK(wr_log(q0).size() == 1);
      CHECK(queue_pair().batch().commit().error() == errc::empty_object);
    }
    finish();
  }
}

TEST_CASE("provider: every completion status maps to the wc category, plain and extended") {
  for (bool extended : {false, true}) {
    CAPTURE(extended);
    start();
    {
      rig r(qp_type::rc, extended);
      const std::uint32_t q1 = r.qp[1].qp_num();
      for (int status = IBV_WC_SUCCESS; status <= IBV_WC_TM_RNDV_INCOMPLETE; status++) {
        CAPTURE(status);
        ok(r.qp[1].post_recv(r.at(1, 0, 64), static_cast<std::uint64_t>(status)));
        fp().fakeprov_complete_with(1, status, 0x100u + static_cast<std::uint32_t>(status));
        REQUIRE(fp().fakeprov_complete_recv(q1, 33, 1, htobe32(0xfeed), 3) == 0);
        auto c = r.poll(1, 1);
        REQUIRE(c.size() == 1);
        CHECK(c[0].wr_id == static_cast<std::uint64_t>(status));
        CHECK(c[0].status == status);
        CHECK(c[0].qp_num == q1);
        if (status == 0) {
          CHECK(c[0].ok());
          CHECK(c[0].opcode == wc_opcode::recv);
          CHECK(c[0].byte_len == 33);
          CHECK(c[0].imm() == 0xfeed);
          CHECK(c[0].src_qp == 3);
        } else {
          CHECK_FALSE(c[0].ok());
          CHECK(c[0].vendor_err == 0x100u + static_cast<std::uint32_t>(status));
          CHECK(c[0].error() == std::error_code(status, wc_category()));
          CHECK(c[0].error().category() == wc_category());
          CHECK_FALSE(c[0].error().message().empty());
          CHECK_FALSE(c[0].has_imm());
        }
      }
      // A poll session reads the same fields one by one.
      for (int i = 0; i < 3; i++)
        ok(r.qp[1].post_recv(r.at(1, 0, 64), 500u + static_cast<unsigned>(i)));
      fp().fakeprov_complete_with(1, IBV_WC_REM_ACCESS_ERR, 9);
      REQUIRE(fp().fakeprov_complete_recv(q1, 1, 0, 0, 4) == 0);
      REQUIRE(fp().fakeprov_complete_recv(q1, 2, 1, htobe32(8), 4) == 0);
      REQUIRE(fp().fakeprov_complete_recv(q1, 3, 0, 0, 4) == 0);
      {
        auto s = ok(r.cq[1].start_poll());
        REQUIRE(static_cast<bool>(s));
        CHECK(s.wr_id() == 500);
        CHECK(s.status() == IBV_WC_REM_ACCESS_ERR);
        CHECK(s.error() == std::error_code(IBV_WC_REM_ACCESS_ERR, wc_category()));
        CHECK(s.vendor_err() == 9);
        CHECK(s.qp_num() == q1);
        REQUIRE(ok(s.next()));
        CHECK(s.wr_id() == 501);
        CHECK(s.status() == 0);
        CHECK(s.opcode() == wc_opcode::recv);
        CHECK(s.byte_len() == 2);
        CHECK(s.has_imm());
        CHECK(s.imm() == 8);
        CHECK(s.src_qp() == 4);
        CHECK(s.slid() == 0);
        REQUIRE(ok(s.next()));
        CHECK(s.wr_id() == 502);
        CHECK_FALSE(s.has_imm());
        CHECK_FALSE(ok(s.next()));
        CHECK_FALSE(static_cast<bool>(s));
      }
      {
        auto s = ok(r.cq[1].start_poll());
        CHECK_FALSE(static_cast<bool>(s)); // nothing queued: no session opened
      }
      std::array<completion, 4> none;
      CHECK(ok(r.cq[1].poll(none)) == 0);
      CHECK(r.cq[1].poll(std::span<completion>()).error() == errc::empty_span);
      CHECK(r.cq[1].poll_wait(none, 0ms).error() == errc::timed_out);
    }
    finish();
  }
}

TEST_CASE("provider: the extended CQ and WR API fall back when refused or absent") {
  for (long mode : {long{FAKEPROV_EX_EOPNOTSUPP}, long{FAKEPROV_EX_ABSENT}}) {
    CAPTURE(mode);
    start();
    fp().fakeprov_set(FAKEPROV_CQ_EX, mode);
    fp().fakeprov_set(FAKEPROV_QP_EX, mode);
    {
      rig r(qp_type::rc, false, false); // asks for neither, gets neither
      auto ctx = ok(context::open());
      CHECK_FALSE(ctx.supports(feature::extended_cq));
      CHECK_FALSE(ctx.supports(feature::wr_api));
      cq_options want_ex;
      want_ex.extended = true;
      auto cq = ok(completion_queue::create(ctx, want_ex)); // asked for, falls back
      CHECK_FALSE(cq.extended());
      auto pd = ok(protection_domain::create(ctx));
      auto qp = ok(queue_pair::create(ctx, pd, cq, cq)); // wr_api by default: falls back
      CHECK_FALSE(qp.uses_wr_api());
      // The batch then chains a post_send list.
      std::array<std::byte, 16> m{};
      auto mr = ok(pd.register_memory(m));
      ok(qp.connect(ok(qp.local_endpoint())));
      auto b = qp.batch();
      b.send(ok(mr.slice(0, 4)), 1).send(ok(mr.slice(4, 4)), 2);
      ok(b.commit());
      auto log = wr_log(qp.qp_num());
      REQUIRE(log.size() == 2);
      CHECK(log[1].via_wr_api == 0);
      CHECK(log[1].chain_length == 2);
    }
    finish();
  }
  start();
  {
    auto ctx = ok(context::open());
    CHECK(ctx.supports(feature::extended_cq));
    CHECK(ctx.supports(feature::wr_api));
    cq_options want_ex;
    want_ex.extended = true;
    // A real error of create_cq_ex is not taken for "not offered".
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_CQ_EX, ENOMEM, 1);
    CHECK(completion_queue::create(ctx, want_ex).error() == std::errc::not_enough_memory);
    // EINVAL is (rdma-core 33's rxe answers it): the plain queue is made.
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_CQ_EX, EINVAL, 1);
    auto cq = ok(completion_queue::create(ctx, want_ex));
    CHECK_FALSE(cq.extended());
    // Plain by default; extended when asked and supported.
    CHECK_FALSE(ok(completion_queue::create(ctx)).extended());
    CHECK(ok(completion_queue::create(ctx, want_ex)).extended());
    auto pd = ok(protection_domain::create(ctx));
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_QP_EX, ENOSPC, 1);
    CHECK(queue_pair::create(ctx, pd, cq, cq).error() == std::errc::no_space_on_device);
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_QP_EX, EOPNOTSUPP, 1);
    CHECK_FALSE(ok(queue_pair::create(ctx, pd, cq, cq)).uses_wr_api());
    qp_options classic;
    classic.wr_api = false;
    CHECK_FALSE(ok(queue_pair::create(ctx, pd, cq, cq, classic)).uses_wr_api());
    CHECK(ok(queue_pair::create(ctx, pd, cq, cq)).uses_wr_api());
    // A device that reports max_cqe <= 0: no clamp with lo > hi, a queue anyway.
    fp().fakeprov_set(FAKEPROV_MAX_CQE, 0);
    cq_options big;
    big.depth = 1000;
    CHECK(ok(completion_queue::create(ctx, big)).depth() == 1000);
    fp().fakeprov_set(FAKEPROV_MAX_CQE, -5);
    big.depth = 0;
    CHECK(ok(completion_queue::create(ctx, big)).depth() >= 1);
  }
  finish();
}

TEST_CASE("provider: a borrowed queue pair learns its port, GID, LID and PSN") {
  start();
  {
    auto ctx = ok(context::open());
    auto pd = ok(protection_domain::create(ctx));
    auto cq = ok(completion_queue::create(ctx));
    qp_options qo;
    qo.gid_index = 2; // fe80:: RoCE v2, not what select_gid would pick
    auto a = ok(queue_pair::create(ctx, pd, cq, cq, qo));
    auto b = ok(queue_pair::create(ctx, pd, cq, cq, qo)); // a's peer: a GID of a's family
    // In RESET: the path comes from the options, as create() selects it.
    auto fresh = ok(queue_pair::borrow(a.native_handle(), qp_type::rc));
    auto fe = ok(fresh.local_endpoint());
    CHECK(fe.qpn == a.qp_num());
    CHECK(fresh.port() == 1);
    CHECK(fe.gid_value == ok(ctx.select_gid(1)).value); // index 1
    CHECK(fe.gid_value.is_ipv4_mapped());
    CHECK(fe.lid == 0);
    CHECK(fe.mtu == 1024);
    ok(a.connect(ok(b.local_endpoint())));
    std::array<fakeprov_modify_record, 4> m{};
    REQUIRE(fp().fakeprov_modify_log(a.qp_num(), m.data(), m.size()) == 3);
    CHECK(m[1].sgid_index == 2);
    CHECK(m[1].is_global == 1);
    CHECK(m[1].dest_qp_num == b.qp_num());
    CHECK(m[1].path_mtu == IBV_MTU_1024);
    CHECK(m[2].sq_psn == ok(a.local_endpoint()).psn);
    // Connected: the GID index of its address vector, its SQ PSN.
    auto borrowed = ok(queue_pair::borrow(a.native_handle(), qp_type::rc));
    auto e = ok(borrowed.local_endpoint());
    auto orig = ok(a.local_endpoint());
    CHECK(e.qpn == orig.qpn);
    CHECK(e.psn == orig.psn);
    CHECK(e.gid_value == orig.gid_value);
    CHECK(e.gid_value.raw[0] == 0xfe);
    CHECK(borrowed.port() == 1);
    // Borrowed: destroying the handle leaves the QP to its owner.
    borrowed = queue_pair();
    fresh = queue_pair();
    CHECK(fp().fakeprov_live(FAKEPROV_QP) == 2);
    // InfiniBand: the port's LID.
    fp().fakeprov_set(FAKEPROV_PORT_LINK_LAYER, IBV_LINK_LAYER_INFINIBAND);
    fp().fakeprov_set(FAKEPROV_PORT_LID, 0x1234);
    auto ib = ok(queue_pair::borrow(b.native_handle(), qp_type::rc));
    CHECK(ok(ib.local_endpoint()).lid == 0x1234);
    CHECK(queue_pair::borrow(nullptr, qp_type::rc).error() == errc::empty_object);
  }
  finish();
}

namespace {
// Every kind of object, made in dependency order; index = what destroy_at()
// drops.
struct world {
  std::optional<context> ctx;
  std::optional<completion_channel> ch;
  std::optional<protection_domain> pd;
  std::array<std::byte, 64> mem{};
  std::optional<memory_region> mr;
  std::optional<completion_queue> cq;
  std::optional<shared_receive_queue> srq;
  std::optional<queue_pair> qp, qp2;
  std::optional<address_handle> ah;
  static constexpr int kinds = 9;

  explicit world(bool extended) {
    ctx = ok(context::open());
    ch = ok(completion_channel::create(*ctx));
    pd = ok(protection_domain::create(*ctx));
    mr = ok(pd->register_memory(mem, access::remote_write));
    cq_options co;
    co.channel = &*ch;
    co.extended = extended;
    cq = ok(completion_queue::create(*ctx, co));
    srq = ok(shared_receive_queue::create(*pd, 8));
    qp_options qo;
    qo.srq = &*srq;
    qo.wr_api = extended;
    qp = ok(queue_pair::create(*ctx, *pd, *cq, *cq, qo));
    qp2 = ok(queue_pair::create(*ctx, *pd, *cq, *cq));
    ok(qp->connect(ok(qp2->local_endpoint())));
    ok(qp2->connect(ok(qp->local_endpoint())));
    ah = ok(address_handle::create(*pd, *qp, ok(qp2->local_endpoint())));
    // Some traffic, so that queues are not empty at teardown.
    ok(srq->post_recv(ok(mr->slice(0, 16)), 1));
    ok(qp2->post_recv(ok(mr->slice(16, 16)), 2));
    ok(qp->post_send(ok(mr->slice(32, 8)), 3));
    ok(cq->request_notify());
  }
  void destroy_at(int i) {
    switch (i) {
    case 0:
      ctx.reset();
      break;
    case 1:
      ch.reset();
      break;
    case 2:
      pd.reset();
      break;
    case 3:
      mr.reset();
      break;
    case 4:
      cq.reset();
      break;
    case 5:
      srq.reset();
      break;
    case 6:
      qp.reset();
      break;
    case 7:
      qp2.reset();
      break;
    default:
      ah.reset();
      break;
    }
  }
  // Replaces object i with a fresh one of its kind (move-assignment over a
  // live handle), where that needs no other object.
  void reassign_at(int i) {
    switch (i) {
    case 0:
      if (ctx)
        *ctx = ok(context::open());
      break;
    case 2:
      if (pd && ctx)
        *pd = ok(protection_domain::create(*ctx));
      break;
    case 4:
      if (cq && ctx)
        *cq = ok(completion_queue::create(*ctx));
      break;
    default:
      destroy_at(i);
      break;
    }
  }
};
} // namespace

TEST_CASE("provider: every teardown order frees everything, children before parents") {
  std::vector<int> order(world::kinds);
  auto run = [&](const char *what, bool extended, bool reassign) {
    CAPTURE(what);
    CAPTURE(extended);
    CAPTURE(reassign);
    start();
    {
      world w(extended);
      CHECK(fp().fakeprov_live_total() == baseline + 9);
      for (int i : order) {
        if (reassign)
          w.reassign_at(i);
        w.destroy_at(i);
        CHECK_MESSAGE(fp().fakeprov_violations() == 0, fp().fakeprov_last_violation());
      }
    }
    finish();
  };
  for (bool extended : {false, true}) {
    for (int i = 0; i < world::kinds; i++)
      order[static_cast<std::size_t>(i)] = i;
    run("parents first", extended, false);
    run("parents first, reassigned", extended, true);
    std::reverse(order.begin(), order.end());
    run("children first", extended, false);
    std::mt19937 rng(extended ? 7 : 11);
    for (int k = 0; k < 40; k++) {
      std::shuffle(order.begin(), order.end(), rng);
      run("shuffled", extended, k % 2 == 1);
    }
  }
  // Every single object dropped first, the rest in creation order.
  for (int first = 0; first < world::kinds; first++) {
    order.clear();
    order.push_back(first);
    for (int i = 0; i < world::kinds; i++)
      if (i != first)
        order.push_back(i);
    run("one first", true, false);
  }
}

TEST_CASE("provider: a device list moved over another frees the one it held") {
  start();
  {
    auto a = ok(device_list::get());
    auto b = ok(device_list::get());
    CHECK(fp().fakeprov_live(FAKEPROV_DEVICE_LIST) == 2);
    a = std::move(b);
    CHECK(fp().fakeprov_live(FAKEPROV_DEVICE_LIST) == 1);
    CHECK(a.size() == 1);
    CHECK(b.size() == 0);
  }
  CHECK(fp().fakeprov_live(FAKEPROV_DEVICE_LIST) == 0);
  CHECK(fp().fakeprov_violations() == 0);
}

TEST_CASE("provider: injected errors surface as the right std::error_code") {
  start();
  {
    fp().fakeprov_fail_next(FAKEPROV_OP_GET_DEVICE_LIST, ENOSYS, 1);
    auto l = device_list::get();
    CHECK(l.error() == errc::no_kernel_support);
    CHECK(l.error() == std::errc::operation_not_supported);
    fp().fakeprov_fail_next(FAKEPROV_OP_OPEN_DEVICE, EACCES, 1);
    CHECK(context::open().error() == std::errc::permission_denied);
    auto ctx = ok(context::open());
    REQUIRE(ctx.supports(feature::extended_cq)); // probed now, not below
    fp().fakeprov_fail_next(FAKEPROV_OP_QUERY_PORT, EIO, 1);
    CHECK(ctx.query_port(1).error() == std::errc::io_error);
    fp().fakeprov_fail_next(FAKEPROV_OP_QUERY_DEVICE, EIO, 1);
    CHECK(ctx.query_device().error() == std::errc::io_error);
    fp().fakeprov_fail_next(FAKEPROV_OP_QUERY_GID, EIO, 1);
    CHECK(ctx.gid_table(1).error() == std::errc::io_error);
    fp().fakeprov_fail_next(FAKEPROV_OP_ALLOC_PD, ENOMEM, 1);
    CHECK(protection_domain::create(ctx).error() == std::errc::not_enough_memory);
    auto pd = ok(protection_domain::create(ctx));
    std::array<std::byte, 32> m{};
    fp().fakeprov_fail_next(FAKEPROV_OP_REG_MR, ENOMEM, 1);
    CHECK(pd.register_memory(m).error() == errc::memlock_limit);
    fp().fakeprov_fail_next(FAKEPROV_OP_REG_MR, EPERM, 1);
    CHECK(pd.register_memory(m).error() == errc::memlock_denied);
    fp().fakeprov_fail_next(FAKEPROV_OP_REG_MR, EFAULT, 1);
    CHECK(pd.register_memory(m).error() == std::errc::bad_address);
    CHECK(pd.register_memory({}).error() == errc::empty_span);
    auto mr = ok(pd.register_memory(m));
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_COMP_CHANNEL, EMFILE, 1);
    CHECK(completion_channel::create(ctx).error() == std::errc::too_many_files_open);
    auto ch = ok(completion_channel::create(ctx));
    cq_options want_ex;
    want_ex.extended = true;
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_CQ_EX, ENOMEM, 1);
    CHECK(completion_queue::create(ctx, want_ex).error() == std::errc::not_enough_memory);
    cq_options plain;
    plain.extended = false;
    plain.channel = &ch;
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_CQ, ENOMEM, 1);
    CHECK(completion_queue::create(ctx, plain).error() == std::errc::not_enough_memory);
    auto cq = ok(completion_queue::create(ctx, plain));
    qp_options classic;
    classic.wr_api = false;
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_QP, ENOSPC, 1);
    CHECK(queue_pair::create(ctx, pd, cq, cq, classic).error() == std::errc::no_space_on_device);
    auto qp = ok(queue_pair::create(ctx, pd, cq, cq, classic));
    auto qp2 = ok(queue_pair::create(ctx, pd, cq, cq, classic));
    fp().fakeprov_fail_next(FAKEPROV_OP_MODIFY_QP, EINVAL, 1);
    CHECK(qp.connect(ok(qp2.local_endpoint())).error() == std::errc::invalid_argument);
    fp().fakeprov_reset();
    // connect() from a QP already past RESET: the provider's EINVAL.
    ok(qp2.connect(ok(qp.local_endpoint())));
    CHECK(qp2.connect(ok(qp.local_endpoint())).error() == std::errc::invalid_argument);
    auto s = ok(mr.slice(0, 8));
    // qp is still in RESET (its first modify failed): not ready to send.
    CHECK(qp.post_send(s, 1).error() == std::errc::invalid_argument);
    fp().fakeprov_fail_next(FAKEPROV_OP_POST_SEND, ENOMEM, 1);
    CHECK(qp2.post_send(s, 1).error() == std::errc::not_enough_memory);
    fp().fakeprov_fail_next(FAKEPROV_OP_POST_RECV, ENOMEM, 1);
    CHECK(qp2.post_recv(s, 1).error() == std::errc::not_enough_memory);
    fp().fakeprov_fail_next(FAKEPROV_OP_POLL_CQ, EIO, 1);
    std::array<completion, 2> c;
    CHECK(cq.poll(c).error() == std::errc::io_error);
    fp().fakeprov_fail_next(FAKEPROV_OP_REQ_NOTIFY_CQ, EIO, 1);
    CHECK(cq.request_notify().error() == std::errc::io_error);
    fp().fakeprov_fail_next(FAKEPROV_OP_GET_CQ_EVENT, EIO, 1);
    CHECK(ch.wait(0ms).error() == std::errc::io_error);
    CHECK(ch.wait(0ms).error() == errc::timed_out);
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_SRQ, ENOMEM, 1);
    CHECK(shared_receive_queue::create(pd).error() == std::errc::not_enough_memory);
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_AH, EHOSTUNREACH, 1);
    CHECK(address_handle::create(pd, qp2, ok(qp.local_endpoint())).error() ==
          std::errc::host_unreachable);
    fp().fakeprov_set(FAKEPROV_MAX_SRQ, 0);
    CHECK(shared_receive_queue::create(pd).error() == std::errc::operation_not_supported);
    // A completion channel event: request_notify, a completion, wait().
    fp().fakeprov_reset();
    ok(cq.request_notify());
    ok(qp2.post_recv(s, 5));
    REQUIRE(fp().fakeprov_complete_recv(qp2.qp_num(), 8, 0, 0, 1) == 0);
    CHECK(ok(ch.wait(1000ms)) == cq.native_handle());
    CHECK(ch.wait(0ms).error() == errc::timed_out);
    ok(qp2.post_recv(s, 6));
    REQUIRE(fp().fakeprov_complete_recv(qp2.qp_num(), 8, 0, 0, 1) == 0);
    // A saturating wait: returns when the span is full.
    CHECK(ok(cq.poll_wait(std::span(c), std::chrono::milliseconds::max())) == 2);
  }
  finish();
}

TEST_CASE("provider: threads use distinct objects freely; one batch per queue pair at a time") {
  start();
  {
    auto ctx = ok(context::open());
    auto pd = ok(protection_domain::create(ctx));
    constexpr int threads = 4, rounds = 200;
    std::atomic<int> failures{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++)
      ts.emplace_back([&, t] {
        // Each thread: its own CQ, QP (connected to itself) and buffer.
        std::array<std::byte, 64> mem{};
        cq_options co;
        co.extended = t % 2 == 0;
        auto cq = completion_queue::create(ctx, co);
        auto mr = pd.register_memory(mem);
        if (!cq || !mr) {
          failures++;
          return;
        }
        qp_options qo;
        qo.wr_api = t % 2 == 1;
        auto qp = queue_pair::create(ctx, pd, *cq, *cq, qo);
        if (!qp || !qp->connect(*qp->local_endpoint())) {
          failures++;
          return;
        }
        local_slice rx = *mr->slice(0, 32), tx = *mr->slice(32, 8);
        std::array<completion, 4> c;
        for (int i = 0; i < rounds; i++) {
          std::size_t got = 0;
          if (!qp->post_recv(rx, 2 * static_cast<std::uint64_t>(i)) ||
              !qp->post_send(tx, 2 * static_cast<std::uint64_t>(i) + 1))
            failures++;
          while (got < 2) {
            auto n = cq->poll(std::span(c).first(2 - got));
            if (!n) {
              failures++;
              break;
            }
            for (std::size_t k = 0; k < *n; k++)
              if (!c[k].ok() || c[k].qp_num != qp->qp_num())
                failures++;
            got += *n;
          }
        }
      });
    for (auto &t : ts)
      t.join();
    CHECK(failures == 0);

    // Threads racing for batches on one queue pair (WR API and chained): the
    // winner's requests are posted as one chain, the others see batch_busy.
    for (bool wr_api : {false, true}) {
      CAPTURE(wr_api);
      cq_options co;
      co.depth = 256;
      auto cq = ok(completion_queue::create(ctx, co));
      std::array<std::byte, 64> mem{};
      auto mr = ok(pd.register_memory(mem, access::remote_write));
      qp_options qo;
      qo.wr_api = wr_api;
      qo.send_depth = 64;
      auto qp = ok(queue_pair::create(ctx, pd, cq, cq, qo));
      ok(qp.connect(ok(qp.local_endpoint())));
      const local_slice src = ok(mr.slice(0, 8));
      const remote_region dst = ok(mr.remote(32, 8));
      std::atomic<int> posted{0}, busy{0}, other{0};
      std::vector<std::thread> racers;
      for (int t = 0; t < threads; t++)
        racers.emplace_back([&] {
          for (int i = 0; i < 50; i++) {
            auto b = qp.batch();
            b.write(src, dst, 1, send_flags::none).write(src, dst, 2, send_flags::none);
            auto r = b.commit();
            if (r)
              posted++;
            else if (r.error() == errc::batch_busy)
              busy++;
            else
              other++;
          }
        });
      for (auto &t : racers)
        t.join();
      CHECK(other == 0);
      CHECK(posted + busy == threads * 50);
      CHECK(posted > 0);
      auto log = wr_log(qp.qp_num());
      CHECK(log.size() == static_cast<std::size_t>(2 * posted));
      for (std::size_t i = 0; i < log.size(); i++) {
        CHECK(log[i].chain_length == 2);
        CHECK(log[i].chain_index == static_cast<int>(i % 2));
        CHECK(log[i].via_wr_api == (wr_api ? 1 : 0));
      }
    }
  }
  finish();
}

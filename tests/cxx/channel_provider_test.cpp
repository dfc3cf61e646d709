// SPDX-License-Identifier: MIT
// multi_channel and channel against the scripted fake provider
// (tests/fakes/fake_provider.c), in every host tier: the work request each
// operation posts (peer's QP, opcode, sge, remote address and rkey),
// scatter/gather/multicast over three peers with every part's outcome, error
// completions with their peer, polling scopes that end early or run out of
// time (the fake holds send WRs until polled, FAKEPROV_HOLD_SENDS, so it can
// tell whether a buffer may still be touched), a second scope, bad input,
// and a warm data path that allocates nothing (operator new is counted).
//
// The cases that check what a product sees rather than the fake's work
// requests (CHANNEL_CASE) run twice: "channel: ..." on the fake's RDMA and
// "channel tcp: ..." with every channel over loopback TCP (ctest
// cxx.channel.fake and cxx.channel.tcp, the latter with RDMADL_DISABLE=1: no
// RDMA at all); their work-request checks are made on RDMA only.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "rdmadl/native.hpp" // IBV_* values only; no ibv_* call
#include "rdmadl/rdmadl.hpp"

#include "fake_provider_case.hpp"
#include "test_ok.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

// Every operator new of the process (the library is linked in statically
// and the standard library's containers come here too). TSan's runtime
// defines operator new itself (a second definition does not link), so that
// tier runs the no-allocation case without the count; gcc, clang, shared
// and ASan count. GCC cannot see that the replaced new and delete pair
// malloc with free.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RDMADL_TEST_NO_NEW_COUNT 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define RDMADL_TEST_NO_NEW_COUNT 1
#endif
namespace {
std::atomic<long> news{0};
}
#ifndef RDMADL_TEST_NO_NEW_COUNT
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void *operator new(std::size_t n) {
  news.fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(n ? n : 1))
    return p;
  throw std::bad_alloc();
}
void operator delete(void *p) noexcept {
  std::free(p);
}
void operator delete(void *p, std::size_t) noexcept {
  std::free(p);
}
#endif

namespace {

constexpr std::size_t n_peers = 3, len = 256;
const std::error_code no_error;

// A hub multi_channel of three peers and the three channels at their ends,
// all on fake0 (loopback delivers between them), or all over loopback TCP,
// a registered buffer each.
struct star {
  channel_transport transport = channel_transport::rdma;
  int baseline = 0;
  context ctx;
  multi_channel hub;
  channel peer[n_peers];
  alignas(64) std::array<std::byte, n_peers * len> hub_buf{};
  alignas(64) std::array<std::array<std::byte, len>, n_peers> peer_buf{};
  memory_region hub_mr, peer_mr[n_peers];

  explicit star(channel_options o = {}, channel_transport t = channel_transport::rdma)
      : transport(t) {
    if (t == channel_transport::tcp) {
      tcp(o);
      return;
    }
    fp().fakeprov_reset();
    baseline = fp().fakeprov_live_total();
    ctx = ok(context::open(FAKEPROV_DEVICE_NAME));
    o.peers = n_peers;
    hub = ok(multi_channel::create(ctx, o));
    const auto rights = access::remote_write | access::remote_read;
    hub_mr = ok(hub.pd().register_memory(hub_buf, rights));
    std::vector<endpoint> theirs;
    for (std::size_t i = 0; i < n_peers; i++) {
      peer[i] = ok(channel::create(ctx, o));
      peer_mr[i] = ok(peer[i].pd().register_memory(peer_buf[i], rights));
      ok(peer[i].handshake(ok(hub.local_endpoint(i))));
      theirs.push_back(ok(peer[i].local_endpoint()));
    }
    ok(hub.handshake(theirs));
    CHECK(hub.connected());
  }
  // The same star over TCP: channel endpoints exchanged as a product would.
  void tcp(channel_options o) {
    o.transport = channel_transport::tcp;
    o.tcp_address = "127.0.0.1";
    o.peers = n_peers;
    hub = ok(multi_channel::create(o));
    const auto rights = access::remote_write | access::remote_read;
    hub_mr = ok(hub.pd().register_memory(hub_buf, rights));
    auto mine = ok(hub.channel_endpoints());
    o.peers = 1;
    std::vector<channel_endpoint> theirs;
    for (std::size_t i = 0; i < n_peers; i++) {
      peer[i] = ok(channel::create(o));
      peer_mr[i] = ok(peer[i].pd().register_memory(peer_buf[i], rights));
      ok(peer[i].connect(mine[i]));
      theirs.push_back(ok(peer[i].local_channel_endpoint()));
    }
    ok(hub.connect(theirs));
    CHECK(hub.connected());
    for (std::size_t i = 0; i < n_peers; i++)
      CHECK(hub.transport_of(i) == channel_transport::tcp);
  }
  bool rdma() const { return transport == channel_transport::rdma; }
  ~star() {
    hub = multi_channel();
    for (auto &p : peer)
      p = channel();
    hub_mr = memory_region();
    for (auto &m : peer_mr)
      m = memory_region();
    ctx = context();
    if (!rdma())
      return;
    CHECK(fp().fakeprov_live_total() == baseline);
    CHECK_MESSAGE(fp().fakeprov_violations() == 0, fp().fakeprov_last_violation());
    fp().fakeprov_reset();
  }
  local_slice hub_at(std::size_t off, std::size_t n) { return ok(hub_mr.slice(off, n)); }
  local_slice peer_at(std::size_t i, std::size_t off, std::size_t n) {
    return ok(peer_mr[i].slice(off, n));
  }
  remote_region peer_remote(std::size_t i, std::size_t off, std::size_t n) {
    return ok(peer_mr[i].remote(off, n));
  }
  std::byte *hub_bytes(std::size_t off) { return hub_buf.data() + off; }
  std::byte *peer_bytes(std::size_t i, std::size_t off) { return peer_buf[i].data() + off; }
  std::uint32_t qpn(std::size_t i) { return hub.qp(i)->qp_num(); }
  std::size_t logged(std::size_t i) { return wr_log(qpn(i)).size(); }
};

// One request posted at peer i's own end, in a scope of its channel, before
// the hub's blocking call that it answers: a send blocks until its receive
// is there (RNR on RC, the ack over TCP), so the receive comes first. The
// peer's channel is busy until this ends.
struct at_peer {
  polling_scope sc;
  work_handle h{};
  at_peer(star &s, std::size_t i, bool recv, std::size_t off, std::size_t n)
      : sc(s.peer[i].scope()) {
    h = ok(recv ? sc.post_recv(0, s.peer_at(i, off, n)) : sc.post_send(0, s.peer_at(i, off, n)));
  }
  // Its outcome (checked ok); a receive's byte_len.
  std::uint32_t done() {
    auto r = ok(sc.wait(h, 10s));
    CHECK(r.ok());
    return r.byte_len;
  }
};

// A case run on both transports (see the top): its body is a function of
// channel_transport t.
#define CHANNEL_CASE(name, fn)                                                                     \
  static void fn(channel_transport t);                                                             \
  TEST_CASE("channel: " name) {                                                                    \
    fn(channel_transport::rdma);                                                                   \
  }                                                                                                \
  TEST_CASE("channel tcp: " name) {                                                                \
    fn(channel_transport::tcp);                                                                    \
  }                                                                                                \
  static void fn(channel_transport t)

void put(std::byte *p, const char *s) {
  std::memcpy(p, s, std::strlen(s));
}
bool has(const std::byte *p, const char *s) {
  return std::memcmp(p, s, std::strlen(s)) == 0;
}

// The last WR logged on the hub's QP of peer i, after checking that it is
// the only new one on that QP and that no other peer's QP got any.
fakeprov_wr_record last_wr(star &s, std::size_t i, std::array<std::size_t, n_peers> &before) {
  fakeprov_wr_record r{};
  for (std::size_t p = 0; p < n_peers; p++) {
    CAPTURE(p);
    auto log = wr_log(s.qpn(p));
    CHECK(log.size() == before[p] + (p == i ? 1 : 0));
    if (p == i && !log.empty())
      r = log.back();
    before[p] = log.size();
  }
  return r;
}

// A one-sided WR W: OPCODE, the peer's bytes at REMOTE under RKEY, and
// LOCAL as its first sge.
void check_one_sided(const fakeprov_wr_record &w, int opcode, const std::byte *remote,
                     std::uint32_t rkey, const std::byte *local) {
  CHECK(w.opcode == opcode);
  CHECK(w.remote_addr == reinterpret_cast<std::uint64_t>(remote));
  CHECK(w.rkey == rkey);
  CHECK(w.sge[0].addr == reinterpret_cast<std::uint64_t>(local));
}

} // namespace

CHANNEL_CASE("every blocking operation reaches its own peer (on RDMA: one WR on that peer's "
             "queue pair)",
             every_blocking_operation) {
  star s({}, t);
  std::array<std::size_t, n_peers> before{};
  // send to peer 1
  put(s.hub_bytes(0), "hello one");
  {
    at_peer in(s, 1, true, 0, 64);
    ok(s.hub.send(1, s.hub_at(0, 9), 10s));
    if (s.rdma()) {
      auto w = last_wr(s, 1, before);
      CHECK(w.kind == FAKEPROV_WR_SEND);
      CHECK(w.opcode == IBV_WR_SEND);
      CHECK((w.send_flags & IBV_SEND_SIGNALED) != 0);
      CHECK(w.num_sge == 1);
      CHECK(w.sge[0].addr == reinterpret_cast<std::uint64_t>(s.hub_bytes(0)));
      CHECK(w.sge[0].length == 9);
      CHECK(w.sge[0].lkey == s.hub_mr.lkey());
    }
    CHECK(in.done() == 9);
  }
  CHECK(has(s.peer_bytes(1, 0), "hello one"));

  // write to peer 2's region
  put(s.hub_bytes(16), "written");
  ok(s.hub.write(2, s.hub_at(16, 7), s.peer_remote(2, 100, 7), 10s));
  if (s.rdma()) {
    auto w = last_wr(s, 2, before);
    check_one_sided(w, IBV_WR_RDMA_WRITE, s.peer_bytes(2, 100), s.peer_mr[2].rkey(),
                    s.hub_bytes(16));
    CHECK(w.sge[0].length == 7);
  }
  CHECK(has(s.peer_bytes(2, 100), "written"));

  // read from peer 0's region
  put(s.peer_bytes(0, 200), "readme");
  ok(s.hub.read(0, s.hub_at(32, 6), s.peer_remote(0, 200, 6), 10s));
  if (s.rdma()) {
    auto w = last_wr(s, 0, before);
    check_one_sided(w, IBV_WR_RDMA_READ, s.peer_bytes(0, 200), s.peer_mr[0].rkey(),
                    s.hub_bytes(32));
    CHECK(w.sge[0].lkey == s.hub_mr.lkey());
  }
  CHECK(has(s.hub_bytes(32), "readme"));

  // receive from peer 2 (its send is posted first and waits for the receive)
  put(s.peer_bytes(2, 0), "from two!");
  {
    at_peer out(s, 2, false, 0, 9);
    CHECK(ok(s.hub.receive(2, s.hub_at(64, 32), 10s)) == 9);
    out.done();
  }
  if (s.rdma()) {
    auto w = last_wr(s, 2, before);
    CHECK(w.kind == FAKEPROV_WR_RECV);
    CHECK(w.sge[0].addr == reinterpret_cast<std::uint64_t>(s.hub_bytes(64)));
    CHECK(w.sge[0].length == 32);
  }
  CHECK(has(s.hub_bytes(64), "from two!"));

  // The single-peer channel posts on its own QP (reaches the hub alone).
  put(s.peer_bytes(0, 0), "p0->");
  const auto before_peer = s.rdma() ? wr_log(s.peer[0].base().qp(0)->qp_num()).size() : 0;
  ok(s.peer[0].write(s.peer_at(0, 0, 4), ok(s.hub_mr.remote(128, 4)), 10s));
  CHECK(has(s.hub_bytes(128), "p0->"));
  if (s.rdma()) {
    auto pl = wr_log(s.peer[0].base().qp(0)->qp_num());
    REQUIRE(pl.size() == before_peer + 1);
    CHECK(pl.back().opcode == IBV_WR_RDMA_WRITE);
    CHECK(pl.back().remote_addr == reinterpret_cast<std::uint64_t>(s.hub_bytes(128)));
    CHECK(pl.back().rkey == s.hub_mr.rkey());
    std::array<completion, 4> c{};
    CHECK(s.hub.cq()->poll(c).value() == 0); // nothing left behind
  }
}

CHANNEL_CASE("scatter, gather and multicast over three peers, every part's outcome",
             scatter_gather_multicast) {
  star s({}, t);
  std::array<work_result, n_peers> res{};
  std::vector<multi_channel::part> parts;
  // scatter_write: a different slice to each peer
  for (std::size_t i = 0; i < n_peers; i++) {
    std::snprintf(reinterpret_cast<char *>(s.hub_bytes(i * 32)), 32, "to peer %zu", i);
    parts.push_back({i, s.hub_at(i * 32, 10), s.peer_remote(i, 50, 10)});
  }
  ok(s.hub.scatter_write(parts, 10s, res));
  for (std::size_t i = 0; i < n_peers; i++) {
    CAPTURE(i);
    CHECK(res[i].peer == i);
    CHECK(res[i].ok());
    CHECK(res[i].id != 0);
    if (s.rdma()) {
      auto log = wr_log(s.qpn(i));
      REQUIRE(log.size() == 1);
      CHECK(log[0].opcode == IBV_WR_RDMA_WRITE);
      CHECK(log[0].wr_id == res[i].id);
      CHECK(log[0].remote_addr == parts[i].remote.addr);
      CHECK(log[0].rkey == s.peer_mr[i].rkey());
      CHECK(log[0].sge[0].addr == parts[i].buf.addr);
    }
    char want[16];
    std::snprintf(want, sizeof want, "to peer %zu", i);
    CHECK(has(s.peer_bytes(i, 50), want));
  }
  // gather_read: each peer's answer into its own slice of the hub
  parts.clear();
  for (std::size_t i = 0; i < n_peers; i++) {
    std::snprintf(reinterpret_cast<char *>(s.peer_bytes(i, 80)), 16, "peer%zu-data", i);
    parts.push_back({i, s.hub_at(100 + i * 16, 10), s.peer_remote(i, 80, 10)});
  }
  ok(s.hub.gather_read(parts, 10s, res));
  for (std::size_t i = 0; i < n_peers; i++) {
    CAPTURE(i);
    CHECK(res[i].peer == i);
    CHECK(res[i].ok());
    if (s.rdma())
      CHECK(wr_log(s.qpn(i)).back().opcode == IBV_WR_RDMA_READ);
    char want[16];
    std::snprintf(want, sizeof want, "peer%zu-data", i);
    CHECK(has(s.hub_bytes(100 + i * 16), want));
  }
  // multicast_send to peers 2 and 0 (in that order): results follow peers
  put(s.hub_bytes(200), "to all");
  const std::size_t to[] = {2, 0};
  {
    at_peer in2(s, 2, true, 0, 32), in0(s, 0, true, 0, 32);
    ok(s.hub.multicast_send(to, s.hub_at(200, 6), 10s, res));
    CHECK(in2.done() == 6);
    CHECK(in0.done() == 6);
  }
  CHECK(res[0].peer == 2);
  CHECK(res[1].peer == 0);
  CHECK(res[0].ok());
  CHECK(res[1].ok());
  if (s.rdma()) {
    CHECK(wr_log(s.qpn(1)).back().opcode == IBV_WR_RDMA_READ); // peer 1 got nothing
    for (std::size_t i : to) {
      auto w = wr_log(s.qpn(i)).back();
      CHECK(w.opcode == IBV_WR_SEND);
      CHECK(w.sge[0].addr == reinterpret_cast<std::uint64_t>(s.hub_bytes(200)));
    }
  }
  for (std::size_t i : to)
    CHECK(has(s.peer_bytes(i, 0), "to all"));
  // scatter_send, then gather_receive of each peer's answer of its own length
  parts.clear();
  for (std::size_t i = 0; i < n_peers; i++)
    parts.push_back({i, s.hub_at(i * 10, 3 + i), {}});
  {
    at_peer in0(s, 0, true, 0, 32), in1(s, 1, true, 0, 32), in2(s, 2, true, 0, 32);
    ok(s.hub.scatter_send(parts, 10s, res));
    CHECK(in0.done() == 3);
    CHECK(in1.done() == 4);
    CHECK(in2.done() == 5);
  }
  parts.clear();
  for (std::size_t i = 0; i < n_peers; i++)
    parts.push_back({n_peers - 1 - i, s.hub_at(i * 32, 32), {}});
  {
    at_peer out0(s, 0, false, 0, 1), out1(s, 1, false, 0, 2), out2(s, 2, false, 0, 3);
    ok(s.hub.gather_receive(parts, 10s, res));
    out0.done();
    out1.done();
    out2.done();
  }
  for (std::size_t i = 0; i < n_peers; i++) {
    CAPTURE(i);
    CHECK(res[i].peer == n_peers - 1 - i);
    CHECK(res[i].ok());
    CHECK(res[i].byte_len == 1 + (n_peers - 1 - i));
    if (s.rdma())
      CHECK(wr_log(s.qpn(n_peers - 1 - i)).back().kind == FAKEPROV_WR_RECV);
  }
  // Without results the same calls work (results are optional).
  {
    at_peer in2(s, 2, true, 0, 32), in0(s, 0, true, 0, 32);
    ok(s.hub.multicast_send(to, s.hub_at(200, 6), 10s));
    CHECK(in2.done() == 6);
    CHECK(in0.done() == 6);
  }
}

CHANNEL_CASE("an error completion names its peer and status; the others still complete",
             error_names_peer) {
  star s({}, t);
  std::array<work_result, n_peers> res{};
  std::vector<multi_channel::part> parts;
  for (std::size_t i = 0; i < n_peers; i++)
    parts.push_back({i, s.hub_at(i * 16, 8), s.peer_remote(i, 0, 8)});
  parts[1].remote.rkey ^= 0x5a5a; // peer 1 refuses: remote access error
  put(s.hub_bytes(0), "zero-ok!");
  put(s.hub_bytes(32), "two--ok!");
  auto r = s.hub.scatter_write(parts, 10s, res);
  REQUIRE_FALSE(r);
  CHECK(r.error() == std::error_code(IBV_WC_REM_ACCESS_ERR, wc_category()));
  CHECK(res[0].ok());
  CHECK(res[2].ok());
  CHECK(res[1].peer == 1);
  CHECK(res[1].status == IBV_WC_REM_ACCESS_ERR);
  CHECK(res[1].error() == r.error());
  CHECK(has(s.peer_bytes(0, 0), "zero-ok!"));
  CHECK(has(s.peer_bytes(2, 0), "two--ok!"));
  CHECK_FALSE(s.hub.connected(1));
  CHECK(s.hub.connected(0));
  CHECK(s.hub.connected(2));
  if (!s.rdma())
    return; // the rest scripts the fake's completions
  CHECK(fp().fakeprov_qp_state(s.qpn(1)) == IBV_QPS_ERR);

  // A scripted status on the only part, a multicast to peer 2: the error is
  // that status, results[0] says peer 2.
  fp().fakeprov_complete_with(1, IBV_WC_RETRY_EXC_ERR, 0x42);
  const std::size_t to[] = {2};
  auto m = s.hub.multicast_send(to, s.hub_at(0, 8), 10s, res);
  REQUIRE_FALSE(m);
  CHECK(m.error() == std::error_code(IBV_WC_RETRY_EXC_ERR, wc_category()));
  CHECK(res[0].peer == 2);
  CHECK(res[0].status == IBV_WC_RETRY_EXC_ERR);

  // Several failures: the error is the first failed completion; a part
  // whose post failed is reported not posted (id 0, flushed).
  fp().fakeprov_complete_with(1, IBV_WC_LOC_PROT_ERR, 0);
  parts[0].remote = s.peer_remote(0, 0, 8);
  auto two = s.hub.scatter_write(std::span(parts).first(1), 10s, res);
  CHECK(two.error() == std::error_code(IBV_WC_LOC_PROT_ERR, wc_category()));
  CHECK(res[0].peer == 0);
  CHECK(res[0].status == IBV_WC_LOC_PROT_ERR);
}

CHANNEL_CASE("a batch larger than one poll: every part's outcome, and an error completion "
             "after the first poll's successes",
             batch_over_polls) {
  star s({}, t);
  // 20 parts, more than one poll of the channel takes (16): the outcomes of
  // the first poll's parts are kept while the rest come in.
  constexpr std::size_t n = 20;
  std::array<work_result, n> res{};
  std::vector<multi_channel::part> parts;
  for (std::size_t i = 0; i < n; i++)
    parts.push_back({i % n_peers, s.hub_at(i, 1), s.peer_remote(i % n_peers, i, 1)});
  for (std::size_t i = 0; i < n; i++)
    s.hub_bytes(0)[i] = std::byte(i + 1);
  ok(s.hub.scatter_write(parts, 10s, res));
  for (std::size_t i = 0; i < n; i++) {
    CAPTURE(i);
    CHECK(res[i].ok());
    CHECK(res[i].peer == i % n_peers);
    CHECK(s.peer_bytes(i % n_peers, i)[0] == std::byte(i + 1));
    if (i)
      CHECK(res[i].id == res[i - 1].id + 1);
  }
  ok(s.hub.scatter_write(parts, 10s)); // and without results
  // Part 18 (peer 0) refused by its peer: its error is the call's, the
  // parts before it succeeded, and only its peer is failed.
  parts[18].remote.rkey ^= 0x5a5a;
  auto r = s.hub.scatter_write(parts, 10s, res);
  REQUIRE_FALSE(r);
  CHECK(r.error() == std::error_code(IBV_WC_REM_ACCESS_ERR, wc_category()));
  CHECK(res[18].status == IBV_WC_REM_ACCESS_ERR);
  CHECK(res[18].peer == 0);
  for (std::size_t i = 0; i < 18; i++) {
    CAPTURE(i);
    CHECK(res[i].ok());
  }
  CHECK_FALSE(s.hub.connected(0));
  CHECK(s.hub.connected(1));
  CHECK(s.hub.connected(2));
}

CHANNEL_CASE("a batch whose first poll is short and holds an error completion: every other part "
             "succeeds, only that part's peer fails",
             batch_short_first_poll_error) {
  star s({}, t);
  // 20 parts, more than one poll takes (16), so the first poll comes back
  // short of the batch; part 4 is the only one of peer 1, and peer 1
  // refuses it, within that first poll.
  constexpr std::size_t n = 20;
  std::array<work_result, n> res{};
  std::vector<multi_channel::part> parts;
  for (std::size_t i = 0; i < n; i++) {
    const std::size_t peer = i == 4 ? 1 : i % 2 ? 2 : 0;
    parts.push_back({peer, s.hub_at(i, 1), s.peer_remote(peer, i, 1)});
  }
  for (std::size_t i = 0; i < n; i++)
    s.hub_bytes(0)[i] = std::byte(i + 1);
  parts[4].remote.rkey ^= 0x5a5a;
  auto r = s.hub.scatter_write(parts, 10s, res);
  REQUIRE_FALSE(r);
  CHECK(r.error() == std::error_code(IBV_WC_REM_ACCESS_ERR, wc_category()));
  for (std::size_t i = 0; i < n; i++) {
    CAPTURE(i);
    CHECK(res[i].peer == parts[i].peer);
    if (i == 4)
      continue;
    CHECK(res[i].ok());
    CHECK(s.peer_bytes(parts[i].peer, i)[0] == std::byte(i + 1));
  }
  CHECK(res[4].status == IBV_WC_REM_ACCESS_ERR);
  CHECK(res[4].error() == r.error());
  CHECK_FALSE(s.hub.connected(1));
  CHECK(s.hub.connected(0));
  CHECK(s.hub.connected(2));
  // The same without results, once peer 1 is out of the batch: the other
  // peers' parts all land.
  for (std::size_t i = 0; i < n; i++)
    s.hub_bytes(0)[i] = std::byte(i + 101);
  parts[4] = {0, s.hub_at(4, 1), s.peer_remote(0, 4, 1)};
  ok(s.hub.scatter_write(parts, 10s));
  for (std::size_t i = 0; i < n; i++) {
    CAPTURE(i);
    CHECK(s.peer_bytes(parts[i].peer, i)[0] == std::byte(i + 101));
  }
  // And a peer refusing one part there, without results: its error is the
  // call's.
  parts[6].remote.rkey ^= 0x5a5a;
  CHECK(s.hub.scatter_write(parts, 10s).error() ==
        std::error_code(IBV_WC_REM_ACCESS_ERR, wc_category()));
  CHECK_FALSE(s.hub.connected(0));
  CHECK(s.hub.connected(2));
}

CHANNEL_CASE("the batch forms without results: a first batch over polls, an empty one, bad "
             "peers and an error completion",
             batch_without_results) {
  star s({}, t);
  // The channel's first batch, more parts than a poll takes: its slot
  // array is grown only when a poll leaves parts pending.
  constexpr std::size_t n = 20;
  std::vector<multi_channel::part> parts;
  for (std::size_t i = 0; i < n; i++)
    parts.push_back({i % n_peers, s.hub_at(i, 1), s.peer_remote(i % n_peers, i, 1)});
  for (std::size_t i = 0; i < n; i++)
    s.hub_bytes(0)[i] = std::byte(i + 1);
  ok(s.hub.scatter_write(parts, 10s));
  for (std::size_t i = 0; i < n; i++) {
    CAPTURE(i);
    CHECK(s.peer_bytes(i % n_peers, i)[0] == std::byte(i + 1));
  }
  ok(s.hub.scatter_write({}, 10s)); // nothing to post or await
  // Each peer's bytes back into the hub, three parts of one poll.
  std::vector<multi_channel::part> reads;
  for (std::size_t i = 0; i < n_peers; i++)
    reads.push_back({i, s.hub_at(64 + i, 1), s.peer_remote(i, i, 1)});
  ok(s.hub.gather_read(reads, 10s));
  for (std::size_t i = 0; i < n_peers; i++)
    CHECK(s.hub_bytes(64)[i] == std::byte(i + 1));
  // A part naming no peer: the parts before it were posted and awaited.
  put(s.hub_bytes(128), "before");
  std::vector<multi_channel::part> bad{{1, s.hub_at(128, 6), s.peer_remote(1, 128, 6)},
                                       {n_peers, s.hub_at(128, 6), s.peer_remote(2, 128, 6)}};
  CHECK(s.hub.scatter_write(bad, 10s).error() == errc::no_such_peer);
  CHECK(has(s.peer_bytes(1, 128), "before"));
  // Part 18 (peer 0) refused by its peer after the first poll's successes:
  // its error is the call's, and only its peer is failed, for every later
  // form.
  parts[18].remote.rkey ^= 0x5a5a;
  auto r = s.hub.scatter_write(parts, 10s);
  REQUIRE_FALSE(r);
  CHECK(r.error() == std::error_code(IBV_WC_REM_ACCESS_ERR, wc_category()));
  CHECK_FALSE(s.hub.connected(0));
  CHECK(s.hub.connected(1));
  CHECK(s.hub.connected(2));
  CHECK(s.hub.scatter_write(std::span(parts).first(1), 10s).error() == errc::peer_failed);
  CHECK(s.hub.gather_read(reads, 10s).error() == errc::peer_failed);
  ok(s.hub.gather_read(std::span(reads).subspan(1), 10s)); // the other peers still work
  {
    auto sc = s.hub.scope(); // a scope is open: the batch is refused
    CHECK(s.hub.gather_read(std::span(reads).subspan(1), 10s).error() == errc::channel_busy);
  }
}

TEST_CASE("channel: the batch forms without results: a failed post, a failed poll, a timeout") {
  channel_options o;
  o.scope_limit = 50ms;
  star s(o);
  std::vector<multi_channel::part> parts;
  for (std::size_t i = 0; i < n_peers; i++)
    parts.push_back({i, s.hub_at(i * 16, 8), s.peer_remote(i, 0, 8)});
  put(s.hub_bytes(0), "zero-ok!");
  // The first part's post fails: the call's error, nothing else posted.
  fp().fakeprov_fail_next(FAKEPROV_OP_POST_SEND, ENOMEM, 1);
  const auto logged1 = s.logged(1), logged2 = s.logged(2);
  CHECK(s.hub.scatter_write(parts, 10s).error() == std::errc::not_enough_memory);
  CHECK(s.logged(1) == logged1);
  CHECK(s.logged(2) == logged2);
  CHECK(s.hub.connected());
  ok(s.hub.scatter_write(parts, 10s));
  CHECK(has(s.peer_bytes(0, 0), "zero-ok!"));
  // The first poll fails: the batch is awaited as a scope (its error is
  // the poll's), and every request is still taken before the return.
  fp().fakeprov_fail_next(FAKEPROV_OP_POLL_CQ, EIO, 1);
  CHECK_FALSE(s.hub.scatter_write(parts, 10s));
  CHECK(fp().fakeprov_cq_pending(s.hub.cq()->native_handle()) == 0);
  ok(s.hub.scatter_write(parts, 10s));
  // The NIC holds every write: timed_out, and every peer's queue pair is
  // flushed before the return.
  fp().fakeprov_set(FAKEPROV_HOLD_SENDS, -1);
  CHECK(s.hub.scatter_write(parts, 10ms).error() == errc::timed_out);
  fp().fakeprov_set(FAKEPROV_HOLD_SENDS, 0);
  for (std::size_t i = 0; i < n_peers; i++) {
    CAPTURE(i);
    CHECK(fp().fakeprov_qp_state(s.qpn(i)) == IBV_QPS_ERR);
    CHECK(fp().fakeprov_held(s.qpn(i)) == 0);
    CHECK_FALSE(s.hub.connected(i));
  }
  CHECK(fp().fakeprov_cq_pending(s.hub.cq()->native_handle()) == 0);
}

CHANNEL_CASE("send_receive: a ping-pong step with one peer, and a ring step with two",
             send_receive_steps) {
  star s({}, t);
  // Peer 1 answers: its receive for the hub's message, its own message.
  put(s.hub_bytes(0), "ping!");
  put(s.peer_bytes(1, 64), "pong, 11 by");
  {
    auto sc = s.peer[1].scope();
    auto hr = ok(sc.post_recv(0, s.peer_at(1, 0, 32)));
    auto hs = ok(sc.post_send(0, s.peer_at(1, 64, 11)));
    CHECK(ok(s.hub.send_receive(1, s.hub_at(0, 5), 1, s.hub_at(32, 32), 10s)) == 11);
    CHECK(ok(sc.wait(hr, 10s)).byte_len == 5);
    CHECK(ok(sc.wait(hs, 10s)).ok());
  }
  CHECK(has(s.peer_bytes(1, 0), "ping!"));
  CHECK(has(s.hub_bytes(32), "pong, 11 by"));
  if (s.rdma()) {
    auto log = wr_log(s.qpn(1));
    REQUIRE(log.size() == 2);
    CHECK(log[0].kind == FAKEPROV_WR_RECV); // the receive first
    CHECK(log[1].opcode == IBV_WR_SEND);
    CHECK(log[1].wr_id == log[0].wr_id + 1);
  }
  // A ring's step: send to peer 2, receive from peer 0.
  put(s.hub_bytes(64), "right");
  put(s.peer_bytes(0, 64), "left");
  {
    at_peer in2(s, 2, true, 0, 32), out0(s, 0, false, 64, 4);
    CHECK(ok(s.hub.send_receive(2, s.hub_at(64, 5), 0, s.hub_at(96, 32), 10s)) == 4);
    CHECK(in2.done() == 5);
    out0.done();
  }
  CHECK(has(s.peer_bytes(2, 0), "right"));
  CHECK(has(s.hub_bytes(96), "left"));
  // The single-peer channel's form.
  put(s.peer_bytes(0, 128), "one");
  put(s.hub_bytes(160), "hi");
  {
    auto sc = s.hub.scope();
    auto hr = ok(sc.post_recv(0, s.hub_at(128, 16)));
    auto hs = ok(sc.post_send(0, s.hub_at(160, 2)));
    CHECK(ok(s.peer[0].send_receive(s.peer_at(0, 128, 3), s.peer_at(0, 144, 16), 10s)) == 2);
    CHECK(ok(sc.wait(hr, 10s)).byte_len == 3);
    CHECK(ok(sc.wait(hs, 10s)).ok());
  }
  CHECK(has(s.peer_bytes(0, 144), "hi"));
  // Errors: no such peer (either side), a busy channel, an empty one;
  // nothing is posted then.
  const auto logged = s.rdma() ? s.logged(0) : 0;
  CHECK(s.hub.send_receive(n_peers, s.hub_at(0, 4), 0, s.hub_at(32, 4), 10s).error() ==
        errc::no_such_peer);
  CHECK(s.hub.send_receive(0, s.hub_at(0, 4), 7, s.hub_at(32, 4), 10s).error() ==
        errc::no_such_peer);
  {
    auto sc = s.hub.scope();
    CHECK(s.hub.send_receive(0, s.hub_at(0, 4), 0, s.hub_at(32, 4), 10s).error() ==
          errc::channel_busy);
  }
  if (s.rdma())
    CHECK(s.logged(0) == logged);
  multi_channel empty; // (what every call of an empty channel answers)
  CHECK(empty.send_receive(0, s.hub_at(0, 4), 0, s.hub_at(32, 4), 10s).error() ==
        empty.send(0, s.hub_at(0, 4), 10s).error());
}

CHANNEL_CASE("send_receive: a step whose answer never comes times out, flushes, fails the peer",
             send_receive_timeout) {
  channel_options o;
  o.scope_limit = 20ms;
  star s(o, t);
  // Peer 1 takes the hub's message but never answers: the receive never
  // completes, so the call times out; its queue pair is flushed (the
  // receive buffer is free on return) and the peer is failed.
  put(s.hub_bytes(0), "lost");
  {
    at_peer in1(s, 1, true, 0, 32);
    CHECK(s.hub.send_receive(1, s.hub_at(0, 4), 1, s.hub_at(32, 32), 10ms).error() ==
          errc::timed_out);
    CHECK(in1.done() == 4);
  }
  CHECK_FALSE(s.hub.connected(1));
  CHECK(s.hub.connected(0));
  if (s.rdma()) {
    CHECK(fp().fakeprov_qp_state(s.qpn(1)) == IBV_QPS_ERR);
    CHECK(fp().fakeprov_cq_pending(s.hub.cq()->native_handle()) == 0);
  }
  CHECK(s.hub.send_receive(1, s.hub_at(0, 4), 1, s.hub_at(32, 4), 10s).error() ==
        errc::peer_failed);
  // The channel is free again: a step with a healthy peer works.
  put(s.peer_bytes(0, 64), "ok");
  {
    auto sc = s.peer[0].scope();
    auto hr = ok(sc.post_recv(0, s.peer_at(0, 0, 32)));
    auto hs = ok(sc.post_send(0, s.peer_at(0, 64, 2)));
    CHECK(ok(s.hub.send_receive(0, s.hub_at(0, 4), 0, s.hub_at(64, 16), 10s)) == 2);
    CHECK(ok(sc.wait(hr, 10s)).byte_len == 4);
    CHECK(ok(sc.wait(hs, 10s)).ok());
  }
  CHECK(has(s.hub_bytes(64), "ok"));
}

TEST_CASE("channel: a post that fails in a scope leaves the earlier request to be awaited") {
  star s;
  put(s.hub_bytes(0), "first-in");
  fp().fakeprov_set(FAKEPROV_HOLD_SENDS, 2); // the first write is still in flight
  auto sc = s.hub.scope();
  ok(sc.post_write(0, s.hub_at(0, 8), s.peer_remote(0, 0, 8)));
  fp().fakeprov_fail_next(FAKEPROV_OP_POST_SEND, ENOMEM, 1);
  auto h = sc.post_write(1, s.hub_at(16, 8), s.peer_remote(1, 0, 8));
  REQUIRE_FALSE(h);
  CHECK(h.error() == std::errc::not_enough_memory);
  CHECK(sc.pending() == 1);
  CHECK(fp().fakeprov_held(0) == 1);
  auto all = ok(sc.wait_all(10s));
  REQUIRE(all.size() == 1);
  CHECK(all[0].peer == 0);
  CHECK(all[0].ok());
  CHECK(has(s.peer_bytes(0, 0), "first-in"));
  CHECK(sc.pending() == 0);
  CHECK(wr_log(s.qpn(1)).empty());
}

CHANNEL_CASE("a scope's error completion between two successes: each handle gets its own outcome",
             scope_error_between) {
  star s({}, t);
  auto sc = s.hub.scope();
  std::array<work_handle, n_peers> h;
  for (std::size_t i = 0; i < n_peers; i++) {
    auto dst = s.peer_remote(i, 0, 8);
    if (i == 1)
      dst.rkey ^= 0x5a5a; // peer 1 refuses: remote access error
    h[i] = ok(sc.post_write(i, s.hub_at(i * 16, 8), dst));
  }
  // The last awaited first: over RDMA one poll brings in all three, and the
  // error completion hands itself and the success after it to the poll
  // loop's out-of-line part; every slot is marked either way.
  auto r2 = ok(sc.wait(h[2], 10s));
  CHECK(r2.ok());
  CHECK(r2.peer == 2);
  auto r1 = ok(sc.wait(h[1], 10s));
  CHECK(r1.peer == 1);
  CHECK(r1.id == h[1].id);
  CHECK(r1.status == IBV_WC_REM_ACCESS_ERR);
  auto r0 = ok(sc.wait(h[0], 10s));
  CHECK(r0.ok());
  CHECK(r0.peer == 0);
  CHECK(sc.pending() == 0);
  auto all = ok(sc.wait_all(10s));
  REQUIRE(all.size() == n_peers);
  std::size_t failed = 0;
  for (const work_result &r : all)
    failed += !r.ok();
  CHECK(failed == 1);
  CHECK(s.hub.connected(0));
  CHECK_FALSE(s.hub.connected(1));
  CHECK(s.hub.connected(2));
}

CHANNEL_CASE("wait_all() gives the scope's results in completion order, not post order",
             wait_all_order) {
  star s({}, t);
  auto sc = s.hub.scope();
  auto hr = ok(sc.post_recv(0, s.hub_at(0, 8))); // completes once peer 0 sends
  auto hw = ok(sc.post_write(1, s.hub_at(16, 8), s.peer_remote(1, 0, 8)));
  CHECK(ok(sc.wait(hw, 10s)).ok());
  CHECK(sc.pending() == 1);
  put(s.peer_bytes(0, 0), "from p0!");
  ok(s.peer[0].send(s.peer_at(0, 0, 8), 10s));
  auto all = ok(sc.wait_all(10s));
  REQUIRE(all.size() == 2);
  CHECK(all[0].id == hw.id);
  CHECK(all[0].peer == 1);
  CHECK(all[1].id == hr.id);
  CHECK(all[1].peer == 0);
  CHECK(all[1].byte_len == 8);
  CHECK(has(s.hub_bytes(0), "from p0!"));
}

TEST_CASE("channel: a scope that returns early completes its work; the buffer is not touched "
          "afterwards") {
  star s;
  fp().fakeprov_set(FAKEPROV_HOLD_SENDS, 3); // a WR runs at the 3rd poll of its CQ
  put(s.hub_bytes(0), "in flight");
  const std::uint32_t q1 = s.qpn(1);
  auto early = [&]() -> int {
    auto sc = s.hub.scope();
    auto h = sc.post_write(1, s.hub_at(0, 9), s.peer_remote(1, 0, 9));
    if (!h)
      return -1;
    CHECK(sc.pending() == 1);
    CHECK(fp().fakeprov_held(q1) == 1); // the NIC still owns the buffer
    CHECK_FALSE(has(s.peer_bytes(1, 0), "in flight"));
    return 7; // early: the scope's end must wait for the write
  };
  CHECK(early() == 7);
  CHECK(fp().fakeprov_held(q1) == 0); // nothing left that could read the buffer
  CHECK(has(s.peer_bytes(1, 0), "in flight"));
  CHECK(fp().fakeprov_cq_pending(s.hub.cq()->native_handle()) == 0); // its completion was taken
  CHECK(fp().fakeprov_qp_state(q1) == IBV_QPS_RTS);                  // not flushed: completed
  // Reuse the buffer: no later access of the fake changes the peer's copy.
  put(s.hub_bytes(0), "REUSED!!!");
  CHECK(fp().fakeprov_release(0) == 0);
  std::array<completion, 4> c{};
  for (int i = 0; i < 5; i++)
    CHECK(s.hub.cq()->poll(c).value() == 0);
  CHECK(has(s.peer_bytes(1, 0), "in flight"));

  // A handle can be waited on alone; the other stays pending until its turn.
  {
    put(s.hub_bytes(32), "AAAA");
    put(s.hub_bytes(48), "BBBB");
    auto sc = s.hub.scope();
    auto a = ok(sc.post_write(0, s.hub_at(32, 4), s.peer_remote(0, 0, 4)));
    fp().fakeprov_set(FAKEPROV_HOLD_SENDS, -1); // b runs only when released
    auto b = ok(sc.post_write(2, s.hub_at(48, 4), s.peer_remote(2, 0, 4)));
    CHECK(sc.pending() == 2);
    auto ra = ok(sc.wait(a, 10s));
    CHECK(ra.peer == 0);
    CHECK(ra.id == a.id);
    CHECK(ra.ok());
    CHECK(has(s.peer_bytes(0, 0), "AAAA"));
    CHECK(sc.pending() == 1);
    CHECK(sc.wait(b, 20ms).error() == errc::timed_out);
    CHECK(sc.wait(work_handle{b.id + 100}, 1ms).error() == errc::unknown_handle);
    CHECK(sc.wait(work_handle{0}, 1ms).error() == errc::unknown_handle);
    CHECK(fp().fakeprov_release(s.qpn(2)) == 1);
    auto rb = ok(sc.wait(b, 10s));
    CHECK(rb.peer == 2);
    CHECK(rb.ok());
    CHECK(has(s.peer_bytes(2, 0), "BBBB"));
    CHECK(ok(sc.wait(a, 0ms)).id == a.id); // a finished handle answers at once
  }
}

TEST_CASE("channel: scope_limit expiry moves the queue pair to error and takes the flush") {
  channel_options o;
  o.scope_limit = 50ms;
  star s(o);
  fp().fakeprov_set(FAKEPROV_HOLD_SENDS, -1); // the NIC never finishes on its own
  put(s.hub_bytes(0), "never");
  const std::uint32_t q0 = s.qpn(0), q2 = s.qpn(2);
  {
    auto sc = s.hub.scope();
    ok(sc.post_write(2, s.hub_at(0, 5), s.peer_remote(2, 0, 5)));
    CHECK(fp().fakeprov_held(q2) == 1);
  }
  CHECK(fp().fakeprov_qp_state(q2) == IBV_QPS_ERR);
  CHECK(fp().fakeprov_qp_state(q0) == IBV_QPS_RTS); // only the stuck peer
  CHECK(fp().fakeprov_held(q2) == 0);
  CHECK(fp().fakeprov_cq_pending(s.hub.cq()->native_handle()) == 0); // flushed one taken
  CHECK_FALSE(has(s.peer_bytes(2, 0), "never"));
  // The blocking form: timed_out, and the part's outcome is the flush.
  std::array<work_result, 1> res{};
  std::vector<multi_channel::part> parts{{0, s.hub_at(0, 5), s.peer_remote(0, 0, 5)}};
  auto r = s.hub.scatter_write(parts, 10ms, res);
  CHECK(r.error() == errc::timed_out);
  CHECK(res[0].peer == 0);
  CHECK(res[0].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(fp().fakeprov_qp_state(q0) == IBV_QPS_ERR);
  CHECK(fp().fakeprov_held(0) == 0);
  CHECK_FALSE(has(s.peer_bytes(0, 0), "never"));
  // A single blocking request (its own path, without a scope's slots) keeps
  // the same promise: timed_out, its queue pair flushed, the CQ emptied,
  // and the channel free for the next call.
  const std::uint32_t q1 = s.qpn(1);
  CHECK(s.hub.write(1, s.hub_at(0, 5), s.peer_remote(1, 0, 5), 10ms).error() == errc::timed_out);
  CHECK(fp().fakeprov_qp_state(q1) == IBV_QPS_ERR);
  CHECK(fp().fakeprov_held(q1) == 0);
  CHECK(fp().fakeprov_cq_pending(s.hub.cq()->native_handle()) == 0);
  CHECK_FALSE(has(s.peer_bytes(1, 0), "never"));
  CHECK(s.hub.write(1, s.hub_at(0, 5), s.peer_remote(1, 0, 5), 10ms).error() == errc::peer_failed);
}

CHANNEL_CASE("a second scope is busy; bad peers, short results and endpoint lists",
             second_scope_busy) {
  star s({}, t);
  {
    at_peer in0(s, 0, true, 0, 4);
    auto first = s.hub.scope();
    auto second = s.hub.scope();
    CHECK(second.post_send(0, s.hub_at(0, 4)).error() == errc::channel_busy);
    CHECK(second.post_recv(0, s.hub_at(0, 4)).error() == errc::channel_busy);
    CHECK(second.post_write(0, s.hub_at(0, 4), s.peer_remote(0, 0, 4)).error() ==
          errc::channel_busy);
    CHECK(second.post_read(0, s.hub_at(0, 4), s.peer_remote(0, 0, 4)).error() ==
          errc::channel_busy);
    CHECK(second.wait(work_handle{1}, 1ms).error() == errc::channel_busy);
    CHECK(second.wait_all(1ms).error() == errc::channel_busy);
    CHECK(second.pending() == 0);
    CHECK(s.hub.send(0, s.hub_at(0, 4), 10s).error() == errc::channel_busy);
    const std::size_t to[] = {0, 1};
    CHECK(s.hub.multicast_send(to, s.hub_at(0, 4), 10s).error() == errc::channel_busy);
    if (s.rdma())
      CHECK(wr_log(s.qpn(0)).empty()); // nothing posted by the refused calls
    CHECK(first.post_send(n_peers, s.hub_at(0, 4)).error() == errc::no_such_peer);
    ok(first.post_send(0, s.hub_at(0, 4))); // the first scope still works
    ok(first.wait_all(10s));
    CHECK(in0.done() == 4);
  }
  {
    at_peer in1(s, 1, true, 0, 4);
    ok(s.hub.send(1, s.hub_at(0, 4), 10s)); // and the channel after both ended
    CHECK(in1.done() == 4);
  }
  CHECK(s.hub.send(n_peers, s.hub_at(0, 4), 10s).error() == errc::no_such_peer);
  CHECK(s.hub.receive(7, s.hub_at(0, 4), 10s).error() == errc::no_such_peer);
  if (s.rdma())
    CHECK(s.hub.local_endpoint(n_peers).error() == errc::no_such_peer);
  std::array<work_result, 2> small{};
  std::vector<multi_channel::part> parts;
  for (std::size_t i = 0; i < n_peers; i++)
    parts.push_back({i, s.hub_at(0, 4), {}});
  const auto logged = s.rdma() ? wr_log(s.qpn(0)).size() : 0;
  CHECK(s.hub.scatter_send(parts, 10s, small).error() == errc::short_results);
  CHECK(s.hub.gather_receive(parts, 10s, small).error() == errc::short_results);
  CHECK(s.hub.scatter_write(parts, 10s, small).error() == errc::short_results);
  CHECK(s.hub.gather_read(parts, 10s, small).error() == errc::short_results);
  const std::size_t to[] = {0, 1, 2};
  CHECK(s.hub.multicast_send(to, s.hub_at(0, 4), 10s, small).error() == errc::short_results);
  if (s.rdma())
    CHECK(wr_log(s.qpn(0)).size() == logged); // refused before posting
  // A part naming no such peer: the parts before it were posted and awaited.
  std::array<work_result, n_peers> res{};
  parts[1].peer = 9;
  {
    at_peer in0(s, 0, true, 0, 4);
    CHECK(s.hub.scatter_send(parts, 10s, res).error() == errc::no_such_peer);
    CHECK(in0.done() == 4);
  }
  CHECK(res[0].ok());
  CHECK(res[1].id == 0);
  CHECK(res[1].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(res[2].id == 0);
  if (!s.rdma())
    return; // the rest is about RDMA endpoints and the fake's modify log
  CHECK(wr_log(s.qpn(2)).empty());
  // handshake with a list of the wrong length, and a parsed list that is not
  // a list of endpoints
  channel_options two;
  two.peers = 2;
  auto mc = ok(multi_channel::create(s.ctx, two));
  std::vector<endpoint> one{ok(s.peer[0].local_endpoint())};
  CHECK(mc.handshake(one).error() == errc::endpoint_count);
  std::vector<endpoint> three(3, one[0]);
  CHECK(mc.handshake(three).error() == errc::endpoint_count);
  CHECK(last_error_detail() == "multi_channel::handshake: 3 endpoints for 2 peers");
  CHECK_FALSE(mc.connected());
  auto blob = serialize_endpoints(three);
  blob.resize(blob.size() - endpoint::serialized_size); // count 3, two present
  CHECK(parse_endpoints(blob).error() == errc::bad_size);
  CHECK(fp().fakeprov_modify_log(mc.qp(0)->qp_num(), nullptr, 0) == 0); // never touched
  // A peer's endpoint that connect() refuses: the detail says which peer.
  std::vector<endpoint> second_bad{one[0], one[0]};
  second_bad[1].qpn = 0;
  CHECK(mc.handshake(second_bad).error() == errc::bad_peer_qpn);
  CHECK(last_error_detail().find("multi_channel::handshake: peer 1: peer's QPN is 0x0") == 0);
  CHECK_FALSE(mc.connected());
  CHECK(fp().fakeprov_modify_log(mc.qp(1)->qp_num(), nullptr, 0) == 0); // refused before any modify
}

TEST_CASE("channel: a scope outlives its channel being moved and destroyed") {
  channel_options o;
  o.scope_limit = 50ms;
  star s(o);
  fp().fakeprov_set(FAKEPROV_HOLD_SENDS, -1); // the NIC holds every write
  put(s.hub_bytes(0), "held");
  const std::uint32_t q0 = s.qpn(0), q1 = s.qpn(1);
  const int qps = fp().fakeprov_live(FAKEPROV_QP);
  {
    auto sc = s.hub.scope();
    ok(sc.post_write(1, s.hub_at(0, 4), s.peer_remote(1, 0, 4)));
    multi_channel moved = std::move(s.hub);
    CHECK(s.hub.peers() == 0);
    CHECK(moved.peers() == n_peers);
    moved = multi_channel();                       // the channel is gone; the scope is not
    CHECK(fp().fakeprov_live(FAKEPROV_QP) == qps); // its queue pairs live on
    CHECK(fp().fakeprov_held(q1) == 1);
    CHECK(sc.pending() == 1);
    // The scope still posts and waits on the same queue pairs.
    fp().fakeprov_set(FAKEPROV_HOLD_SENDS, 0);
    put(s.hub_bytes(8), "late");
    auto h = ok(sc.post_write(0, s.hub_at(8, 4), s.peer_remote(0, 0, 4)));
    CHECK(ok(sc.wait(h, 10s)).ok());
    CHECK(has(s.peer_bytes(0, 0), "late"));
    CHECK(wr_log(q0).size() == 1);
  } // the end flushes the held write, then frees the channel's objects
  CHECK(fp().fakeprov_held(0) == 0);
  CHECK(fp().fakeprov_live(FAKEPROV_QP) == qps - static_cast<int>(n_peers));
  CHECK_FALSE(has(s.peer_bytes(1, 0), "held"));
  CHECK(fp().fakeprov_violations() == 0);

  // A scope of a channel moved into another: the new owner works once the
  // scope is over; a busy call on it says so meanwhile.
  star t;
  multi_channel kept;
  {
    auto sc = t.hub.scope();
    kept = std::move(t.hub);
    CHECK(kept.send(0, t.hub_at(0, 4), 10s).error() == errc::channel_busy);
    ok(sc.post_write(2, t.hub_at(0, 4), t.peer_remote(2, 0, 4)));
    ok(sc.wait_all(10s));
  }
  ok(kept.write(2, t.hub_at(0, 4), t.peer_remote(2, 0, 4), 10s));
  t.hub = std::move(kept); // star's end releases it in its own order
}

CHANNEL_CASE("a peer whose request timed out or failed is no longer connected", timed_out_peer) {
  channel_options o;
  o.scope_limit = 20ms; // how long a timed-out request is awaited before its flush
  star s(o, t);
  CHECK(s.hub.connected());
  for (std::size_t i = 0; i < n_peers; i++)
    CHECK(s.hub.connected(i));
  CHECK_FALSE(s.hub.connected(n_peers));
  // A blocking request that times out (RDMA: a write the fake holds; TCP: a
  // send the peer never receives): its queue pair is flushed (error state),
  // so the peer is failed for good, and says so on every later call without
  // posting anything.
  if (s.rdma()) {
    fp().fakeprov_set(FAKEPROV_HOLD_SENDS, -1);
    CHECK(s.hub.write(1, s.hub_at(0, 5), s.peer_remote(1, 0, 5), 10ms).error() == errc::timed_out);
    CHECK(fp().fakeprov_qp_state(s.qpn(1)) == IBV_QPS_ERR);
    fp().fakeprov_set(FAKEPROV_HOLD_SENDS, 0);
  } else {
    CHECK(s.hub.send(1, s.hub_at(0, 5), 10ms).error() == errc::timed_out);
  }
  CHECK_FALSE(s.hub.connected());
  CHECK_FALSE(s.hub.connected(1));
  CHECK(s.hub.connected(0));
  CHECK(s.hub.connected(2));
  const auto logged = s.rdma() ? wr_log(s.qpn(1)).size() : 0;
  auto again = s.hub.send(1, s.hub_at(0, 4), 10s);
  CHECK(again.error() == errc::peer_failed);
  CHECK(again.error() == std::errc::not_connected);
  CHECK(s.hub.receive(1, s.hub_at(0, 4), 10s).error() == errc::peer_failed);
  {
    auto sc = s.hub.scope();
    CHECK(sc.post_send(1, s.hub_at(0, 4)).error() == errc::peer_failed);
  }
  std::array<work_result, n_peers> res{};
  std::vector<multi_channel::part> parts;
  for (std::size_t i = 0; i < n_peers; i++)
    parts.push_back({i, s.hub_at(i * 16, 4), s.peer_remote(i, 0, 4)});
  CHECK(s.hub.scatter_write(parts, 10s, res).error() == errc::peer_failed);
  CHECK_MESSAGE(res[0].ok(), res[0].error().message()); // the part before it went through
  CHECK(res[1].id == 0);
  if (s.rdma())
    CHECK(wr_log(s.qpn(1)).size() == logged);
  // The other peers still work.
  put(s.hub_bytes(0), "still");
  ok(s.hub.write(2, s.hub_at(0, 5), s.peer_remote(2, 32, 5), 10s));
  CHECK(has(s.peer_bytes(2, 32), "still"));
  CHECK(s.hub.connected(2));

  // An error completion (a bad rkey) fails its peer too: the NIC moved that
  // queue pair to the error state.
  auto bad = s.peer_remote(2, 0, 4);
  bad.rkey ^= 0x5a5a;
  CHECK(s.hub.write(2, s.hub_at(0, 4), bad, 10s).error() ==
        std::error_code(IBV_WC_REM_ACCESS_ERR, wc_category()));
  if (s.rdma())
    CHECK(fp().fakeprov_qp_state(s.qpn(2)) == IBV_QPS_ERR);
  CHECK_FALSE(s.hub.connected(2));
  CHECK(s.hub.write(2, s.hub_at(0, 4), s.peer_remote(2, 0, 4), 10s).error() == errc::peer_failed);
  CHECK(s.hub.connected(0));

  // A scope whose end flushes a stuck request fails that peer.
  star u(o, t);
  if (u.rdma())
    fp().fakeprov_set(FAKEPROV_HOLD_SENDS, -1);
  {
    auto sc = u.hub.scope();
    ok(u.rdma() ? sc.post_write(0, u.hub_at(0, 4), u.peer_remote(0, 0, 4))
                : sc.post_send(0, u.hub_at(0, 4)));
  }
  if (u.rdma())
    CHECK(fp().fakeprov_qp_state(u.qpn(0)) == IBV_QPS_ERR);
  CHECK_FALSE(u.hub.connected(0));
  CHECK(u.hub.connected(1));
  CHECK_FALSE(u.hub.connected());
  // A channel never connected answers false for every peer.
  multi_channel none;
  CHECK_FALSE(none.connected(0));
}

TEST_CASE("channel: an error completion of no open request fails the peer of its queue pair") {
  // A request of the caller's own on one peer's queue pair (qp()), with a
  // bad rkey: its error completion is taken by the channel's next poll, for
  // another peer's request, which finds the failed peer by QP number.
  for (const bool in_scope : {false, true}) {
    star s;
    const std::size_t bad_peer = in_scope ? 2 : 1, good = in_scope ? 0 : 2;
    auto bad = s.peer_remote(bad_peer, 0, 4);
    bad.rkey ^= 0x5a5a;
    ok(s.hub.qp(bad_peer)->post_write(s.hub_at(0, 4), bad, 0xdead));
    if (in_scope) {
      auto sc = s.hub.scope();
      auto h = ok(sc.post_write(good, s.hub_at(0, 4), s.peer_remote(good, 0, 4)));
      CHECK(ok(sc.wait(h, 10s)).ok());
    } else {
      ok(s.hub.write(good, s.hub_at(0, 4), s.peer_remote(good, 0, 4), 10s));
    }
    CHECK_FALSE(s.hub.connected(bad_peer));
    CHECK(s.hub.connected(good));
    CHECK(s.hub.connected(3 - bad_peer - good));
  }
}

TEST_CASE("channel: local_endpoints() has peer i's endpoint at entry i, or is an error") {
  start();
  {
    auto ctx = ok(context::open(FAKEPROV_DEVICE_NAME));
    channel_options three;
    three.peers = n_peers;
    auto mc = ok(multi_channel::create(ctx, three));
    auto eps = ok(mc.local_endpoints());
    REQUIRE(eps.size() == n_peers);
    for (std::size_t i = 0; i < n_peers; i++)
      CHECK(eps[i].qpn == mc.qp(i)->qp_num());
    // Peer 1 left without a queue pair: the list is an error naming it, never
    // a shorter list whose entry 1 is peer 2's endpoint.
    queue_pair taken = std::move(*mc.qp(1));
    CHECK(mc.local_endpoints().error() == errc::empty_object);
    CHECK(last_error_detail().find("multi_channel::local_endpoints: peer 1: ") == 0);
    CHECK(ok(mc.local_endpoint(2)).qpn == mc.qp(2)->qp_num());
  }
  finish();
}

TEST_CASE("channel: cq() and qp() point into the channel; null, never a shared object, "
          "when there is none") {
  fp().fakeprov_reset();
  auto ctx = ok(context::open(FAKEPROV_DEVICE_NAME));
  channel_options two;
  two.peers = 2;
  auto a = ok(multi_channel::create(ctx, two));
  auto b = ok(multi_channel::create(ctx, two));
  REQUIRE(a.cq() != nullptr);
  CHECK(a.cq() != b.cq());
  CHECK(a.cq()->native_handle() != b.cq()->native_handle());
  REQUIRE(a.qp(0) != nullptr);
  REQUIRE(a.qp(1) != nullptr);
  CHECK(a.qp(0)->qp_num() != a.qp(1)->qp_num());
  CHECK(a.qp(2) == nullptr);
  multi_channel empty;
  CHECK(empty.cq() == nullptr);
  CHECK(empty.qp(0) == nullptr);
  a = multi_channel(); // moved over: empty too
  CHECK(a.cq() == nullptr);
  CHECK(a.qp(0) == nullptr);
}

TEST_CASE("channel: each wrong argument has its own error") {
  fp().fakeprov_reset();
  auto ctx = ok(context::open(FAKEPROV_DEVICE_NAME));
  channel_options zero;
  zero.peers = 0;
  CHECK(multi_channel::create(ctx, zero).error() == errc::no_peers);
  channel_options two;
  two.peers = 2;
  auto mc = ok(multi_channel::create(ctx, two));
  auto eps = ok(mc.local_endpoints());
  CHECK(mc.handshake(std::span(eps).first(1)).error() == errc::endpoint_count);
  CHECK(mc.local_endpoint(2).error() == errc::no_such_peer);
  // A handle of another scope (or 0): see "a second scope is busy" below.
}

TEST_CASE("channel: more peers than the device allows fail before anything is created") {
  star s;
  const int live = fp().fakeprov_live_total();
  channel_options o;
  o.peers = 65; // the fake's max_qp is 64
  CHECK(multi_channel::create(s.ctx, o).error() == errc::too_many_peers);
  o.peers = std::size_t{1} << 57; // once still creating queue pairs after 20 s
  CHECK(multi_channel::create(s.ctx, o).error() == errc::too_many_peers);
  o.peers = SIZE_MAX;
  CHECK(multi_channel::create(s.ctx, o).error() == errc::too_many_peers);
  CHECK(fp().fakeprov_live_total() == live);
  // The shared CQ holds every peer's entries: 8 CQEs take 4 peers at most,
  // each with one send and one receive.
  fp().fakeprov_set(FAKEPROV_MAX_CQE, 8);
  o.peers = 5;
  CHECK(multi_channel::create(s.ctx, o).error() == errc::too_many_peers);
  CHECK(fp().fakeprov_live_total() == live);
  o.peers = 4;
  {
    auto mc = ok(multi_channel::create(s.ctx, o));
    CHECK(mc.cq()->depth() <= 8);
    CHECK(mc.peers() == 4);
  }
  o.peers = 3; // 8 / 3 = 2 entries a peer: depths 64 and 64 are cut to 1 and 1
  {
    auto mc = ok(multi_channel::create(s.ctx, o));
    CHECK(mc.cq()->depth() <= 8);
    CHECK(mc.cq()->depth() >= 6);
  }
  fp().fakeprov_set(FAKEPROV_MAX_CQE, 256);
  CHECK(make_error_code(errc::too_many_peers) == std::errc::invalid_argument);
  CHECK(fp().fakeprov_live_total() == live);
}

CHANNEL_CASE("the warm blocking data path allocates nothing", warm_path_allocates_nothing) {
  star s({}, t);
  std::array<work_result, n_peers> res{};
  std::array<multi_channel::part, n_peers> writes, reads, sends, recvs;
  for (std::size_t i = 0; i < n_peers; i++) {
    writes[i] = {i, s.hub_at(i * 16, 8), s.peer_remote(i, 0, 8)};
    reads[i] = {i, s.hub_at(64 + i * 16, 8), s.peer_remote(i, 16, 8)};
    sends[i] = {i, s.hub_at(i * 16, 8), {}};
    recvs[i] = {i, s.hub_at(128 + i * 16, 16), {}};
  }
  const std::size_t to[] = {0, 1, 2};
  int failures = 0;
  // A peer's request in a scope of its own, posted before the hub's call.
  auto at = [&](std::size_t i, bool recv, std::size_t off, std::size_t n, auto &&hub_call) {
    auto sc = s.peer[i].scope();
    auto h = recv ? sc.post_recv(0, s.peer_at(i, off, n)) : sc.post_send(0, s.peer_at(i, off, n));
    failures += !hub_call();
    failures += !h || !sc.wait(*h, 10s);
  };
  auto round = [&] {
    at(0, true, 32, 16, [&] { return s.hub.send(0, s.hub_at(0, 8), 10s).has_value(); });
    at(1, false, 0, 8, [&] { return s.hub.receive(1, s.hub_at(200, 16), 10s).has_value(); });
    failures += !s.hub.write(2, s.hub_at(0, 8), s.peer_remote(2, 0, 8), 10s);
    failures += !s.hub.read(2, s.hub_at(8, 8), s.peer_remote(2, 0, 8), 10s);
    failures += !s.hub.scatter_write(writes, 10s, res);
    failures += !s.hub.gather_read(reads, 10s, res);
    {
      auto s0 = s.peer[0].scope(), s1 = s.peer[1].scope(), s2 = s.peer[2].scope();
      auto h0 = s0.post_recv(0, s.peer_at(0, 32, 16)), h1 = s1.post_recv(0, s.peer_at(1, 32, 16)),
           h2 = s2.post_recv(0, s.peer_at(2, 32, 16));
      failures += !s.hub.multicast_send(to, s.hub_at(0, 8), 10s, res);
      failures +=
          !h0 || !s0.wait(*h0, 10s) || !h1 || !s1.wait(*h1, 10s) || !h2 || !s2.wait(*h2, 10s);
    }
    {
      auto s0 = s.peer[0].scope(), s1 = s.peer[1].scope(), s2 = s.peer[2].scope();
      auto h0 = s0.post_recv(0, s.peer_at(0, 32, 16)), h1 = s1.post_recv(0, s.peer_at(1, 32, 16)),
           h2 = s2.post_recv(0, s.peer_at(2, 32, 16));
      failures += !s.hub.scatter_send(sends, 10s);
      failures +=
          !h0 || !s0.wait(*h0, 10s) || !h1 || !s1.wait(*h1, 10s) || !h2 || !s2.wait(*h2, 10s);
    }
    {
      auto s0 = s.peer[0].scope(), s1 = s.peer[1].scope(), s2 = s.peer[2].scope();
      auto h0 = s0.post_send(0, s.peer_at(0, 0, 8)), h1 = s1.post_send(0, s.peer_at(1, 0, 8)),
           h2 = s2.post_send(0, s.peer_at(2, 0, 8));
      failures += !s.hub.gather_receive(recvs, 10s, res);
      failures +=
          !h0 || !s0.wait(*h0, 10s) || !h1 || !s1.wait(*h1, 10s) || !h2 || !s2.wait(*h2, 10s);
    }
    {
      auto s1 = s.peer[1].scope();
      auto hr = s1.post_recv(0, s.peer_at(1, 32, 16)), hs = s1.post_send(0, s.peer_at(1, 0, 8));
      failures += !s.hub.send_receive(1, s.hub_at(0, 8), 1, s.hub_at(200, 16), 10s);
      failures += !hr || !s1.wait(*hr, 10s) || !hs || !s1.wait(*hs, 10s);
    }
    auto sc = s.hub.scope();
    auto h = sc.post_write(1, s.hub_at(0, 8), s.peer_remote(1, 0, 8));
    failures += !h || !sc.wait(*h, 10s);
  };
  const long cold = news.load();
  round(); // warm-up: the scope's slot and result vectors grow here
  const long warm = news.load();
  for (int i = 0; i < 50; i++)
    round();
  const long after = news.load();
  CHECK(failures == 0);
#ifndef RDMADL_TEST_NO_NEW_COUNT
  CHECK(warm > cold); // the counter does see the library's allocations
  CHECK(after - warm == 0);
#else
  MESSAGE("operator new is TSan's here: allocations are counted in the other tiers");
  CHECK((after == warm && warm == cold)); // nothing counts: the replacement is not linked
#endif
}

TEST_CASE("channel: automatic picks RDMA per pair where both can, TCP for a TCP-only peer") {
  fp().fakeprov_reset();
  const int live = fp().fakeprov_live_total();
  {
    channel_options o;
    o.device = FAKEPROV_DEVICE_NAME;
    o.tcp_address = "127.0.0.1";
    o.peers = 2;
    auto hub = ok(multi_channel::create(o)); // the fake device: RDMA and TCP
    o.peers = 1;
    auto rdma_peer = ok(channel::create(o));
    channel_options t = o;
    t.transport = channel_transport::tcp;
    auto tcp_peer = ok(channel::create(t));
    auto mine = ok(hub.channel_endpoints());
    CHECK(mine[0].caps == (channel_endpoint::can_rdma | channel_endpoint::can_tcp));
    // Through the blobs, as a product would send them.
    auto theirs = ok(parse_channel_endpoints(serialize_channel_endpoints(std::vector{
        ok(rdma_peer.local_channel_endpoint()), ok(tcp_peer.local_channel_endpoint())})));
    ok(rdma_peer.connect(mine[0]));
    ok(tcp_peer.connect(mine[1]));
    ok(hub.connect(theirs));
    CHECK(hub.transport_of(0) == channel_transport::rdma);
    CHECK(hub.transport_of(1) == channel_transport::tcp);
    CHECK(rdma_peer.transport() == channel_transport::rdma);
    CHECK(tcp_peer.transport() == channel_transport::tcp);
    CHECK(hub.describe(0) == "peer 0 over RDMA");
    CHECK(hub.describe(1).find("peer 1 over TCP: its host has no RDMA") == 0);
    CHECK(tcp_peer.describe().find("peer 0 over TCP: this host has no RDMA: ") == 0);
    CHECK(hub.pd().native_handle() != nullptr); // a device PD serves the TCP peer too
    CHECK(tcp_peer.pd().native_handle() == nullptr);

    const auto rights = access::remote_write | access::remote_read;
    std::array<std::byte, 256> hb{}, rb{}, tb{};
    auto hm = ok(hub.pd().register_memory(hb, rights));
    auto rm = ok(rdma_peer.pd().register_memory(rb, rights));
    auto tm = ok(tcp_peer.pd().register_memory(tb, rights));
    for (std::size_t i = 0; i < hb.size(); i++)
      hb[i] = static_cast<std::byte>(i * 3 + 1);
    std::array<multi_channel::part, 2> parts = {
        multi_channel::part{0, ok(hm.slice(0, 64)), ok(rm.remote(0, 64))},
        multi_channel::part{1, ok(hm.slice(64, 64)), ok(tm.remote(0, 64))}};
    std::array<work_result, 2> res{};
    ok(hub.scatter_write(parts, 2s, res));
    CHECK(res[0].ok());
    CHECK(res[1].ok());
    CHECK(std::memcmp(rb.data(), hb.data(), 64) == 0);
    CHECK(std::memcmp(tb.data(), hb.data() + 64, 64) == 0);
    // The TCP peer writes into a region of the hub's device PD.
    ok(tcp_peer.write(ok(tm.slice(0, 16)), ok(hm.remote(200, 16)), 2s));
    CHECK(std::memcmp(hb.data() + 200, tb.data(), 16) == 0);
  }
  CHECK(fp().fakeprov_live_total() == live);
  CHECK_MESSAGE(fp().fakeprov_violations() == 0, fp().fakeprov_last_violation());
  fp().fakeprov_reset();
}

TEST_CASE("channel: a transport-neutral channel of transport rdma has no TCP engine to poll") {
  fp().fakeprov_reset();
  const int live = fp().fakeprov_live_total();
  {
    channel_options o;
    o.device = FAKEPROV_DEVICE_NAME;
    o.transport = channel_transport::rdma; // create(opts): RDMA only, no engine
    auto a = ok(channel::create(o)), b = ok(channel::create(o));
    auto ea = ok(a.local_channel_endpoint()), eb = ok(b.local_channel_endpoint());
    ok(a.connect(eb));
    ok(b.connect(ea));
    CHECK(a.transport() == channel_transport::rdma);
    std::array<std::byte, 64> ab{}, bb{};
    auto am = ok(a.pd().register_memory(ab));
    auto bm = ok(b.pd().register_memory(bb));
    bb.fill(std::byte{7});
    {
      auto s = a.scope(); // transport-neutral (over_tcp set) without an engine
      auto h = ok(s.post_recv(0, ok(am.slice(0, 16))));
      ok(b.send(ok(bm.slice(0, 16)), 2s));
      auto r = ok(s.wait(h, 2s));
      CHECK(r.ok());
      CHECK(r.byte_len == 16);
    }
    CHECK(ab[15] == std::byte{7});
  }
  CHECK(fp().fakeprov_live_total() == live);
  CHECK_MESSAGE(fp().fakeprov_violations() == 0, fp().fakeprov_last_violation());
  fp().fakeprov_reset();
}

TEST_CASE("channel tcp: a channel pair's warm data path allocates nothing") {
  channel_options o;
  o.transport = channel_transport::tcp;
  o.tcp_address = "127.0.0.1";
  auto a = ok(channel::create(o)), b = ok(channel::create(o));
  auto ea = ok(a.local_channel_endpoint()), eb = ok(b.local_channel_endpoint());
  ok(a.connect(eb));
  ok(b.connect(ea));
  const auto rights = access::remote_write | access::remote_read;
  std::array<std::byte, 4096> ab{}, bb{};
  auto am = ok(a.pd().register_memory(ab, rights));
  auto bm = ok(b.pd().register_memory(bb, rights));
  auto a_at = ok(am.slice(0, 1024)), b_at = ok(bm.slice(0, 1024));
  auto b_remote = ok(bm.remote(2048, 1024));
  int failures = 0;
  auto round = [&] {
    failures += !a.write(a_at, b_remote, 10s);
    failures += !a.read(a_at, b_remote, 10s);
    auto s = b.scope();
    auto h = s.post_recv(0, b_at);
    failures += !h || !a.send(a_at, 10s) || !s.wait(*h, 10s);
  };
  round();
  const long warm = news.load();
  for (int i = 0; i < 50; i++)
    round();
  const long after = news.load();
  CHECK(failures == 0);
#ifndef RDMADL_TEST_NO_NEW_COUNT
  CHECK(after - warm == 0);
#else
  CHECK(after == warm);                   // nothing counts: the replacement is not linked
#endif
}

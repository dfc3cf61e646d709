// SPDX-License-Identifier: MIT
// Churn against the scripted fake provider (tests/fakes/fake_provider.c), in
// every host tier: a thousand connect/transfer/disconnect cycles in one
// process, each opening the device, connecting, moving bytes (every byte
// checked) and destroying everything, for queue pairs connected out of band
// (oob::exchange over loopback TCP), channel and multi_channel. After a
// warm-up cycle, the open file descriptors, the mappings and the fake's live
// objects at the end equal those at the start; each case prints its counts.
// (rdma_cm has no fake: its churn runs on Soft-RoCE, tests/guest/
// cxx_device_churn.cpp.) The fake's registry of destroyed objects is reaped
// after each cycle (fakeprov_reap), so that it does not grow either.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <malloc.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "rdmadl/rdmadl.hpp"

#include "fake_provider_case.hpp"
#include "process_counts.hpp"
#include "test_ok.hpp"
#include "test_socket.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

// ASan and TSan map shadow memory and keep freed blocks in quarantine, so the
// mappings and VmSize of those tiers are printed, not compared (LSan finds a
// leak there byte by byte); fds and objects are compared in every tier.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RDMADL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RDMADL_TEST_SANITIZED 1
#endif
#endif

namespace {

#ifdef RDMADL_TEST_SANITIZED
constexpr bool compare_memory = false;
#else
constexpr bool compare_memory = true;
#endif
constexpr int cycles = 1000;
constexpr std::size_t len = 4096;

void fill(std::span<std::byte> b, int seed) {
  for (std::size_t i = 0; i < b.size(); i++)
    b[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed) * 7) & 0xff);
}

// Runs one warm-up cycle, then CYCLES more, and checks that nothing grew;
// prints "churn.NAME: 1000 cycles, fds a -> b, maps ..., objects x -> y".
template <class F> void churn(const char *name, F cycle) {
  start();
  REQUIRE(cycle(-1)); // warm-up: first-use allocations (thread stacks, caches)
  fp().fakeprov_reap();
  const auto before = process_counts::now();
  const int objects_before = fp().fakeprov_live_total();
  int failed = 0;
  for (int i = 0; i < cycles && !failed; i++) {
    failed += !cycle(i);
    CHECK_MESSAGE(fp().fakeprov_violations() == 0, fp().fakeprov_last_violation());
    fp().fakeprov_reap();
  }
  const auto after = process_counts::now();
  const int objects_after = fp().fakeprov_live_total();
  std::printf("churn.%s: %d cycles, %s, objects %d -> %d\n", name, cycles,
              process_counts::describe(before, after).c_str(), objects_before, objects_after);
  CHECK(failed == 0);
  CHECK(after.fds == before.fds);
  if (compare_memory) {
    CHECK(after.maps == before.maps);
    CHECK(after.vm_size_kb == before.vm_size_kb);
  }
  CHECK(objects_after == objects_before);
  finish();
}

// One side of the verbs cycle: its own context, PD, CQ, QP and region.
struct side {
  context ctx;
  protection_domain pd;
  completion_queue cq;
  queue_pair qp;
  alignas(64) std::array<std::byte, len> buf{};
  memory_region mr;
};

result<void> open_side(side &s) {
  auto ctx = context::open(FAKEPROV_DEVICE_NAME);
  if (!ctx)
    return ctx.error();
  s.ctx = std::move(*ctx);
  auto pd = protection_domain::create(s.ctx);
  if (!pd)
    return pd.error();
  s.pd = std::move(*pd);
  auto cq = completion_queue::create(s.ctx);
  if (!cq)
    return cq.error();
  s.cq = std::move(*cq);
  qp_options o;
  o.send_depth = 4;
  o.recv_depth = 4;
  auto qp = queue_pair::create(s.ctx, s.pd, s.cq, s.cq, o);
  if (!qp)
    return qp.error();
  s.qp = std::move(*qp);
  auto mr = s.pd.register_memory(s.buf);
  if (!mr)
    return mr.error();
  s.mr = std::move(*mr);
  return {};
}

// Trades the endpoints over loopback TCP (the listening side on a thread)
// and connects both queue pairs.
bool connect_out_of_band(side &a, side &b) {
  const auto ea = a.qp.local_endpoint(), eb = b.qp.local_endpoint();
  if (!ea || !eb)
    return false;
  const auto blob_a = ea->serialize(), blob_b = eb->serialize();
  // A port free just now, each cycle (free_ipv4_port()).
  const std::uint16_t port = free_ipv4_port();
  result<std::vector<std::byte>> got_b = std::errc::interrupted;
  std::string why_b;
  std::atomic<bool> listening{false};
  std::thread listener([&] {
    listening = true;
    got_b = oob::exchange("127.0.0.1", port, true, blob_b, 5000ms);
    why_b = last_error_detail(); // (per thread)
  });
  // The connecting side retries every 20 ms until the peer listens: give the
  // listener a head start so that a cycle usually needs no retry.
  while (!listening)
    std::this_thread::yield();
  std::this_thread::sleep_for(1ms);
  auto got_a = oob::exchange("127.0.0.1", port, false, blob_a, 5000ms);
  listener.join();
  if (!got_a || !got_b) {
    std::fprintf(stderr, "oob::exchange on port %u: connecting: %s; listening: %s\n", port,
                 got_a ? "ok" : std::string(last_error_detail()).c_str(),
                 got_b ? "ok" : why_b.c_str());
    return false;
  }
  auto peer_of_a = endpoint::parse(*got_a), peer_of_b = endpoint::parse(*got_b);
  return peer_of_a && peer_of_b && a.qp.connect(*peer_of_a) && b.qp.connect(*peer_of_b);
}

// One completion of CQ within a second, successful.
bool one_ok(completion_queue &cq, std::uint32_t *byte_len = nullptr) {
  std::array<completion, 1> c;
  auto n = cq.poll_wait(c, 1000ms);
  if (!n || *n != 1 || !c[0].ok())
    return false;
  if (byte_len)
    *byte_len = c[0].byte_len;
  return true;
}

bool verbs_cycle(int i) {
  side a, b;
  if (!open_side(a) || !open_side(b) || !connect_out_of_band(a, b))
    return false;
  fill(a.buf, i);
  auto dst = b.mr.slice(0, len), src = a.mr.slice(0, len);
  if (!dst || !src || !b.qp.post_recv(*dst, 1) || !a.qp.post_send(*src, 2))
    return false;
  std::uint32_t got = 0;
  return one_ok(b.cq, &got) && one_ok(a.cq) && got == len && a.buf == b.buf;
}

// Two channels on one context, connected to each other.
bool channel_cycle(int i) {
  auto ctx = context::open(FAKEPROV_DEVICE_NAME);
  if (!ctx)
    return false;
  auto a = channel::create(*ctx), b = channel::create(*ctx);
  if (!a || !b)
    return false;
  auto ea = a->local_endpoint(), eb = b->local_endpoint();
  if (!ea || !eb || !a->handshake(*eb) || !b->handshake(*ea))
    return false;
  alignas(64) std::array<std::byte, len> abuf{}, bbuf{};
  fill(abuf, i);
  auto amr = a->pd().register_memory(abuf), bmr = b->pd().register_memory(bbuf);
  if (!amr || !bmr)
    return false;
  auto sc = b->scope();
  auto h = sc.post_recv(0, *bmr->slice(0, len));
  if (!h || !a->send(*amr->slice(0, len), 1000ms))
    return false;
  auto r = sc.wait(*h, 1000ms);
  return r && r->ok() && r->byte_len == len && abuf == bbuf;
}

// A multi_channel of two peers and the channels at their ends, one context;
// a write to each peer.
bool multi_channel_cycle(int i) {
  auto ctx = context::open(FAKEPROV_DEVICE_NAME);
  if (!ctx)
    return false;
  channel_options o;
  o.peers = 2;
  auto hub = multi_channel::create(*ctx, o);
  if (!hub)
    return false;
  std::array<channel, 2> peer;
  std::vector<endpoint> theirs;
  for (std::size_t p = 0; p < 2; p++) {
    auto c = channel::create(*ctx);
    auto mine = hub->local_endpoint(p);
    if (!c || !mine || !c->handshake(*mine))
      return false;
    auto e = c->local_endpoint();
    if (!e)
      return false;
    theirs.push_back(*e);
    peer[p] = std::move(*c);
  }
  if (!hub->handshake(theirs) || !hub->connected())
    return false;
  alignas(64) std::array<std::byte, len> hbuf{};
  alignas(64) std::array<std::array<std::byte, len>, 2> pbuf{};
  fill(hbuf, i);
  auto hmr = hub->pd().register_memory(hbuf);
  if (!hmr)
    return false;
  std::array<memory_region, 2> pmr;
  for (std::size_t p = 0; p < 2; p++) {
    auto m = peer[p].pd().register_memory(pbuf[p], access::remote_write);
    auto dst = m ? m->remote(0, len) : result<remote_region>(errc::empty_object);
    if (!dst || !hub->write(p, *hmr->slice(0, len), *dst, 1000ms))
      return false;
    pmr[p] = std::move(*m);
  }
  return pbuf[0] == hbuf && pbuf[1] == hbuf;
}

} // namespace

TEST_CASE("churn: queue pairs connected out of band, 1000 cycles leave nothing behind") {
  // The listening side runs on a thread of its own. glibc gives a thread
  // that finds the main arena busy an arena of its own (new mappings, at a
  // moment that depends on timing): one arena keeps the count exact.
  mallopt(M_ARENA_MAX, 1);
  churn("verbs", verbs_cycle);
}

TEST_CASE("churn: channel, 1000 cycles leave nothing behind") {
  churn("channel", channel_cycle);
}

TEST_CASE("churn: multi_channel, 1000 cycles leave nothing behind") {
  churn("multi_channel", multi_channel_cycle);
}

// SPDX-License-Identifier: MIT
// Exhaustion against the scripted fake provider (tests/fakes/fake_provider.c),
// in every host tier: queue pairs, CQs and memory regions are made until the
// device says no (the fake enforces the max_qp, max_cq and max_mr it
// reports, knobs MAX_QP, MAX_CQ, MAX_MR), and memory is registered until
// RLIMIT_MEMLOCK says no (setrlimit here; knob MEMLOCK counts the bytes).
// Each failure is a clean error whose last_error_detail() names the call,
// the resource and the limit; nothing leaks (the fake's live objects and the
// process's fds are counted and printed); the objects made before keep
// working (bytes move through them after the failure).
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <string>
#include <sys/resource.h>
#include <vector>

#include "rdmadl/rdmadl.hpp"

#include "fake_provider_case.hpp"
#include "process_counts.hpp"
#include "test_ok.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {

bool mentions(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

// The objects one case makes: a context, a PD, one CQ.
struct base {
  context ctx = ok(context::open(FAKEPROV_DEVICE_NAME));
  protection_domain pd = ok(protection_domain::create(ctx));
  completion_queue cq = ok(completion_queue::create(ctx));
};

// Connects qp A and B to each other and sends LEN bytes of A's region to B's
// (both registered on pd); true when every byte arrived.
bool moves_bytes(queue_pair &a, queue_pair &b, completion_queue &cq, const protection_domain &pd) {
  alignas(64) std::array<std::byte, 64> src{}, dst{};
  for (std::size_t i = 0; i < src.size(); i++)
    src[i] = static_cast<std::byte>(i * 7 + 1);
  auto ms = pd.register_memory(src), md = pd.register_memory(dst);
  if (!ms || !md)
    return false;
  auto ea = a.local_endpoint(), eb = b.local_endpoint();
  if (!ea || !eb || !a.connect(*eb) || !b.connect(*ea))
    return false;
  if (!b.post_recv(*md->all(), 1) || !a.post_send(*ms->all(), 2))
    return false;
  std::array<completion, 2> c;
  auto n = cq.poll_wait(c, 1000ms);
  return n && *n == 2 && c[0].ok() && c[1].ok() && src == dst;
}

// Live objects of every type and open fds, printed as "name: ... -> ...".
struct tally {
  int objects = fp().fakeprov_live_total();
  int fds = process_counts::open_fds();
};
void report(const char *name, const tally &a, const tally &b) {
  std::printf("exhaustion.%s: objects %d -> %d, fds %d -> %d\n", name, a.objects, b.objects, a.fds,
              b.fds);
  CHECK(b.objects == a.objects);
  CHECK(b.fds == a.fds);
}

} // namespace

TEST_CASE("exhaustion: queue pairs until max_qp, a named error, the earlier ones still work") {
  start();
  const tally t0;
  {
    fp().fakeprov_set(FAKEPROV_MAX_QP, 6);
    base b;
    std::vector<queue_pair> qps;
    result<queue_pair> q = errc::empty_object;
    while ((q = queue_pair::create(b.ctx, b.pd, b.cq, b.cq)) && qps.size() < 100)
      qps.push_back(std::move(*q));
    REQUIRE(qps.size() == 6);
    CHECK(q.error() == std::errc::not_enough_memory);
    const std::string detail(last_error_detail());
    MESSAGE(detail);
    CHECK(mentions(detail, "ibv_create_qp"));
    CHECK(mentions(detail, "queue pair"));
    CHECK(mentions(detail, "max_qp 6"));
    CHECK(fp().fakeprov_live(FAKEPROV_QP) == 6);
    CHECK(moves_bytes(qps[0], qps[5], b.cq, b.pd));
    // One freed, one more fits.
    qps.pop_back();
    CHECK(queue_pair::create(b.ctx, b.pd, b.cq, b.cq));
  }
  report("qp", t0, tally());
  finish();
}

TEST_CASE("exhaustion: CQs until max_cq, a named error, the earlier ones still work") {
  start();
  const tally t0;
  {
    fp().fakeprov_set(FAKEPROV_MAX_CQ, 5);
    base b; // one CQ of five
    std::vector<completion_queue> cqs;
    result<completion_queue> c = errc::empty_object;
    while ((c = completion_queue::create(b.ctx)) && cqs.size() < 100)
      cqs.push_back(std::move(*c));
    REQUIRE(cqs.size() == 4);
    CHECK(c.error() == std::errc::not_enough_memory);
    const std::string detail(last_error_detail());
    MESSAGE(detail);
    CHECK(mentions(detail, "ibv_create_cq"));
    CHECK(mentions(detail, "completion queue"));
    CHECK(mentions(detail, "max_cq 5"));
    auto a = ok(queue_pair::create(b.ctx, b.pd, cqs[3], cqs[3]));
    auto z = ok(queue_pair::create(b.ctx, b.pd, cqs[3], cqs[3]));
    CHECK(moves_bytes(a, z, cqs[3], b.pd));
  }
  report("cq", t0, tally());
  finish();
}

TEST_CASE("exhaustion: a multi_channel that runs out of queue pairs half-way leaves nothing") {
  start();
  const tally t0;
  {
    fp().fakeprov_set(FAKEPROV_MAX_QP, 6);
    base b;
    std::vector<queue_pair> held; // four of six taken elsewhere
    for (int i = 0; i < 4; i++)
      held.push_back(ok(queue_pair::create(b.ctx, b.pd, b.cq, b.cq)));
    const int live = fp().fakeprov_live_total();
    channel_options o;
    o.peers = 3;
    auto mc = multi_channel::create(b.ctx, o);
    REQUIRE(!mc);
    CHECK(mc.error() == std::errc::not_enough_memory);
    MESSAGE(last_error_detail());
    CHECK(mentions(last_error_detail(), "max_qp 6"));
    CHECK(fp().fakeprov_live_total() == live);
    CHECK(moves_bytes(held[0], held[1], b.cq, b.pd));
  }
  report("multi_channel", t0, tally());
  finish();
}

TEST_CASE("exhaustion: memory regions until max_mr, a named error, the earlier ones still work") {
  start();
  const tally t0;
  {
    fp().fakeprov_set(FAKEPROV_MAX_MR, 8);
    base b;
    std::vector<std::array<std::byte, 64>> bufs(10);
    std::vector<memory_region> mrs;
    result<memory_region> m = errc::empty_object;
    while (mrs.size() < bufs.size() && (m = b.pd.register_memory(bufs[mrs.size()])))
      mrs.push_back(std::move(*m));
    REQUIRE(mrs.size() == 8);
    CHECK(m.error() == errc::memlock_limit); // ENOMEM: the kernel does not say which
    const std::string detail(last_error_detail());
    MESSAGE(detail);
    CHECK(mentions(detail, "ibv_reg_mr"));
    CHECK(mentions(detail, "max_mr 8"));
    CHECK(mentions(detail, "RLIMIT_MEMLOCK"));
    mrs.resize(6); // two freed: room for the two moves_bytes registers
    auto a = ok(queue_pair::create(b.ctx, b.pd, b.cq, b.cq));
    auto z = ok(queue_pair::create(b.ctx, b.pd, b.cq, b.cq));
    CHECK(moves_bytes(a, z, b.cq, b.pd));
  }
  report("mr", t0, tally());
  finish();
}

TEST_CASE("exhaustion: pinned memory until RLIMIT_MEMLOCK, errc::memlock_limit, the earlier "
          "regions still work") {
  start();
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_MEMLOCK, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = 64 * 1024;
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < low.rlim_cur)
    low.rlim_cur = saved.rlim_max;
  REQUIRE(setrlimit(RLIMIT_MEMLOCK, &low) == 0);
  const tally t0;
  {
    fp().fakeprov_set(FAKEPROV_MEMLOCK, 1);
    base b;
    std::vector<std::vector<std::byte>> bufs;
    std::vector<memory_region> mrs;
    result<memory_region> m = errc::empty_object;
    while (mrs.size() < 100) {
      bufs.emplace_back(16 * 1024);
      if (!(m = b.pd.register_memory(bufs.back())))
        break;
      mrs.push_back(std::move(*m));
    }
    CHECK(mrs.size() == low.rlim_cur / (16 * 1024));
    CHECK(m.error() == errc::memlock_limit);
    CHECK(m.error() == std::errc::not_enough_memory);
    const std::string detail(last_error_detail());
    MESSAGE(detail);
    CHECK(mentions(detail, "ibv_reg_mr of 16384 bytes"));
    CHECK(mentions(detail, "RLIMIT_MEMLOCK " + std::to_string(low.rlim_cur)));
    // The regions made before still carry data; a freed one makes room.
    auto a = ok(queue_pair::create(b.ctx, b.pd, b.cq, b.cq));
    auto z = ok(queue_pair::create(b.ctx, b.pd, b.cq, b.cq));
    auto ea = ok(a.local_endpoint()), ez = ok(z.local_endpoint());
    ok(a.connect(ez));
    ok(z.connect(ea));
    bufs[0].assign(bufs[0].size(), std::byte{0x5a});
    ok(z.post_recv(ok(mrs[1].all()), 1));
    ok(a.post_send(ok(mrs[0].all()), 2));
    std::array<completion, 2> c;
    CHECK(ok(b.cq.poll_wait(c, 1000ms)) == 2);
    CHECK(bufs[1] == bufs[0]);
    mrs.pop_back();
    CHECK(b.pd.register_memory(bufs.back()));
  }
  report("memlock", t0, tally());
  REQUIRE(setrlimit(RLIMIT_MEMLOCK, &saved) == 0);
  finish();
}

TEST_CASE("exhaustion: EAGAIN (the rdma cgroup's rdma.max) is named for QPs, CQs and MRs") {
  // The kernel's rdma cgroup refuses one more device object with EAGAIN;
  // the fake answers as it would, and each error says so.
  start();
  const tally t0;
  {
    base b;
    std::array<std::byte, 64> buf{};
    fp().fakeprov_fail_next(FAKEPROV_OP_REG_MR, EAGAIN, 1);
    auto m = b.pd.register_memory(buf);
    REQUIRE(!m);
    CHECK(m.error() == std::errc::resource_unavailable_try_again);
    MESSAGE(last_error_detail());
    CHECK(mentions(last_error_detail(), "ibv_reg_mr: no memory region could be created"));
    CHECK(mentions(last_error_detail(), "rdma.max hca_object"));
    CHECK(mentions(last_error_detail(), "max_mr"));
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_QP, EAGAIN, 1);
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_QP_EX, EAGAIN, 1);
    auto q = queue_pair::create(b.ctx, b.pd, b.cq, b.cq);
    REQUIRE(!q);
    CHECK(q.error() == std::errc::resource_unavailable_try_again);
    MESSAGE(last_error_detail());
    CHECK(mentions(last_error_detail(), "queue pair"));
    CHECK(mentions(last_error_detail(), "rdma.max hca_object"));
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_CQ, EAGAIN, 1);
    fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_CQ_EX, EAGAIN, 1);
    auto c = completion_queue::create(b.ctx);
    REQUIRE(!c);
    MESSAGE(last_error_detail());
    CHECK(mentions(last_error_detail(), "completion queue"));
    CHECK(mentions(last_error_detail(), "rdma.max hca_object"));
    // Nothing was refused for good: the next ones are made.
    CHECK(b.pd.register_memory(buf));
    CHECK(queue_pair::create(b.ctx, b.pd, b.cq, b.cq));
  }
  report("eagain", t0, tally());
  finish();
}

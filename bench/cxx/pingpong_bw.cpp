// SPDX-License-Identifier: MIT
// rdmadl-bench-cxx: RC send/recv ping-pong latency and RDMA-write bandwidth
// through the C++ API, server and client in two processes on one device (as
// perftest's ib_send_lat / ib_write_bw run in the VM). Device from
// RDMADL_TEST_DEVICE, GID index from RDMADL_TEST_GID_INDEX (when set).
//   rdmadl-bench-cxx lat [ITERS [SIZE]]  ITERS round trips of a SIZE-byte
//       (default 2) send, no inline data, the loop of perftest's
//       run_iter_lat_send: separate send and receive CQs, receives posted
//       ahead, each send signaled and its completion awaited before polling
//       for the peer's message. Prints "lat_us <average> <median>" of the
//       half round trips (the client times each round trip, as perftest's
//       t_avg and t_typical)
//   rdmadl-bench-cxx bw [ITERS [SIZE]]   ITERS signaled RDMA writes of SIZE
//       bytes (default 65536), up to 128 outstanding; prints "bw_gbps <Gb/s>"
// Any failure prints one "rdmadl-bench-cxx: ..." line on stderr and exits
// non-zero; each process kills itself after 100 s (alarm) so a hung peer
// cannot hang the run.
#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "rdmadl/rdmadl.hpp"
#include "two_process.hpp"

using namespace rdmadl;

namespace {
constexpr unsigned timeout_s = 100;
using bench::fail;
constexpr long window = 128; // outstanding writes in bw (qp_options::send_depth)

struct side {
  context ctx;
  protection_domain pd;
  completion_queue cq;  // send CQ (and receive CQ in bw)
  completion_queue rcq; // receive CQ
  queue_pair qp;
};

side make_side() {
  const char *d = std::getenv("RDMADL_TEST_DEVICE");
  const char *g = std::getenv("RDMADL_TEST_GID_INDEX");
  side s;
  s.ctx = context::open(d ? d : "").value();
  s.pd = protection_domain::create(s.ctx).value();
  s.cq = completion_queue::create(s.ctx).value();
  s.rcq = completion_queue::create(s.ctx).value();
  qp_options o; // max_inline stays 0: perftest runs with -I 0
  if (g)
    o.gid_index = std::atoi(g);
  s.qp = queue_pair::create(s.ctx, s.pd, s.cq, s.rcq, o).value();
  return s;
}

void check(const completion &c) {
  if (!c.ok()) {
    std::fprintf(stderr, "rdmadl-bench-cxx: work completion failed: %s\n",
                 c.error().message().c_str());
    std::fflush(stderr);
    _exit(2);
  }
}

void wait1(completion_queue &cq) {
  completion c[1];
  for (;;) {
    auto n = cq.poll(c).value();
    if (n) {
      check(c[0]);
      return;
    }
  }
}
} // namespace

int main(int argc, char **argv) {
  bench::name = "rdmadl-bench-cxx";
  if (argc < 2 || (std::strcmp(argv[1], "lat") != 0 && std::strcmp(argv[1], "bw") != 0))
    fail("usage: rdmadl-bench-cxx lat|bw [ITERS [SIZE]]");
  bool lat = std::strcmp(argv[1], "lat") == 0;
  long iters = argc > 2 ? std::atol(argv[2]) : 5000;
  std::size_t size = argc > 3 ? std::strtoul(argv[3], nullptr, 0) : (lat ? 2 : 65536);
  if (iters < 1 || size < 1)
    fail("ITERS and SIZE must be positive");
  const bench::peer pp = bench::fork_pair(timeout_s);
  const bool server = pp.server;
  side s = make_side();
  std::vector<std::byte> buf(size);
  auto mr = s.pd.register_memory(buf, access::remote_write).value();
  auto mine = s.qp.local_endpoint().value().serialize();
  decltype(mine) theirs;
  bench::xfer(pp, mine, theirs);
  auto rr = mr.remote().value().serialize();
  decltype(rr) peer_rr;
  bench::xfer(pp, rr, peer_rr);
  s.qp.connect(endpoint::parse(theirs).value()).value();
  auto target = remote_region::parse(peer_rr).value();
  auto sl = mr.all().value();
  char sync = 0;
  constexpr long recv_ahead = 64; // < qp_options::recv_depth
  long recvs = 0;
  for (; lat && recvs < std::min(iters, recv_ahead); recvs++)
    s.qp.post_recv(sl, 1).value();
  bench::xfer(pp, sync, sync); // both connected, receive posted
  std::vector<double> rtt_us(lat && !server ? static_cast<std::size_t>(iters) : 0);
  auto t0 = std::chrono::steady_clock::now();
  if (lat) {
    auto prev = t0;
    for (long i = 0; i < iters; i++) {
      if (server) {
        wait1(s.rcq); // the ping
        if (recvs++ < iters)
          s.qp.post_recv(sl, 1).value();
        s.qp.post_send(sl, 2).value();
        wait1(s.cq); // the pong's send completion
      } else {
        s.qp.post_send(sl, 2).value();
        wait1(s.cq);  // the ping's send completion
        wait1(s.rcq); // the pong
        if (recvs++ < iters)
          s.qp.post_recv(sl, 1).value();
        auto now = std::chrono::steady_clock::now();
        rtt_us[static_cast<std::size_t>(i)] =
            std::chrono::duration<double, std::micro>(now - prev).count();
        prev = now;
      }
    }
  } else if (!server) {
    long posted = 0, done = 0;
    std::array<completion, 16> c;
    while (done < iters) {
      while (posted < iters && posted - done < window)
        s.qp.post_write(sl, target, static_cast<std::uint64_t>(posted++)).value();
      auto n = s.cq.poll(c).value();
      for (std::size_t k = 0; k < n; k++)
        check(c[k]);
      done += static_cast<long>(n);
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return bench::finish(pp, lat, rtt_us, secs, iters, size);
}

// SPDX-License-Identifier: MIT
// rdmadl-bench-cxx: RC send/recv ping-pong latency and RDMA-write bandwidth
// through the C++ API, server and client in two processes on one device (as
// perftest's ib_send_lat / ib_write_bw run in the VM).
//   rdmadl-bench-cxx lat [ITERS]       prints "lat_us <one-way average>"
//   rdmadl-bench-cxx bw [ITERS [SIZE]] prints "bw_gbps <Gb/s>"
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {
struct side {
  context ctx;
  protection_domain pd;
  completion_queue cq;
  queue_pair qp;
};

side make_side() {
  const char *d = std::getenv("RDMADL_TEST_DEVICE");
  side s;
  s.ctx = context::open(d ? d : "").value();
  s.pd = protection_domain::create(s.ctx).value();
  s.cq = completion_queue::create(s.ctx).value();
  qp_options o;
  o.max_inline = 64;
  s.qp = queue_pair::create(s.ctx, s.pd, s.cq, s.cq, o).value();
  return s;
}

template <class T> void xfer(int wfd, int rfd, const T &out, T &in) {
  if (write(wfd, &out, sizeof out) != sizeof out || read(rfd, &in, sizeof in) != sizeof in)
    std::abort();
}

void wait1(completion_queue &cq) {
  completion c[1];
  for (;;) {
    auto n = cq.poll(c);
    if (n && *n) {
      if (!c[0].ok())
        std::abort();
      return;
    }
  }
}
} // namespace

int main(int argc, char **argv) {
  bool lat = argc > 1 && std::strcmp(argv[1], "lat") == 0;
  long iters = argc > 2 ? std::atol(argv[2]) : (lat ? 10000 : 5000);
  std::size_t size = argc > 3 ? std::strtoul(argv[3], nullptr, 0) : (lat ? 2 : 65536);
  int p2c[2], c2p[2];
  if (pipe(p2c) || pipe(c2p))
    return 1;
  pid_t pid = fork();
  alarm(100); // never outlive a hung peer (the VM's timeout kills only the parent)
  bool server = pid == 0;
  int wfd = server ? c2p[1] : p2c[1], rfd = server ? p2c[0] : c2p[0];
  side s = make_side();
  std::vector<std::byte> buf(size);
  auto mr = s.pd.register_memory(buf, access::remote_write).value();
  auto mine = s.qp.local_endpoint()->serialize();
  decltype(mine) theirs;
  xfer(wfd, rfd, mine, theirs);
  auto rr = mr.remote()->serialize();
  decltype(rr) peer_rr;
  xfer(wfd, rfd, rr, peer_rr);
  if (!s.qp.connect(endpoint::parse(theirs).value()))
    return 1;
  auto target = remote_region::parse(peer_rr).value();
  auto sl = mr.all().value();
  char sync = 0;
  if (lat)
    s.qp.post_recv(sl, 1).value();
  xfer(wfd, rfd, sync, sync);
  auto flags = send_flags::signaled;
  auto t0 = std::chrono::steady_clock::now();
  if (lat) {
    for (long i = 0; i < iters; i++) {
      if (server) {
        wait1(s.cq);
        s.qp.post_recv(sl, 1).value();
        s.qp.post_send(sl, 2, flags).value();
        wait1(s.cq);
      } else {
        s.qp.post_send(sl, 2, flags).value();
        wait1(s.cq);
        wait1(s.cq);
        s.qp.post_recv(sl, 1).value();
      }
    }
  } else if (!server) {
    constexpr long window = 64;
    long posted = 0, done = 0;
    std::array<completion, 16> c;
    while (done < iters) {
      while (posted < iters && posted - done < window)
        s.qp.post_write(sl, target, static_cast<std::uint64_t>(posted++)).value();
      auto n = s.cq.poll(c).value();
      for (std::size_t k = 0; k < n; k++)
        if (!c[k].ok())
          return 1;
      done += static_cast<long>(n);
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  xfer(wfd, rfd, sync, sync);
  if (server)
    _exit(0);
  waitpid(pid, nullptr, 0);
  if (lat)
    std::printf("lat_us %.3f\n", secs * 1e6 / double(iters) / 2);
  else
    std::printf("bw_gbps %.3f\n", double(iters) * double(size) * 8 / secs / 1e9);
  return 0;
}

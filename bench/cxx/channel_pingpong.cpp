// SPDX-License-Identifier: MIT
// rdmadl-bench-channel lat|bw ch|qp [ITERS [SIZE]]: the same loops through
// a channel (ch) and through the raw C++ queue_pair API (qp), server and
// client in two processes (fork) on one device, so the ratio ch/qp is what
// the channel layer costs. Device from RDMADL_TEST_DEVICE; both variants
// select the port's RoCE v2 GID the same way (gid_selector's default).
//   lat  ITERS round trips of a SIZE-byte (default 2) send. Every receive is
//        posted before the message it is for can be sent, so no send meets
//        an empty receive queue: the client posts the receive for pong i,
//        sends ping i and awaits both; the server (whose receive for ping 0
//        was posted before the loop) posts the receive for ping i+1, sends
//        pong i and awaits both. ch: each iteration is one polling scope
//        (post_recv, post_send, the scope's end awaits both); qp: the same
//        posts and polls of one CQ. Prints "lat_us <average> <median>" of
//        the half round trips.
//   bw   ITERS signaled RDMA writes of SIZE bytes (default 65536) in batches
//        of 128, each batch awaited before the next: ch: scatter_write of
//        128 parts to the one peer; qp: 128 post_write and polls until 128
//        completions. Prints "bw_gbps <Gb/s>".
// Any failure prints one "rdmadl-bench-channel: ..." line on stderr and
// exits non-zero; each process kills itself after 100 s (alarm).
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
using namespace std::chrono_literals;

namespace {
constexpr unsigned timeout_s = 100;
using bench::fail;
constexpr std::size_t batch = 128;

template <class R> void must(const R &r, const char *what) {
  if (!r) {
    std::fprintf(stderr, "rdmadl-bench-channel: %s: %s\n", what, r.error().message().c_str());
    std::fflush(stderr);
    _exit(2);
  }
}

// Polls cq until want successful completions arrived.
void take(completion_queue &cq, std::size_t want) {
  std::array<completion, 16> c;
  while (want) {
    auto n = cq.poll(c);
    must(n, "poll");
    for (std::size_t i = 0; i < *n; i++)
      if (!c[i].ok())
        fail("work completion failed");
    want -= *n;
  }
}
} // namespace

int main(int argc, char **argv) {
  bench::name = "rdmadl-bench-channel";
  if (argc < 3 || (std::strcmp(argv[1], "lat") != 0 && std::strcmp(argv[1], "bw") != 0) ||
      (std::strcmp(argv[2], "ch") != 0 && std::strcmp(argv[2], "qp") != 0))
    fail("usage: rdmadl-bench-channel lat|bw ch|qp [ITERS [SIZE]]");
  const bool lat = std::strcmp(argv[1], "lat") == 0;
  const bool ch = std::strcmp(argv[2], "ch") == 0;
  long iters = argc > 3 ? std::atol(argv[3]) : 5000;
  std::size_t size = argc > 4 ? std::strtoul(argv[4], nullptr, 0) : (lat ? 2 : 65536);
  if (iters < 1 || size < 1)
    fail("ITERS and SIZE must be positive");
  if (!lat)
    iters = (iters + long(batch) - 1) / long(batch) * long(batch);
  const bench::peer pp = bench::fork_pair(timeout_s);
  const bool server = pp.server;

  const char *d = std::getenv("RDMADL_TEST_DEVICE");
  auto ctx = context::open(d ? d : "");
  must(ctx, "context::open");
  // Both variants: one PD, one CQ for sends and receives, one RC QP, the
  // same depths; the channel builds them itself.
  channel_options co;
  co.send_depth = co.recv_depth = 256;
  channel c;
  protection_domain pd;
  completion_queue cq;
  queue_pair qp;
  qp_options qo;
  qo.send_depth = qo.recv_depth = 256;
  if (ch) {
    auto r = channel::create(*ctx, co);
    must(r, "channel::create");
    c = std::move(*r);
  } else {
    auto p = protection_domain::create(*ctx);
    must(p, "protection_domain::create");
    pd = std::move(*p);
    cq_options cqo;
    cqo.depth = 512;
    auto q = completion_queue::create(*ctx, cqo);
    must(q, "completion_queue::create");
    cq = std::move(*q);
    auto x = queue_pair::create(*ctx, pd, cq, cq, qo);
    must(x, "queue_pair::create");
    qp = std::move(*x);
  }
  const protection_domain &the_pd = ch ? c.pd() : pd;
  std::vector<std::byte> buf(2 * size);
  auto mr = the_pd.register_memory(buf, access::remote_write);
  must(mr, "register_memory");
  auto le = ch ? c.local_endpoint() : qp.local_endpoint();
  must(le, "local_endpoint");
  auto mine = le->serialize();
  decltype(mine) theirs;
  bench::xfer(pp, mine, theirs);
  auto rr = mr->remote().value().serialize();
  decltype(rr) peer_rr;
  bench::xfer(pp, rr, peer_rr);
  auto peer = endpoint::parse(theirs).value();
  must(ch ? c.handshake(peer) : qp.connect(peer), "connect");
  auto target = remote_region::parse(peer_rr).value().slice(0, size).value();
  auto out = mr->slice(0, size).value(), in = mr->slice(size, size).value();
  char sync = 0;

  // One exchange of the latency loop: post the receive for the next message
  // (unless this side expects none), send, await both.
  auto exchange = [&](bool expect_next) {
    if (ch) {
      auto s = c.scope();
      if (expect_next)
        must(s.post_recv(0, in), "post_recv");
      must(s.post_send(0, out), "post_send");
    } else {
      if (expect_next)
        must(qp.post_recv(in, 1), "post_recv");
      must(qp.post_send(out, 2), "post_send");
      take(cq, expect_next ? 2 : 1);
    }
  };
  if (lat && server) { // the receive for the first ping, before the client may send
    if (ch) {
      auto s = c.scope();
      must(s.post_recv(0, in), "post_recv");
      bench::xfer(pp, sync, sync);
    } else {
      must(qp.post_recv(in, 1), "post_recv");
      bench::xfer(pp, sync, sync);
      take(cq, 1);
    }
  } else {
    bench::xfer(pp, sync, sync);
  }
  std::vector<double> rtt_us(lat && !server ? static_cast<std::size_t>(iters) : 0);
  std::array<multi_channel::part, batch> parts;
  for (auto &p : parts)
    p = {0, out, target};
  auto t0 = std::chrono::steady_clock::now();
  if (lat) {
    auto prev = t0;
    for (long i = 0; i < iters; i++) {
      // client: pong i's receive and ping i; server: ping i+1's receive and pong i
      exchange(!server || i + 1 < iters);
      if (!server) {
        auto now = std::chrono::steady_clock::now();
        rtt_us[static_cast<std::size_t>(i)] =
            std::chrono::duration<double, std::micro>(now - prev).count();
        prev = now;
      }
    }
  } else if (!server) {
    for (long done = 0; done < iters; done += long(batch)) {
      if (ch) {
        must(c.base().scatter_write(parts, 10s), "scatter_write");
      } else {
        for (std::size_t k = 0; k < batch; k++)
          must(qp.post_write(out, target, k), "post_write");
        take(cq, batch);
      }
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return bench::finish(pp, lat, rtt_us, secs, iters, size);
}

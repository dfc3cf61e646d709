// SPDX-License-Identifier: MIT
// rdmadl-bench-channel-host ITERS MODE: ITERS operations through a channel
// or through the raw queue_pair API, on the fake provider's minimal data
// path (its receives complete at once), for callgrind (bench/cxx/run-host.sh):
// the difference of two runs divided by the ITERS difference is the caller's
// instructions per operation. MODE is
//   qp-write / ch-write      one signaled 8-byte RDMA write, awaited
//                            (queue_pair::post_write + poll until it is
//                            there, vs multi_channel::write)
//   qp-sendrecv / ch-sendrecv  a receive and a send on one peer, both
//                            awaited (a ping-pong's half: post_recv,
//                            post_send, poll both, vs
//                            multi_channel::send_receive)
//   ch-scope2                the same through a polling scope: post_recv,
//                            post_send, a wait for each handle (against
//                            qp-sendrecv too)
//   qp-scatter3 / ch-scatter3  one 8-byte write to each of three peers, all
//                            awaited (three post_write + poll, vs
//                            multi_channel::scatter_write of three parts; as
//                            the raw loop keeps no per-part outcome, none is
//                            asked for: the first failure is the result)
//   ch-scatter3r             the same with every part's outcome (results)
// Prints "iters N ok" when every operation succeeded.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>
#include <unistd.h>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {
// Polls cq into c until want completions arrived; false on an error
// completion. The buffer is the caller's, kept across polls, as
// postpoll.cpp's and a channel's own are: a completion's default member
// initialisers make a fresh std::array<completion, 4> per call cost 29
// instructions of zeroing that no raw caller needs to pay.
bool take(completion_queue &cq, std::span<completion> c, std::size_t want) {
  while (want) {
    auto n = cq.poll(c);
    if (!n)
      return false;
    for (std::size_t i = 0; i < *n; i++)
      if (!c[i].ok())
        return false;
    want -= *n;
  }
  return true;
}

// Runs op iters times; how many succeeded.
template <class Op> [[gnu::noinline]] long loop(long iters, const Op &op) {
  long good = 0;
  for (long i = 0; i < iters; i++)
    good += op();
  return good;
}
} // namespace

int main(int argc, char **argv) {
  alarm(250);
  long iters = argc > 1 ? std::atol(argv[1]) : 1000;
  std::string_view mode = argc > 2 ? argv[2] : "ch-write";
  constexpr std::size_t peers = 3;
  auto ctx = context::open("").value();
  channel_options o;
  o.peers = peers;
  auto mc = multi_channel::create(ctx, o).value();
  std::array<endpoint, peers> eps;
  for (std::size_t i = 0; i < peers; i++)
    eps[i] = mc.local_endpoint(i).value();
  mc.handshake(eps).value(); // loopback: each QP to itself
  static std::byte buf[256];
  auto mr = mc.pd().register_memory(buf, access::remote_write).value();
  auto s = mr.slice(0, 8).value();
  auto r = mr.slice(8, 8).value();
  auto dst = mr.remote(64, 8).value();
  std::array<multi_channel::part, peers> parts;
  for (std::size_t i = 0; i < peers; i++)
    parts[i] = {i, s, dst};
  std::array<work_result, peers> res;
  completion_queue &cq = *mc.cq();
  std::array<completion, 4> wc;
  // What a caller of the raw API keeps at hand; the mode is decided once, so
  // that no variant pays for string compares in the loop.
  queue_pair &q0 = *mc.qp(0), &q1 = *mc.qp(1), &q2 = *mc.qp(2);
  constexpr std::array<std::string_view, 8> modes{"qp-write",    "ch-write",    "qp-sendrecv",
                                                  "ch-sendrecv", "qp-scatter3", "ch-scatter3",
                                                  "ch-scope2",   "ch-scatter3r"};
  std::size_t m = 0;
  while (m < modes.size() && modes[m] != mode)
    m++;
    // Each mode's loop is a function of its own, so that what the compiler
    // inlines into one variant (a channel's inline scope) does not change
    // the registers and code of the other. Every op is inlined into its loop
    // (always_inline), raw and channel alike, as a caller's own loop would
    // hold the calls: left to itself, GCC inlined the raw ops and not the
    // larger channel ones, whose lambda then paid a call frame per operation.
#define INLINED __attribute__((always_inline))
  long good = 0;
  if (m == 0) {
    good = loop(iters, [&]() INLINED { return q0.post_write(s, dst, 1) && take(cq, wc, 1); });
  } else if (m == 1) {
    good = loop(iters, [&]() INLINED { return bool(mc.write(0, s, dst, 1s)); });
  } else if (m == 2) {
    good = loop(iters, [&]() INLINED {
      return q0.post_recv(r, 1) && q0.post_send(s, 2) && take(cq, wc, 2);
    });
  } else if (m == 3) {
    good = loop(iters, [&]() INLINED { return bool(mc.send_receive(0, s, 0, r, 1s)); });
  } else if (m == 6) {
    good = loop(iters, [&]() INLINED {
      auto sc = mc.scope();
      auto hr = sc.post_recv(0, r);
      auto hs = sc.post_send(0, s);
      if (!hr || !hs)
        return false;
      auto wr = sc.wait(*hr, 1s), ws = sc.wait(*hs, 1s);
      return wr && wr->ok() && ws && ws->ok();
    });
  } else if (m == 4) {
    good = loop(iters, [&]() INLINED {
      return q0.post_write(s, dst, 1) && q1.post_write(s, dst, 2) && q2.post_write(s, dst, 3) &&
             take(cq, wc, 3);
    });
  } else if (m == 5) {
    good = loop(iters, [&]() INLINED { return bool(mc.scatter_write(parts, 1s)); });
  } else if (m == 7) {
    good = loop(iters, [&]() INLINED { return bool(mc.scatter_write(parts, 1s, res)); });
  } else {
    std::fprintf(stderr, "rdmadl-bench-channel-host: unknown mode\n");
    return 2;
  }
  std::printf("iters %ld %s\n", iters, good == iters ? "ok" : "FAILED");
  return good == iters ? 0 : 1;
}

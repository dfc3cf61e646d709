// SPDX-License-Identifier: MIT
// rdmadl-bench-scaling N MODE ITERS: a multi_channel of N peers on the fake
// provider's minimal data path (each QP connected to itself), for
// bench/cxx/run-scaling.sh, which runs it under callgrind with two ITERS
// values and divides the difference (set-up and start-up cancel). MODE is
//   base      open the context only (what "setup" is measured against)
//   setup     multi_channel::create + local_endpoints + handshake, nothing more
//   cm        (a real device: RDMADL_TEST_IP) a multi_channel of N peers made
//             by create_cm, accepting N channel::create_cm of this process
//             (ns: until all are connected; run-scaling.sh --vm)
//   heap      setup, run natively: prints the heap bytes it took (all of the
//             process's, from mallinfo2, and the C++ allocations alone)
//   scatter   ITERS x scatter_write of N 8-byte parts, one per peer, each
//             part's outcome returned
//   gather    ITERS x gather_read, the same way
//   scope     ITERS x a polling scope with one post_write per peer, awaited
//             by the scope's end
//   qp        ITERS x (post_write on each peer's queue pair, then poll the
//             shared CQ until all N completions are in): the raw API
// Every mode but heap leaves with _exit() once done, so the tear-down of N
// queue pairs is not counted. Prints "iters ITERS ok" when every operation
// succeeded, then "ns T": the wall time of the set-up (setup) or of the
// ITERS operations (the others), for a run outside callgrind ("heap N TOTAL
// CXX" for heap).
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <malloc.h>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <unistd.h>
#include <vector>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

// The C++ heap in use (what rdmadl allocates; the fake provider is C and
// uses malloc directly), counted by usable size. TSan's runtime defines
// operator new itself (a second definition does not link): there the bench
// builds without the count and prints -1.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RDMADL_BENCH_NO_NEW_COUNT 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define RDMADL_BENCH_NO_NEW_COUNT 1
#endif
namespace {
#ifdef RDMADL_BENCH_NO_NEW_COUNT
constexpr long cxx_heap = -1;
} // namespace
#else
std::atomic<long> cxx_heap{0};
void *counted(std::size_t n, std::size_t align) {
  void *p = align > alignof(std::max_align_t)
                ? std::aligned_alloc(align, (n + align - 1) / align * align)
                : std::malloc(n ? n : 1);
  if (!p)
    std::abort(); // a benchmark out of memory has nothing to report
  cxx_heap += static_cast<long>(malloc_usable_size(p));
  return p;
}
void uncounted(void *p) noexcept {
  if (p)
    cxx_heap -= static_cast<long>(malloc_usable_size(p));
  std::free(p);
}
} // namespace
void *operator new(std::size_t n) {
  return counted(n, 0);
}
void *operator new[](std::size_t n) {
  return counted(n, 0);
}
void *operator new(std::size_t n, std::align_val_t a) {
  return counted(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a) {
  return counted(n, static_cast<std::size_t>(a));
}
void operator delete(void *p) noexcept {
  uncounted(p);
}
void operator delete[](void *p) noexcept {
  uncounted(p);
}
void operator delete(void *p, std::size_t) noexcept {
  uncounted(p);
}
void operator delete[](void *p, std::size_t) noexcept {
  uncounted(p);
}
void operator delete(void *p, std::align_val_t) noexcept {
  uncounted(p);
}
void operator delete[](void *p, std::align_val_t) noexcept {
  uncounted(p);
}
void operator delete(void *p, std::size_t, std::align_val_t) noexcept {
  uncounted(p);
}
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept {
  uncounted(p);
}
#endif

namespace {
long heap_in_use() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<long>(m.uordblks + m.hblkhd);
}

[[noreturn]] void fail(const char *what, const std::error_code &e) {
  std::fprintf(stderr, "rdmadl-bench-scaling: %s: %s\n", what, e.message().c_str());
  std::exit(1);
}
template <class T> T must(result<T> r, const char *what) {
  if (!r)
    fail(what, r.error());
  return std::move(*r);
}
void must(result<void> r, const char *what) {
  if (!r)
    fail(what, r.error());
}

long long elapsed_ns(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
      .count();
}

multi_channel make(const context &ctx, std::size_t peers) {
  channel_options o;
  o.peers = peers;
  auto mc = must(multi_channel::create(ctx, o), "multi_channel::create");
  auto eps = must(mc.local_endpoints(), "local_endpoints");
  must(mc.handshake(eps), "handshake"); // loopback: each QP to itself
  return mc;
}
} // namespace

// Runs op iters times; how many succeeded.
template <class Op> [[gnu::noinline]] long loop(long iters, const Op &op) {
  long good = 0;
  for (long i = 0; i < iters; i++)
    good += op();
  return good;
}

int main(int argc, char **argv) {
  alarm(600); // default action: killed, the runner reports it
  if (argc != 4) {
    std::fprintf(stderr, "usage: rdmadl-bench-scaling N MODE ITERS\n");
    return 2;
  }
  const std::size_t n = std::strtoul(argv[1], nullptr, 10);
  const std::string_view mode = argv[2];
  const long iters = std::atol(argv[3]);
  auto ctx = must(context::open(""), "context::open");
  if (mode == "base") {
    std::printf("iters %ld ok\n", iters);
    std::fflush(stdout);
    _exit(0);
  }
  if (mode == "heap") {
    long before = heap_in_use(), cxx_before = cxx_heap;
    auto mc = make(ctx, n);
    std::printf("heap %zu %ld %ld\n", n, heap_in_use() - before,
                cxx_heap < 0 ? -1L : cxx_heap - cxx_before);
    return 0;
  }
  if (mode == "cm") {
    // rdma_cm, on a real device (RDMADL_TEST_IP: its address): a
    // multi_channel accepting N peers through a listener, each peer a
    // channel::create_cm connecting with its own rank, both sides in this
    // process (the acceptor on a thread of its own); ns is the wall time
    // until every peer is connected on both sides.
    const char *ip = std::getenv("RDMADL_TEST_IP");
    const std::string host = ip ? ip : "127.0.0.1";
    auto l = must(listener::bind(host, 0), "listener::bind");
    const auto t0 = std::chrono::steady_clock::now();
    result<multi_channel> hub = errc::empty_object;
    std::thread acceptor([&] {
      cm_channel_options o;
      o.accept = n;
      o.step_timeout = 60s;
      hub = multi_channel::create_cm(&l, o);
    });
    std::vector<channel> peers;
    for (std::size_t i = 0; i < n; i++) {
      cm_channel_options o;
      o.connect = {cm_address{host, l.port()}};
      o.rank = static_cast<std::uint32_t>(i);
      o.step_timeout = 60s;
      peers.push_back(must(channel::create_cm(nullptr, o), "channel::create_cm"));
    }
    acceptor.join();
    const long long ns = elapsed_ns(t0);
    auto mc = must(std::move(hub), "multi_channel::create_cm (accepting)");
    if (mc.peers() != n || !mc.connected())
      fail("multi_channel::create_cm (accepting)", errc::not_honoured);
    std::printf("iters %ld ok\nns %lld\n", iters, ns);
    std::fflush(stdout);
    _exit(0);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto mc = make(ctx, n);
  if (mode == "setup") {
    std::printf("iters %ld ok\nns %lld\n", iters, elapsed_ns(t0));
    std::fflush(stdout);
    _exit(0);
  }
  static std::byte buf[64];
  auto mr = must(mc.pd().register_memory(buf, access::remote_write | access::remote_read),
                 "register_memory");
  auto s = must(mr.slice(0, 8), "slice");
  auto dst = must(mr.remote(32, 8), "remote");
  std::vector<multi_channel::part> parts(n);
  for (std::size_t i = 0; i < n; i++)
    parts[i] = {i, s, dst};
  std::vector<work_result> res(n);
  completion_queue &cq = *mc.cq();
  std::array<completion, 16> wc;
  // Each mode's loop is a function of its own (loop()), so that what the
  // compiler inlines into one (a polling scope) does not change the
  // registers and code of another (the raw loop).
  long good = 0;
  t0 = std::chrono::steady_clock::now();
  if (mode == "scatter") {
    good = loop(iters, [&] { return bool(mc.scatter_write(parts, 1s, res)); });
  } else if (mode == "gather") {
    good = loop(iters, [&] { return bool(mc.gather_read(parts, 1s, res)); });
  } else if (mode == "scope") {
    good = loop(iters, [&] {
      bool ok = true;
      auto sc = mc.scope();
      for (std::size_t i = 0; i < n && ok; i++)
        ok = bool(sc.post_write(i, s, dst));
      return ok;
    });
  } else if (mode == "qp") {
    good = loop(iters, [&] {
      bool ok = true;
      for (std::size_t i = 0; i < n && ok; i++)
        ok = bool(mc.qp(i)->post_write(s, dst, i));
      for (std::size_t want = n; ok && want;) {
        auto got = cq.poll(wc);
        ok = bool(got);
        for (std::size_t j = 0; ok && j < *got; j++)
          ok = wc[j].ok();
        if (ok)
          want -= *got;
      }
      return ok;
    });
  } else {
    std::fprintf(stderr, "rdmadl-bench-scaling: unknown mode\n");
    return 2;
  }
  long long ns = elapsed_ns(t0);
  std::printf("iters %ld %s\nns %lld\n", iters, good == iters ? "ok" : "FAILED", ns);
  std::fflush(stdout);
  _exit(good == iters ? 0 : 1);
}

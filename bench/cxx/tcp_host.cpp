// SPDX-License-Identifier: MIT
// rdmadl-bench-tcp-host: a channel over TCP against a plain blocking socket
// loop of the same sizes, in the same run (no RDMA needed: run it with
// RDMADL_DISABLE=1). For 64 B, 64 KiB and 1 MiB: the ping-pong round trip
// (median of ITERS; each side sends, then receives into the same buffer) and
// the one-way throughput of a stream of ITERS messages, or of 4 windows or
// 8 MiB (below) if that is more (N: how many, printed as streamed=N), plain
// sockets with TCP_NODELAY against a pair of channels with transport = tcp. The plain loop streams
// with blocking send/recv through one buffer; its kernel socket buffers hold what is in flight. A
// channel's send completes only once the peer placed it, so a streaming caller keeps a window of
// distinct buffers in flight, and sizes it in bytes as a socket buffer is: the channel streams with
// budget / SIZE messages in flight (at least 4, at most max_window; the
// channels' send_depth and recv_depth are raised to that), and, beside it,
// with the window of a channel's default send_depth (64, at most 16 MiB of
// them: 16 at 1 MiB), whose figures are printed too.
//
// Usage: rdmadl-bench-tcp-host [--runs N] [--budget BYTES] [--only plain|channel]
//                              [--no-stream | --no-round-trips] [--phase-stats]
//                              [--listen ADDR:PORT | --connect ADDR:PORT] [ITERS [SIZE]]
// Without --listen/--connect, two threads of one process are the two ends,
// over loopback. With them, two processes (two hosts or VMs) are: the
// listening side echoes and receives, the connecting side measures and
// prints; both take the same ITERS, SIZE, --budget and --runs. The plain
// loop then runs over the processes' control connection, and the channels
// listen on its local addresses. SIZE: only that one of the three sizes
// (e.g. to count a size's instructions under callgrind). --runs N: each
// size's measurements (plain, channel, channel with the default window) N
// times, the plain loop first in odd runs, the channel in even ones; each
// figure is the median of the N, each ratio the median of the N per-run
// ratios (a "tcp-run:" line gives each run's). --budget: the streaming
// window in bytes (default 1 MiB). Each measurement starts on a warmed
// transport (warm_iters()).
// --only: one transport; --no-stream: round trips only; --no-round-trips:
// streams only (the warm-up's few round trips aside); each of these prints
// the figures with no ratios and no verdict, and skips the channel's stream
// with the default window. --phase-stats: where each measured phase's time
// goes (phase_meter; bench/cxx/trace-vm-tcp.sh uses these).
//
// Prints per size (US: microseconds, R: channel / plain, W: messages in
// flight):
//   tcp-host: SIZE lat plain=US channel=US ratio=R bw plain=MB/s channel=MB/s ratio=R
//             window=W default=MB/s default_ratio=R default_window=W streamed=N
// (one line), before it each run's ratios:
//   tcp-run: SIZE run=N first=plain|channel rtt=R bw=R
// (with both transports: --no-stream leaves out bw, --no-round-trips rtt)
// and, last, every ratio on one line, against the goal (round
// trip at most 1.2x, throughput with the budget's window at least 0.9x of
// the plain loop's), the default window's throughput ratios after it:
//   tcp-host: rtt64=R rtt64k=R rtt1m=R bw64=R bw64k=R bw1m=R bw64_default=R
//             bw64k_default=R bw1m_default=R budget=BYTES runs=N goal=met|not-met
#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "rdmadl/rdmadl.hpp"
#include "tcp_sockets.hpp"

using namespace rdmadl;
using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {
// The most messages the channel keeps in flight, and the send_depth and
// recv_depth its channels are given for that.
constexpr std::size_t max_window = 4096;
// The fewest: a window of at least a few messages, whatever the budget.
constexpr std::size_t min_window = 4;
// Messages in flight for the channel's throughput: budget bytes of them,
// within [min_window, max_window].
std::size_t window_of(std::size_t size, std::size_t budget) {
  return std::clamp<std::size_t>(budget / size, min_window, max_window);
}
// ... and with a channel's default send_depth (64), within 16 MiB of buffer
// per end (16 at 1 MiB): what a streaming sender that keeps its send queue
// full gets without tuning.
std::size_t default_window_of(std::size_t size) {
  return std::min<std::size_t>(64, std::max<std::size_t>(1, (16u << 20) / size));
}
// How many messages each throughput figure streams: the round trips' count,
// but at least stream_windows windows of the budget's, and at least
// stream_min_bytes. A stream shorter than its window is all start (every
// message posted at once, the first credits and the last acks a larger part
// of it than in any stream that runs on): at 500 messages of 64 B, the VMs'
// default, the stream lasted ~10 ms. A short stream is at the mercy of a
// stall: 4 windows of 64 B (16,384 messages, 1 MiB) lasted a quarter of a
// second between the VMs, and its runs spread 0.57-1.97 (bench/README.md,
// 2026-11-29, late afternoon); 8 MiB of it is 131,072 messages. The floor
// acts on 64 B only: the larger sizes stream more than 8 MiB at the VMs'
// default of 1500 messages (150 at 1 MiB).
constexpr std::size_t stream_windows = 4;
constexpr std::size_t stream_min_bytes = std::size_t{8} << 20;
int streamed_of(int iters, std::size_t size, std::size_t budget) {
  const std::size_t n =
      std::max(stream_windows * window_of(size, budget), (stream_min_bytes + size - 1) / size);
  return std::max(iters, static_cast<int>(n));
}

// Each measurement starts on a warmed transport: first a few round trips
// and a stream of one window, unmeasured, through the same connection and
// buffers. The plain loop's connection is one made before the first size
// and used ever since, while each run makes its channels anew: without it,
// a channel's figures would include a new connection's slow start and its
// receive buffer growing from the default (autotuning), which the plain
// loop paid only once, before its first figure.
// What to run (main()'s options): one transport or both, the streams or
// only the round trips, and per-phase figures of where the time goes.
struct bench_options {
  bool plain = true, chan = true, round_trips = true, streams = true, phase_stats = false;
  bool default_window = true; // the channel's second stream (not in a partial run)
};
bench_options opts;
int warm_iters(int iters) {
  return std::max(iters / 10, 2);
}
int warm_streamed(std::size_t size, std::size_t budget) {
  return opts.streams ? static_cast<int>(window_of(size, budget)) : 0;
}

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "rdmadl-bench-tcp-host: %s\n", what);
  std::exit(2);
}

// (Of an even count, the mean of the middle two: with --runs 4, the upper
// one alone flattered each throughput ratio and hurt each round trip's.)
double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Set around the measured calls, not the warm-up, by the thread that
// measures (phase_meter): with two threads of one process, the measuring
// side's lines alone are printed.
thread_local bool measuring = false;
// Runs a measured call with measuring set.
template <class Fn> auto measured(Fn &&fn) {
  struct reset {
    ~reset() { measuring = false; }
  } at_end;
  measuring = true;
  return fn();
}

// With --phase-stats, one line per measured phase of this process's end
// (it times its own side: with --listen/--connect each process is one end,
// and "others" are its other threads, the channel's progress thread):
//   tcp-phase: SIZE TRANSPORT PHASE n=N wall_us=.. app_user_us=..
//              app_sys_us=.. others_user_us=.. others_sys_us=.. app_sleeps=..
//              others_sleeps=.. preempted=..
// each per message: the wall time, the CPU time of the calling thread and of
// the process's other threads (user and system, as the kernel samples it),
// voluntary context switches (sleeps) of each and involuntary ones (the
// process's preemptions). After it, the kernel's state of each of the
// process's TCP sockets (tcp-sock: lines, tcp_sockets.cpp: round trip,
// congestion window, pacing, buffers).
class phase_meter {
public:
  phase_meter(const char *transport, const char *phase, std::size_t size, int n)
      : on_(opts.phase_stats && measuring && n > 0), transport_(transport), phase_(phase),
        size_(size), n_(n) {
    if (!on_)
      return;
    getrusage(RUSAGE_SELF, &self_);
    getrusage(RUSAGE_THREAD, &thread_);
    t0_ = clk::now();
  }
  ~phase_meter() {
    if (!on_)
      return;
    const double wall = std::chrono::duration<double, std::micro>(clk::now() - t0_).count();
    rusage self{}, thread{};
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_THREAD, &thread);
    const auto us = [](const timeval &a, const timeval &b) {
      return static_cast<double>(b.tv_sec - a.tv_sec) * 1e6 +
             static_cast<double>(b.tv_usec - a.tv_usec);
    };
    const double n = n_, au = us(thread_.ru_utime, thread.ru_utime),
                 as = us(thread_.ru_stime, thread.ru_stime);
    const double ou = us(self_.ru_utime, self.ru_utime) - au,
                 os = us(self_.ru_stime, self.ru_stime) - as;
    const double asl = static_cast<double>(thread.ru_nvcsw - thread_.ru_nvcsw);
    const double osl = static_cast<double>(self.ru_nvcsw - self_.ru_nvcsw) - asl;
    std::printf("tcp-phase: %zu %s %s n=%d wall_us=%.1f app_user_us=%.1f app_sys_us=%.1f "
                "others_user_us=%.1f others_sys_us=%.1f app_sleeps=%.2f others_sleeps=%.2f "
                "preempted=%.2f\n",
                size_, transport_, phase_, n_, wall / n, au / n, as / n, ou / n, os / n, asl / n,
                osl / n, static_cast<double>(self.ru_nivcsw - self_.ru_nivcsw) / n);
    const std::string label = std::to_string(size_) + " " + transport_ + " " + phase_;
    print_tcp_sockets(label.c_str());
  }
  phase_meter(const phase_meter &) = delete;
  phase_meter &operator=(const phase_meter &) = delete;

private:
  bool on_;
  const char *transport_, *phase_;
  std::size_t size_;
  int n_;
  clk::time_point t0_{};
  rusage self_{}, thread_{};
};

void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// ADDR:PORT (IPv4) as a sockaddr.
sockaddr_in parse_addr(const std::string &s) {
  const auto colon = s.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (colon == std::string::npos ||
      inet_pton(AF_INET, s.substr(0, colon).c_str(), &a.sin_addr) != 1)
    die("want ADDR:PORT (numeric IPv4)");
  a.sin_port = htons(static_cast<std::uint16_t>(std::atoi(s.c_str() + colon + 1)));
  return a;
}

// A connected pair of blocking loopback TCP sockets with TCP_NODELAY.
std::pair<int, int> socket_pair() {
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(l, reinterpret_cast<sockaddr *>(&a), len) || ::listen(l, 1) ||
      getsockname(l, reinterpret_cast<sockaddr *>(&a), &len))
    die("cannot listen on loopback");
  int c = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(c, reinterpret_cast<sockaddr *>(&a), len))
    die("cannot connect on loopback");
  int s = ::accept(l, nullptr, nullptr);
  ::close(l);
  nodelay(c);
  nodelay(s);
  return {c, s};
}
void send_all(int fd, const std::byte *p, std::size_t n) {
  while (n) {
    auto k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0)
      die("send failed (peer gone?)");
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}
void recv_all(int fd, std::byte *p, std::size_t n) {
  while (n) {
    auto k = ::recv(fd, p, n, 0);
    if (k <= 0)
      die("recv failed (peer gone?)");
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}
// Both sides of two processes meet here (one byte each way).
void sync_byte(int fd) {
  std::byte b{};
  send_all(fd, &b, 1);
  recv_all(fd, &b, 1);
}

struct figures {
  double rtt_us = 0, mb_s = 0, default_mb_s = 0;
};

// The plain loop's echoing side: echoes iters messages, then receives the
// stream of streamed ones and answers its end with one byte. The stream
// goes through window slots of size bytes in turn, as the channel's does
// (channel_stream()), so that both copy the same bytes to and from the same
// amount of memory: through one buffer that stays in the cache, the plain
// loop had streamed faster on the host for that alone (bench/README.md,
// 2026-11-28, evening).
void plain_echo(int fd, std::size_t size, int iters, int streamed, std::size_t window) {
  std::vector<std::byte> b(size * window);
  {
    phase_meter m("plain", "round-trips", size, iters);
    for (int i = 0; i < iters; i++) {
      recv_all(fd, b.data(), size);
      send_all(fd, b.data(), size);
    }
  }
  phase_meter m("plain", "stream", size, streamed);
  for (int i = 0; i < streamed; i++)
    recv_all(fd, b.data() + static_cast<std::size_t>(i) % window * size, size);
  send_all(fd, b.data(), 1);
}

// The plain loop's measuring side: round trip in microseconds, MB/s one way.
figures plain_measure(int fd, std::size_t size, int iters, int streamed, std::size_t window) {
  std::vector<std::byte> b(size * window);
  std::vector<double> rt;
  rt.reserve(static_cast<std::size_t>(iters));
  {
    phase_meter m("plain", "round-trips", size, iters);
    for (int i = 0; i < iters; i++) {
      auto t0 = clk::now();
      send_all(fd, b.data(), size);
      recv_all(fd, b.data(), size);
      rt.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
    }
  }
  phase_meter m("plain", "stream", size, streamed);
  auto t0 = clk::now();
  for (int i = 0; i < streamed; i++)
    send_all(fd, b.data() + static_cast<std::size_t>(i) % window * size, size);
  recv_all(fd, b.data(), 1);
  double s = std::chrono::duration<double>(clk::now() - t0).count();
  return {median(rt), static_cast<double>(size) * streamed / s / 1e6};
}

// One end of the channel pair, with registered buffer for the larger of
// the two windows.
struct chan_end {
  channel c;
  std::vector<std::byte> buf;
  memory_region mr;
};
chan_end make_end(const std::string &address, std::size_t size, std::size_t budget) {
  channel_options o;
  o.transport = channel_transport::tcp;
  o.tcp_address = address;
  const std::size_t most = std::max(window_of(size, budget), default_window_of(size));
  o.send_depth = o.recv_depth = static_cast<std::uint32_t>(std::max<std::size_t>(64, most));
  chan_end e{channel::create(o).value(), std::vector<std::byte>(size * most), {}};
  e.mr = e.c.pd().register_memory(e.buf).value();
  return e;
}

// One side of the channel's stream: iters receives (or sends) of size bytes
// through one scope, window of them posted at a time, each slot posted
// again once its request completed.
void channel_stream(chan_end &e, std::size_t size, int iters, std::size_t window, bool send) {
  auto s = e.c.scope();
  auto post = [&](std::size_t w) {
    auto sl = e.mr.slice(w * size, size).value();
    return (send ? s.post_send(0, sl) : s.post_recv(0, sl)).value();
  };
  std::vector<work_handle> h(window);
  int posted = 0;
  for (std::size_t w = 0; w < window && posted < iters; w++, posted++)
    h[w] = post(w);
  for (int i = 0; i < iters; i++) {
    const std::size_t w = static_cast<std::size_t>(i) % window;
    s.wait(h[w], 10s).value();
    if (posted < iters) {
      h[w] = post(w);
      posted++;
    }
  }
}

// The channel's echoing side, as plain_echo(), then the stream with the
// default window.
void channel_echo(chan_end &e, std::size_t size, int iters, int streamed, std::size_t budget) {
  auto sb = e.mr.slice(0, size).value();
  {
    phase_meter m("channel", "round-trips", size, iters);
    for (int i = 0; i < iters; i++) {
      e.c.receive(sb, 10s).value();
      e.c.send(sb, 10s).value();
    }
  }
  {
    phase_meter m("channel", "stream", size, streamed);
    channel_stream(e, size, streamed, window_of(size, budget), false);
  }
  if (opts.default_window)
    channel_stream(e, size, streamed, default_window_of(size), false);
}

// The channel's measuring side, as plain_measure(), then the stream with
// the default window.
figures channel_measure(chan_end &e, std::size_t size, int iters, int streamed,
                        std::size_t budget) {
  auto sa = e.mr.slice(0, size).value();
  std::vector<double> rt;
  rt.reserve(static_cast<std::size_t>(iters));
  {
    phase_meter m("channel", "round-trips", size, iters);
    for (int i = 0; i < iters; i++) {
      auto t0 = clk::now();
      e.c.send(sa, 10s).value();
      e.c.receive(sa, 10s).value();
      rt.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
    }
  }
  figures f{median(rt), 0, 0};
  const double bytes = static_cast<double>(size) * streamed;
  auto t0 = clk::now();
  {
    phase_meter m("channel", "stream", size, streamed);
    channel_stream(e, size, streamed, window_of(size, budget), true);
  }
  f.mb_s = bytes / std::chrono::duration<double>(clk::now() - t0).count() / 1e6;
  if (!opts.default_window)
    return f;
  t0 = clk::now();
  channel_stream(e, size, streamed, default_window_of(size), true);
  f.default_mb_s = bytes / std::chrono::duration<double>(clk::now() - t0).count() / 1e6;
  return f;
}

// Runs the plain loop's measurement and the channel's (those --only
// leaves), the channel's first when channel_first: the runs alternate the
// order, so that neither transport always runs on the state the other left.
template <class P, class C> void in_order(const P &plain, const C &chan, bool channel_first) {
  if (channel_first && opts.chan)
    chan();
  if (opts.plain)
    plain();
  if (!channel_first && opts.chan)
    chan();
}

// Both figures of one size, two threads of this process over loopback.
std::pair<figures, figures> one_run_threads(std::size_t size, int iters, int streamed,
                                            std::size_t budget, bool channel_first) {
  figures p, c;
  const auto plain = [&] {
    const auto [a, b] = socket_pair();
    const std::size_t w = window_of(size, budget);
    std::thread echo([&, b = b] {
      plain_echo(b, size, warm_iters(iters), warm_streamed(size, budget), w);
      plain_echo(b, size, iters, streamed, w);
    });
    (void)plain_measure(a, size, warm_iters(iters), warm_streamed(size, budget), w);
    p = measured([&, a = a] { return plain_measure(a, size, iters, streamed, w); });
    echo.join();
    ::close(a);
    ::close(b);
  };
  const auto chan = [&] {
    chan_end a = make_end("127.0.0.1", size, budget), b = make_end("127.0.0.1", size, budget);
    auto ea = a.c.local_channel_endpoint().value(), eb = b.c.local_channel_endpoint().value();
    a.c.connect(eb).value();
    b.c.connect(ea).value();
    std::thread echo([&] {
      channel_echo(b, size, warm_iters(iters), warm_streamed(size, budget), budget);
      channel_echo(b, size, iters, streamed, budget);
    });
    (void)channel_measure(a, size, warm_iters(iters), warm_streamed(size, budget), budget);
    c = measured([&] { return channel_measure(a, size, iters, streamed, budget); });
    echo.join();
  };
  in_order(plain, chan, channel_first);
  return {p, c};
}

// One transport's part of a run between two processes: the warm-up (wi
// round trips, ws streamed), then the measured pass; the measuring side's
// figures from measure_fn, the echoing side's calls to echo_fn (each called
// with the round trips and the streamed count).
template <class M, class E>
figures warm_then_run(bool measure, int wi, int ws, int iters, int streamed, const M &measure_fn,
                      const E &echo_fn) {
  if (!measure) {
    echo_fn(wi, ws);
    measured([&] { echo_fn(iters, streamed); });
    return {};
  }
  (void)measure_fn(wi, ws);
  return measured([&] { return measure_fn(iters, streamed); });
}

// The same between two processes over the control connection fd; only the
// measuring side's figures mean anything.
std::pair<figures, figures> one_run_remote(int fd, bool measure, std::size_t size, int iters,
                                           int streamed, std::size_t budget, bool channel_first) {
  figures p, c;
  const int wi = warm_iters(iters), ws = warm_streamed(size, budget);
  sync_byte(fd);
  const auto plain = [&] {
    const std::size_t w = window_of(size, budget);
    p = warm_then_run(
        measure, wi, ws, iters, streamed,
        [&](int i, int s) { return plain_measure(fd, size, i, s, w); },
        [&](int i, int s) { plain_echo(fd, size, i, s, w); });
  };
  const auto chan = [&] {
    // The channels listen on the address this side's control connection uses.
    sockaddr_in me{};
    socklen_t len = sizeof me;
    char addr[INET_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr *>(&me), &len) ||
        !inet_ntop(AF_INET, &me.sin_addr, addr, sizeof addr))
      die("getsockname failed");
    chan_end e = make_end(addr, size, budget);
    const auto mine = e.c.local_channel_endpoint().value().serialize();
    std::array<std::byte, channel_endpoint::serialized_size> theirs{};
    send_all(fd, mine.data(), mine.size());
    recv_all(fd, theirs.data(), theirs.size());
    e.c.connect(channel_endpoint::parse(theirs).value()).value();
    c = warm_then_run(
        measure, wi, ws, iters, streamed,
        [&](int i, int s) { return channel_measure(e, size, i, s, budget); },
        [&](int i, int s) { channel_echo(e, size, i, s, budget); });
    sync_byte(fd); // neither channel ends while the other still uses it
  };
  in_order(plain, chan, channel_first);
  return {p, c};
}
} // namespace

int main(int argc, char **argv) {
  int runs = 1;
  std::size_t budget = std::size_t{1} << 20; // bench/README.md: the sweeps
  std::string listen_at, connect_to;
  std::vector<const char *> pos;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--no-stream") {
      opts.streams = false;
    } else if (a == "--no-round-trips") {
      opts.round_trips = false;
    } else if (a == "--phase-stats") {
      opts.phase_stats = true;
    } else if (a == "--only" && i + 1 < argc) {
      const std::string t = argv[++i];
      if (t != "plain" && t != "channel")
        die("--only takes plain or channel");
      opts.plain = t == "plain";
      opts.chan = t == "channel";
    } else if ((a == "--runs" || a == "--budget" || a == "--listen" || a == "--connect") &&
               i + 1 < argc) {
      if (a == "--runs")
        runs = std::max(1, std::atoi(argv[i + 1]));
      else if (a == "--budget")
        budget = std::max<std::size_t>(1, std::strtoull(argv[i + 1], nullptr, 10));
      else
        (a == "--listen" ? listen_at : connect_to) = argv[i + 1];
      i++;
    } else if (a.rfind("--", 0) == 0) {
      die("usage: rdmadl-bench-tcp-host [--runs N] [--budget BYTES] [--only plain|channel] "
          "[--no-stream | --no-round-trips] [--phase-stats] "
          "[--listen ADDR:PORT | --connect ADDR:PORT] [ITERS [SIZE]]");
    } else {
      pos.push_back(argv[i]);
    }
  }
  const int iters = !pos.empty() ? std::atoi(pos[0]) : 2000;
  const std::size_t only = pos.size() > 1 ? std::strtoull(pos[1], nullptr, 10) : 0;

  // Two processes: one control connection, TCP_NODELAY (the plain loop's too).
  int ctl = -1;
  const bool remote = !listen_at.empty() || !connect_to.empty();
  const bool measure = listen_at.empty();
  if (!listen_at.empty()) {
    sockaddr_in a = parse_addr(listen_at);
    int l = ::socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(l, reinterpret_cast<sockaddr *>(&a), sizeof a) || ::listen(l, 1))
      die("cannot listen on --listen's address");
    ctl = ::accept(l, nullptr, nullptr);
    ::close(l);
  } else if (!connect_to.empty()) {
    sockaddr_in a = parse_addr(connect_to);
    for (int tries = 0; ctl < 0 && tries < 300; tries++) { // the listener may come later
      ctl = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(ctl, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        ::close(ctl);
        ctl = -1;
        std::this_thread::sleep_for(100ms);
      }
    }
  }
  if (remote && ctl < 0)
    die("no control connection");
  if (remote)
    nodelay(ctl);

  const std::size_t sizes[] = {64, std::size_t{64} << 10, std::size_t{1} << 20};
  const char *names[] = {"64", "64k", "1m"};
  double rtt_ratio[3] = {}, bw_ratio[3] = {}, default_ratio[3] = {};
  // One transport, or one phase only: no ratios and no verdict.
  if (!opts.streams && !opts.round_trips)
    die("--no-stream and --no-round-trips leave nothing to run");
  const bool partial = !opts.plain || !opts.chan || !opts.streams || !opts.round_trips;
  opts.default_window = !partial;
  bool all = !partial;
  for (std::size_t k = 0; k < 3; k++) {
    const std::size_t size = sizes[k];
    if (only && size != only) {
      all = false;
      continue;
    }
    const int n = size >= (std::size_t{1} << 20) ? std::max(iters / 10, 20) : iters;
    const int streamed = opts.streams ? streamed_of(n, size, budget) : 0;
    const int trips = opts.round_trips ? n : 0;
    std::vector<double> pl, cl, pb, cb, cd, rl, rb, rd;
    for (int r = 0; r < runs; r++) {
      const bool channel_first = r % 2 == 1;
      auto [p, c] = remote
                        ? one_run_remote(ctl, measure, size, trips, streamed, budget, channel_first)
                        : one_run_threads(size, trips, streamed, budget, channel_first);
      pl.push_back(p.rtt_us);
      cl.push_back(c.rtt_us);
      pb.push_back(p.mb_s);
      cb.push_back(c.mb_s);
      cd.push_back(c.default_mb_s);
      rl.push_back(c.rtt_us / p.rtt_us);
      rb.push_back(c.mb_s / p.mb_s);
      rd.push_back(c.default_mb_s / p.mb_s);
      if (measure && opts.plain && opts.chan) { // (one phase only: that one's ratio)
        std::printf("tcp-run: %zu run=%d first=%s", size, r + 1,
                    channel_first ? "channel" : "plain");
        if (opts.round_trips)
          std::printf(" rtt=%.2f", rl.back());
        if (opts.streams)
          std::printf(" bw=%.2f", rb.back());
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    if (!measure)
      continue;
    if (partial) {
      std::printf("tcp-host: %zu lat plain=%.1f channel=%.1f bw plain=%.0f channel=%.0f "
                  "streamed=%d (partial run: no ratios)\n",
                  size, median(pl), median(cl), median(pb), median(cb), streamed);
      std::fflush(stdout);
      continue;
    }
    rtt_ratio[k] = median(rl);
    bw_ratio[k] = median(rb);
    default_ratio[k] = median(rd);
    std::printf("tcp-host: %zu lat plain=%.1f channel=%.1f ratio=%.2f bw plain=%.0f "
                "channel=%.0f ratio=%.2f window=%zu default=%.0f default_ratio=%.2f "
                "default_window=%zu streamed=%d\n",
                size, median(pl), median(cl), rtt_ratio[k], median(pb), median(cb), bw_ratio[k],
                window_of(size, budget), median(cd), default_ratio[k], default_window_of(size),
                streamed);
    std::fflush(stdout);
  }
  if (measure && all) {
    // Judged on the ratios themselves, not as rounded for print: a cell that
    // misses is named with four decimals (0.8996 prints 0.90 beside it).
    std::string missed;
    const auto judge = [&](const char *what, const char *name, double r, bool ok) {
      std::printf(" %s%s=%.2f", what, name, r);
      char cell[48];
      if (!ok && std::snprintf(cell, sizeof cell, "%s%s%s:%.4f", missed.empty() ? "" : ",", what,
                               name, r) > 0)
        missed += cell;
    };
    std::printf("tcp-host:");
    for (std::size_t k = 0; k < 3; k++)
      judge("rtt", names[k], rtt_ratio[k], rtt_ratio[k] <= 1.2);
    for (std::size_t k = 0; k < 3; k++)
      judge("bw", names[k], bw_ratio[k], bw_ratio[k] >= 0.9);
    for (std::size_t k = 0; k < 3; k++)
      std::printf(" bw%s_default=%.2f", names[k], default_ratio[k]);
    std::printf(" budget=%zu runs=%d goal=%s", budget, runs, missed.empty() ? "met" : "not-met");
    if (!missed.empty())
      std::printf(" missed=%s", missed.c_str());
    std::printf("\n");
  }
  if (ctl >= 0)
    ::close(ctl);
  return 0;
}

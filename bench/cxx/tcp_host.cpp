// SPDX-License-Identifier: MIT
// rdmadl-bench-tcp-host: a channel over loopback TCP against a plain
// blocking socket loop of the same sizes, in the same run (no RDMA needed:
// run it with RDMADL_DISABLE=1). Two threads of one process are the two
// ends. Prints, per size, the ping-pong round trip (median of ITERS) and the
// one-way throughput (a window of 16 messages in flight), and the ratios:
//   tcp-host: SIZE lat plain=US channel=US ratio=R bw plain=MB/s channel=MB/s ratio=R
// Usage: rdmadl-bench-tcp-host [ITERS [SIZE]] (SIZE: only that one of the three sizes,
// e.g. to count a size's instructions under callgrind)
#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;
using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {
constexpr std::size_t window = 16;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
    std::abort();
  int c = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(c, reinterpret_cast<sockaddr *>(&a), len))
    std::abort();
  int s = ::accept(l, nullptr, nullptr);
  ::close(l);
  int one = 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return {c, s};
}
void send_all(int fd, const std::byte *p, std::size_t n) {
  while (n) {
    auto k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0)
      std::abort();
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}
void recv_all(int fd, std::byte *p, std::size_t n) {
  while (n) {
    auto k = ::recv(fd, p, n, 0);
    if (k <= 0)
      std::abort();
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}

// Plain sockets: round trip in microseconds, and MB/s one way.
std::pair<double, double> plain(std::size_t size, int iters) {
  auto [a, b] = socket_pair();
  std::vector<std::byte> ba(size), bb(size);
  std::thread echo([&, b = b] {
    for (int i = 0; i < iters; i++) {
      recv_all(b, bb.data(), size);
      send_all(b, bb.data(), size);
    }
    for (int i = 0; i < iters; i++)
      recv_all(b, bb.data(), size);
    send_all(b, bb.data(), 1);
  });
  std::vector<double> rt;
  for (int i = 0; i < iters; i++) {
    auto t0 = clk::now();
    send_all(a, ba.data(), size);
    recv_all(a, ba.data(), size);
    rt.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
  }
  auto t0 = clk::now();
  for (int i = 0; i < iters; i++)
    send_all(a, ba.data(), size);
  recv_all(a, ba.data(), 1);
  double s = std::chrono::duration<double>(clk::now() - t0).count();
  echo.join();
  ::close(a);
  ::close(b);
  return {median(rt), static_cast<double>(size) * iters / s / 1e6};
}

// The same over a pair of TCP channels.
std::pair<double, double> over_channel(std::size_t size, int iters) {
  channel_options o;
  o.transport = channel_transport::tcp;
  o.tcp_address = "127.0.0.1";
  channel a = channel::create(o).value(), b = channel::create(o).value();
  auto ea = a.local_channel_endpoint().value(), eb = b.local_channel_endpoint().value();
  a.connect(eb).value();
  b.connect(ea).value();
  std::vector<std::byte> ba(size * window), bb(size * window);
  auto ma = a.pd().register_memory(ba).value(), mb = b.pd().register_memory(bb).value();
  auto sa = ma.slice(0, size).value(), sb = mb.slice(0, size).value();
  std::thread echo([&] {
    for (int i = 0; i < iters; i++) {
      b.receive(sb, 10s).value();
      b.send(sb, 10s).value();
    }
    auto s = b.scope();
    std::vector<work_handle> h(window);
    int posted = 0;
    for (std::size_t w = 0; w < window && posted < iters; w++, posted++)
      h[w] = s.post_recv(0, mb.slice(w * size, size).value()).value();
    for (int i = 0; i < iters; i++) {
      const std::size_t w = static_cast<std::size_t>(i) % window;
      s.wait(h[w], 10s).value();
      if (posted < iters) {
        h[w] = s.post_recv(0, mb.slice(w * size, size).value()).value();
        posted++;
      }
    }
  });
  std::vector<double> rt;
  for (int i = 0; i < iters; i++) {
    auto t0 = clk::now();
    a.send(sa, 10s).value();
    a.receive(sa, 10s).value();
    rt.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
  }
  auto t0 = clk::now();
  {
    auto s = a.scope();
    std::vector<work_handle> h(window);
    int posted = 0;
    for (std::size_t w = 0; w < window && posted < iters; w++, posted++)
      h[w] = s.post_send(0, ma.slice(w * size, size).value()).value();
    for (int i = 0; i < iters; i++) {
      const std::size_t w = static_cast<std::size_t>(i) % window;
      s.wait(h[w], 10s).value();
      if (posted < iters) {
        h[w] = s.post_send(0, ma.slice(w * size, size).value()).value();
        posted++;
      }
    }
  }
  double s = std::chrono::duration<double>(clk::now() - t0).count();
  echo.join();
  return {median(rt), static_cast<double>(size) * iters / s / 1e6};
}
} // namespace

int main(int argc, char **argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
  const std::size_t only = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 0;
  for (std::size_t size : {std::size_t{64}, std::size_t{64} << 10, std::size_t{1} << 20}) {
    if (only && size != only)
      continue;
    const int n = size >= (std::size_t{1} << 20) ? std::max(iters / 10, 20) : iters;
    auto p = plain(size, n);
    auto c = over_channel(size, n);
    std::printf("tcp-host: %zu lat plain=%.1f channel=%.1f ratio=%.2f bw plain=%.0f "
                "channel=%.0f ratio=%.2f\n",
                size, p.first, c.first, c.first / p.first, p.second, c.second, c.second / p.second);
  }
  return 0;
}

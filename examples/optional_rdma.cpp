// SPDX-License-Identifier: MIT
// Optional RDMA in a product: one binary moves a buffer between two nodes over
// RDMA (rdma_cm, send/receive) when both ends can, and over TCP when either
// cannot; it says which transport it used and why, and both ends check an
// FNV-1a checksum of the data.
//
//   rdmadl-example-optional-rdma --listen PORT                        receives
//   rdmadl-example-optional-rdma --connect HOST PORT [--size BYTES]   sends
//
// The ends talk over TCP port PORT first (what each can do, then the
// checksum); the RDMA connection uses PORT + 1. Exit status: 0 moved and
// verified, 1 failed, 2 bad usage, 3 the peer was lost mid-transfer and the
// transport said so (an error completion or a DISCONNECTED event; a "peer
// lost: " line says which), 4 the peer was only presumed lost after 20 s
// without a completion (a "peer silent: " line).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <rdmadl/rdmadl.hpp>

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t chunk = 64 * 1024;

// What each end tells the other first.
struct hello {
  std::uint8_t can_rdma;
  std::uint64_t size; // the sender's byte count (receiver: 0)
  char why[247];      // NUL-terminated
};

struct lost { // thrown when the peer goes away mid-transfer
  std::string what;
  bool silence = false; // presumed, not seen: no completion for 20 s
};

// A peer that stops answering turns a request in flight into an error
// completion after (retry_count + 1) transmissions of 4.096 us * 2^ack_timeout
// each: ~5 s here, well inside the 20 s of silence after which it is only
// presumed lost, and long enough for a live peer in a slow VM.
constexpr std::uint8_t ack_timeout = 18; // 1.07 s per transmission
constexpr std::uint8_t retry_count = 4;

std::uint64_t fnv1a(std::uint64_t h, const std::byte *p, std::size_t n) {
  for (std::size_t i = 0; i < n; i++)
    h = (h ^ std::to_integer<std::uint8_t>(p[i])) * 0x100000001b3ull;
  return h;
}

// The sender's data: byte i of the stream, so no buffer of the whole size.
void fill(std::byte *p, std::size_t n, std::uint64_t off) {
  for (std::size_t i = 0; i < n; i++)
    p[i] = std::byte(((off + i) * 2654435761u) >> 11);
}

void io(int fd, void *buf, std::size_t n, bool out) {
  auto *p = static_cast<char *>(buf);
  while (n > 0) {
    ssize_t r = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (r <= 0)
      throw lost{std::string("TCP ") + (out ? "send: " : "receive: ") +
                 (r == 0 ? "connection closed" : std::strerror(errno))};
    p += r;
    n -= static_cast<std::size_t>(r);
  }
}

int tcp_listen_accept(std::uint16_t port) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (l < 0 || bind(l, reinterpret_cast<sockaddr *>(&a), sizeof a) || listen(l, 1))
    return -1;
  int fd = accept(l, nullptr, nullptr);
  close(l);
  return fd;
}

// Connects to host:port, retrying for a minute (the receiver may start later).
int tcp_connect(const char *host, std::uint16_t port) {
  addrinfo hints{}, *ai = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, std::to_string(port).c_str(), &hints, &ai) != 0)
    return -1;
  int fd = -1;
  for (int i = 0; i < 300 && fd < 0; i++) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
      usleep(200000);
    }
  }
  freeaddrinfo(ai);
  return fd;
}

// Sends (size > 0) or receives the stream over an rdma_cm connection; returns
// the checksum. Each 64 KiB chunk is answered by a small acknowledgement, so
// a receive is always posted before the next chunk comes. peer_probe is 8
// bytes of the peer's memory that this end may read.
std::uint64_t move_rdma(connection &c, bool sender, std::uint64_t size,
                        const remote_region &peer_probe) {
  enum : std::uint64_t { recv_id = 1, send_id = 2, probe_id = 3 };
  std::vector<std::byte> data(chunk), ack(8), probe(8);
  auto md = c.pd().register_memory(data).value();
  auto ma = c.pd().register_memory(ack).value();
  auto mp = c.pd().register_memory(probe).value();
  completion wc[1];
  unsigned got[4] = {}; // completions taken but not yet waited for, by id
  bool probing = false;
  auto last = std::chrono::steady_clock::now();
  // Takes completions until one with wr_id id comes. A lost peer must show as an
  // error completion, yet while we only wait for the peer's message nothing
  // of ours is in flight: so after each second without one, we read 8 bytes
  // of the peer's memory (one read at a time). A live peer's NIC answers
  // without its program; a dead peer leaves the read unanswered until the
  // transport gives up. A DISCONNECTED event (the peer's program closed)
  // counts too. 20 s without a completion other than a probe's is only the
  // fallback (reported as silence, exit status 4).
  auto wait_for = [&](std::uint64_t id, const char *what) {
    while (got[id] == 0) {
      auto n = c.cq().poll_wait(wc, 1s);
      auto now = std::chrono::steady_clock::now();
      if (n && *n == 1) {
        if (!wc[0].ok())
          throw lost{std::string("error completion: ") + wc[0].error().message() + " (status " +
                     std::to_string(wc[0].status) + ", " +
                     (wc[0].wr_id == probe_id  ? "probe read"
                      : wc[0].wr_id == send_id ? "send"
                                               : "receive") +
                     ") while waiting for the " + what};
        if (wc[0].wr_id == probe_id) {
          probing = false;
          continue;
        }
        got[wc[0].wr_id]++;
        last = now;
        continue;
      }
      if (c.wait_disconnect(0ms))
        throw lost{std::string("DISCONNECTED event while waiting for the ") + what};
      if (now - last > 20s)
        throw lost{std::string("no completion within 20 s (") + what + ")", true};
      if (!probing && !c.qp().post_read(*mp.all(), peer_probe, probe_id))
        throw lost{"post_read failed"};
      probing = true;
    }
    got[id]--;
  };
  std::uint64_t h = 0xcbf29ce484222325ull, done = 0, shown = 0;
  if (!sender && !c.qp().post_recv(*md.all(), recv_id))
    throw lost{"post_recv failed"};
  while (done < size) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, size - done));
    if (sender) {
      fill(data.data(), n, done);
      h = fnv1a(h, data.data(), n);
      if (!c.qp().post_recv(*ma.all(), recv_id) || !c.qp().post_send(*md.slice(0, n), send_id))
        throw lost{"post failed"};
      wait_for(send_id, "chunk's completion");
      wait_for(recv_id, "acknowledgement");
    } else {
      wait_for(recv_id, "chunk");
      h = fnv1a(h, data.data(), n);
      if ((done + n < size && !c.qp().post_recv(*md.all(), recv_id)) ||
          !c.qp().post_send(*ma.all(), send_id))
        throw lost{"post failed"};
      wait_for(send_id, "acknowledgement's completion");
    }
    done += n;
    if (done - shown >= (4u << 20)) {
      std::printf("progress %llu\n", static_cast<unsigned long long>(done));
      std::fflush(stdout);
      shown = done;
    }
  }
  while (probing) // the last probe's completion, before its buffer goes
    if (auto n = c.cq().poll_wait(wc, 10s); !n || wc[0].wr_id == probe_id)
      probing = false;
  return h;
}

// Each end gives the other 8 bytes of its memory to read (the probe above).
remote_region trade_probe(int fd, const memory_region &mine) {
  auto blob = mine.remote().value().serialize();
  decltype(blob) theirs{};
  io(fd, blob.data(), blob.size(), true);
  io(fd, theirs.data(), theirs.size(), false);
  auto r = remote_region::parse(theirs);
  if (!r)
    throw lost{"the peer's probe region: " + r.error().message()};
  return *r;
}

std::uint64_t move_tcp(int fd, bool sender, std::uint64_t size) {
  std::vector<std::byte> data(chunk);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::uint64_t done = 0; done < size;) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, size - done));
    if (sender)
      fill(data.data(), n, done);
    io(fd, data.data(), n, sender);
    h = fnv1a(h, data.data(), n);
    done += n;
  }
  return h;
}

int usage() {
  std::fprintf(stderr, "usage: rdmadl-example-optional-rdma --listen PORT\n"
                       "       rdmadl-example-optional-rdma --connect HOST PORT [--size BYTES]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  bool sender = argc >= 4 && std::strcmp(argv[1], "--connect") == 0;
  if (!sender && !(argc == 3 && std::strcmp(argv[1], "--listen") == 0))
    return usage();
  const char *host = sender ? argv[2] : nullptr;
  long port = std::strtol(argv[sender ? 3 : 2], nullptr, 10);
  std::uint64_t size = 16u << 20;
  char *end = nullptr;
  if (sender && argc == 6 && std::strcmp(argv[4], "--size") == 0)
    size = std::strtoull(argv[5], &end, 10);
  if ((sender && argc != 4 && !end) || (end && *end))
    return usage();
  if (port < 1 || port > 65534 || size == 0)
    return usage();

  // What this end can do: an RDMA device that opens. When RDMA cannot work
  // here, diagnose() gives the one sentence saying why (and what to do).
  hello mine{}, theirs{};
  auto ctx = context::open();
  mine.can_rdma = ctx ? 1 : 0;
  mine.size = sender ? size : 0;
  std::snprintf(mine.why, sizeof mine.why, "%s",
                ctx ? (std::string("device ") + std::string(ctx->device_name())).c_str()
                    : std::string(diagnose().sentence).c_str());

  int fd = sender ? tcp_connect(host, static_cast<std::uint16_t>(port))
                  : tcp_listen_accept(static_cast<std::uint16_t>(port));
  if (fd < 0) {
    std::fprintf(stderr, "TCP %s port %ld: %s\n", sender ? "connect to" : "listen on", port,
                 std::strerror(errno));
    return 1;
  }
  timeval tmo{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof tmo);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof tmo);
  try {
    io(fd, &mine, sizeof mine, true);
    io(fd, &theirs, sizeof theirs, false);
    theirs.why[sizeof theirs.why - 1] = '\0';
    if (!sender)
      size = theirs.size;
    bool rdma = mine.can_rdma && theirs.can_rdma;
    std::printf("transport: %s (this end: %s: %s; peer: %s: %s)\n", rdma ? "rdma" : "tcp",
                mine.can_rdma ? "RDMA" : "no RDMA", mine.why, theirs.can_rdma ? "RDMA" : "no RDMA",
                theirs.why);
    std::fflush(stdout);

    auto t0 = std::chrono::steady_clock::now();
    std::uint64_t h = 0;
    cm_options opts;
    opts.transport.ack_timeout = ack_timeout;
    opts.transport.retry_count = retry_count;
    std::vector<std::byte> target(8); // what the peer's probes read
    if (!rdma) {
      h = move_tcp(fd, sender, size);
    } else if (sender) {
      char ready = 0; // the receiver listens on PORT + 1
      io(fd, &ready, 1, false);
      auto conn = connect(host, static_cast<std::uint16_t>(port + 1), opts);
      if (!conn) {
        std::fprintf(stderr, "rdma_cm connect: %s\n", conn.error().message().c_str());
        return 1;
      }
      auto mt = conn->pd().register_memory(target, access::remote_read).value();
      h = move_rdma(*conn, true, size, trade_probe(fd, mt));
      if (!conn->disconnect(10s))
        throw lost{"no DISCONNECTED event"};
    } else {
      sockaddr_in me{};
      socklen_t len = sizeof me;
      char ip[INET_ADDRSTRLEN] = "";
      getsockname(fd, reinterpret_cast<sockaddr *>(&me), &len);
      inet_ntop(AF_INET, &me.sin_addr, ip, sizeof ip);
      auto lst = listener::bind(ip, static_cast<std::uint16_t>(port + 1));
      if (!lst) {
        std::fprintf(stderr, "listen on %s: %s\n", ip, lst.error().message().c_str());
        return 1;
      }
      char ready = 1;
      io(fd, &ready, 1, true);
      auto req = lst->get_request(30s);
      auto conn = req ? req->accept(opts) : result<connection>(req.error());
      if (!conn) {
        std::fprintf(stderr, "rdma_cm accept: %s\n", conn.error().message().c_str());
        return 1;
      }
      auto mt = conn->pd().register_memory(target, access::remote_read).value();
      h = move_rdma(*conn, false, size, trade_probe(fd, mt));
      if (!conn->wait_disconnect(10s))
        throw lost{"no DISCONNECTED event"};
    }
    auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);

    // Both ends compare checksums; the receiver's verdict decides.
    std::uint64_t peer_h = 0;
    io(fd, &h, sizeof h, true);
    io(fd, &peer_h, sizeof peer_h, false);
    bool ok = h == peer_h;
    std::printf("moved %llu bytes over %s in %.0f ms; checksum %016llx (peer %016llx): %s\n",
                static_cast<unsigned long long>(size), rdma ? "rdma" : "tcp", ms.count(),
                static_cast<unsigned long long>(h), static_cast<unsigned long long>(peer_h),
                ok ? "ok" : "MISMATCH");
    close(fd);
    return ok ? 0 : 1;
  } catch (const lost &e) {
    std::printf("%s: %s\n", e.silence ? "peer silent" : "peer lost", e.what.c_str());
    close(fd);
    return e.silence ? 4 : 3;
  }
}

// SPDX-License-Identifier: MIT
// One-sided RDMA: write a buffer into a peer's memory, read it back.
//   rdmadl-example-write-read                       both queue pairs in one process
//   rdmadl-example-write-read --listen PORT         the target, on another node
//   rdmadl-example-write-read --connect HOST PORT   the initiator
// Between nodes the serialised endpoint and remote_region travel over TCP.
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <rdmadl/rdmadl.hpp>

namespace {

// A TCP connection to the peer: accepted on port (host null) or made to
// host:port, retried for a minute. -1 on failure.
int tcp(const char *host, const char *port) {
  addrinfo hints{}, *ai = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = host ? 0 : AI_PASSIVE;
  if (getaddrinfo(host, port, &hints, &ai) != 0)
    return -1;
  int fd = -1, one = 1;
  for (int i = 0; i < 300 && fd < 0; i++) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (!host) {
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      int l = fd;
      fd = bind(l, ai->ai_addr, ai->ai_addrlen) || listen(l, 1) ? -1 : accept(l, nullptr, nullptr);
      close(l);
      break;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
      usleep(200000);
    }
  }
  freeaddrinfo(ai);
  return fd;
}

bool xfer(int fd, void *p, std::size_t n, bool out) {
  for (auto *c = static_cast<char *>(p); n > 0;) {
    ssize_t r = out ? send(fd, c, n, MSG_NOSIGNAL) : recv(fd, c, n, MSG_WAITALL);
    if (r <= 0)
      return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  using namespace rdmadl;
  bool target = argc == 3 && std::strcmp(argv[1], "--listen") == 0;
  bool initiator = argc == 4 && std::strcmp(argv[1], "--connect") == 0;
  if (argc != 1 && !target && !initiator) {
    std::fprintf(stderr,
                 "usage: rdmadl-example-write-read [--listen PORT | --connect HOST PORT]\n");
    return 2;
  }
  auto ctx = context::open(); // first device
  if (!ctx) {
    std::fprintf(stderr, "no RDMA: %s\n", diagnose().sentence.data());
    return 1;
  }
  auto pd = protection_domain::create(*ctx).value();
  auto cq = completion_queue::create(*ctx).value();
  auto a = queue_pair::create(*ctx, pd, cq, cq).value();
  auto b = queue_pair::create(*ctx, pd, cq, cq).value();

  std::vector<std::byte> local(4096), remote(4096), back(4096);
  for (std::size_t i = 0; i < local.size(); i++)
    local[i] = std::byte(i * 7);
  auto ml = pd.register_memory(local).value();
  auto mb = pd.register_memory(back).value();
  auto mr = pd.register_memory(remote, access::remote_write | access::remote_read).value();

  // Each side sends its endpoint to the other, and the target its region:
  // here through bytes in memory, between nodes over TCP.
  auto eb_blob = b.local_endpoint()->serialize();
  auto region_blob = mr.remote()->serialize();
  auto ea_blob = a.local_endpoint()->serialize();
  int fd = -1;
  if (target || initiator) {
    fd = tcp(initiator ? argv[2] : nullptr, argv[argc - 1]);
    bool ok = fd >= 0 && (target ? xfer(fd, eb_blob.data(), eb_blob.size(), true) &&
                                       xfer(fd, region_blob.data(), region_blob.size(), true) &&
                                       xfer(fd, ea_blob.data(), ea_blob.size(), false)
                                 : xfer(fd, eb_blob.data(), eb_blob.size(), false) &&
                                       xfer(fd, region_blob.data(), region_blob.size(), false) &&
                                       xfer(fd, ea_blob.data(), ea_blob.size(), true));
    if (!ok) {
      std::fprintf(stderr, "no peer on TCP port %s\n", argv[argc - 1]);
      return 1;
    }
  }
  auto ea = endpoint::parse(ea_blob).value();
  auto eb = endpoint::parse(eb_blob).value();
  auto target_region = remote_region::parse(region_blob).value();
  if ((!target && !a.connect(eb)) || (!initiator && !b.connect(ea)))
    return 1;
  if (target) {
    // The initiator writes and reads; it says when it is done, then we look.
    char done = 0, ok = 0;
    if (!xfer(fd, &done, 1, false))
      return 1;
    ok = std::memcmp(local.data(), remote.data(), 4096) == 0;
    xfer(fd, &ok, 1, true);
    std::printf("4096 bytes written into %s by the peer: %s\n", ctx->device_name().data(),
                ok ? "ok" : "MISMATCH");
    return ok ? 0 : 1;
  }

  completion c[1];
  if (!a.post_write(*ml.all(), target_region, 1) || !cq.poll_wait(c, std::chrono::seconds(5)) ||
      !c[0].ok())
    return 1;
  if (!a.post_read(*mb.all(), target_region, 2) || !cq.poll_wait(c, std::chrono::seconds(5)) ||
      !c[0].ok())
    return 1;
  char peer_ok = 1;
  if (initiator && !(xfer(fd, &peer_ok, 1, true) && xfer(fd, &peer_ok, 1, false)))
    peer_ok = 0;
  bool ok = (initiator || std::memcmp(local.data(), remote.data(), 4096) == 0) &&
            std::memcmp(local.data(), back.data(), 4096) == 0 && peer_ok;
  std::printf("write + read of 4096 bytes on %s: %s\n", ctx->device_name().data(),
              ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}

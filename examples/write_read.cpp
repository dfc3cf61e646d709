// SPDX-License-Identifier: MIT
// One-sided RDMA: write a buffer into a peer's memory, read it back.
// The two queue pairs live in one process here; between machines, send the
// serialised endpoint and remote_region over any channel (a TCP socket...).
#include <cstdio>
#include <cstring>
#include <vector>

#include <rdmadl/rdmadl.hpp>

int main() {
  using namespace rdmadl;
  auto ctx = context::open(); // first device
  if (!ctx) {
    std::fprintf(stderr, "no RDMA: %s (%s)\n", ctx.error().message().c_str(), reason().data());
    return 1;
  }
  auto pd = protection_domain::create(*ctx).value();
  auto cq = completion_queue::create(*ctx).value();
  auto a = queue_pair::create(*ctx, pd, cq, cq).value();
  auto b = queue_pair::create(*ctx, pd, cq, cq).value();
  // Each side sends its endpoint to the other (here: through bytes in memory).
  auto ea = endpoint::parse(a.local_endpoint()->serialize()).value();
  auto eb = endpoint::parse(b.local_endpoint()->serialize()).value();
  if (!a.connect(eb) || !b.connect(ea))
    return 1;

  std::vector<std::byte> local(4096), remote(4096), back(4096);
  for (std::size_t i = 0; i < local.size(); i++)
    local[i] = std::byte(i * 7);
  auto ml = pd.register_memory(local).value();
  auto mb = pd.register_memory(back).value();
  auto mr = pd.register_memory(remote, access::remote_write | access::remote_read).value();
  auto target = remote_region::parse(mr.remote()->serialize()).value(); // what b would send to a

  completion c[1];
  if (!a.post_write(*ml.all(), target, 1) || !cq.poll_wait(c, std::chrono::seconds(5)) ||
      !c[0].ok())
    return 1;
  if (!a.post_read(*mb.all(), target, 2) || !cq.poll_wait(c, std::chrono::seconds(5)) || !c[0].ok())
    return 1;
  bool ok = std::memcmp(local.data(), remote.data(), 4096) == 0 &&
            std::memcmp(local.data(), back.data(), 4096) == 0;
  std::printf("write + read of 4096 bytes on %s: %s\n", ctx->device_name().data(),
              ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}

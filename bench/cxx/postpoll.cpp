// SPDX-License-Identifier: MIT
// rdmadl-bench-postpoll-cxx ITERS: ITERS x (RDMA write of 8 bytes +
// poll) on a loopback RC pair, through the C++ API. Run under callgrind with
// two ITERS values; the difference divided by the ITERS difference is the
// instruction count per post+poll (setup cancels out).
#include <cstdlib>
#include <unistd.h>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;

int main(int argc, char **argv) {
  alarm(250);
  long iters = argc > 1 ? std::atol(argv[1]) : 1000;
  const char *d = std::getenv("RDMADL_TEST_DEVICE");
  auto ctx = context::open(d ? d : "").value();
  auto pd = protection_domain::create(ctx).value();
  auto cq = completion_queue::create(ctx).value();
  qp_options o;
  o.max_inline = 64;
  auto a = queue_pair::create(ctx, pd, cq, cq, o).value();
  auto b = queue_pair::create(ctx, pd, cq, cq, o).value();
  a.connect(b.local_endpoint().value()).value();
  b.connect(a.local_endpoint().value()).value();
  static std::byte buf[64];
  auto mr = pd.register_memory(buf, access::remote_write).value();
  auto s = mr.slice(0, 8).value();
  auto dst = mr.remote(8, 8).value();
  completion c[1];
  for (long i = 0; i < iters; i++) {
    a.post_write(s, dst, 1, send_flags::signaled).value();
    for (;;) {
      auto n = cq.poll(c).value();
      if (n) {
        if (!c[0].ok())
          return 1;
        break;
      }
    }
  }
  return 0;
}

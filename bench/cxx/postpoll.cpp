// SPDX-License-Identifier: MIT
// rdmadl-bench-postpoll-cxx ITERS [post|prepared]: ITERS x (signaled RDMA
// write of 8 bytes, then poll one completion until it arrives) on a loopback
// RC pair, through the C++ API: post_write() each time ("post", the
// default), or one send_request built before the loop and post()ed again
// ("prepared"). Run under callgrind with two ITERS values; the difference
// divided by the ITERS difference is the instruction count per post+poll
// (setup cancels out). Prints "iters N polls M" (M - N polls found the queue
// empty: busy-wait that depends on the kernel, not on the API).
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <unistd.h>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;

int main(int argc, char **argv) {
  alarm(250); // default action: killed, the runner reports it
  long iters = argc > 1 ? std::atol(argv[1]) : 1000;
  bool prepared = argc > 2 && std::string_view(argv[2]) == "prepared";
  const char *d = std::getenv("RDMADL_TEST_DEVICE");
  const char *g = std::getenv("RDMADL_TEST_GID_INDEX");
  auto ctx = context::open(d ? d : "").value();
  auto pd = protection_domain::create(ctx).value();
  auto cq = completion_queue::create(ctx).value();
  qp_options o;
  o.max_inline = 64; // as the C loop's max_inline_data; writes are not sent inline
  if (g)
    o.gid_index = std::atoi(g);
  auto a = queue_pair::create(ctx, pd, cq, cq, o).value();
  auto b = queue_pair::create(ctx, pd, cq, cq, o).value();
  a.connect(b.local_endpoint().value()).value();
  b.connect(a.local_endpoint().value()).value();
  static std::byte buf[64];
  auto mr = pd.register_memory(buf, access::remote_write).value();
  auto s = mr.slice(0, 8).value();
  auto dst = mr.remote(8, 8).value();
  completion c[1];
  long polls = 0;
  auto req = send_request::write(s, dst, 1, send_flags::signaled);
  for (long i = 0; i < iters; i++) {
    if (prepared)
      a.post(req).value();
    else
      a.post_write(s, dst, 1, send_flags::signaled).value();
    for (;;) {
      polls++;
      auto n = cq.poll(c).value();
      if (n) {
        if (!c[0].ok()) {
          std::fprintf(stderr, "rdmadl-bench-postpoll-cxx: completion failed: %s\n",
                       c[0].error().message().c_str());
          return 1;
        }
        break;
      }
    }
  }
  std::printf("iters %ld polls %ld\n", iters, polls);
  return 0;
}

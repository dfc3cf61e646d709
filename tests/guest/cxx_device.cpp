// SPDX-License-Identifier: MIT
// cxx_device: the C++ API against a real device (the Soft-RoCE VM tier).
// Every check moves real data and compares it byte for byte, and prints
// "RDMADL-CHECK cxx-<name> PASS|FAIL". Exit status 1 if any failed. The
// checks live in cxx_device_verbs.cpp, cxx_device_cm.cpp and
// cxx_device_multi_channel.cpp; this file holds main and the shared helpers.
//
//   cxx_device            all checks on $RDMADL_TEST_DEVICE
//   cxx_device CHECK      that check only
//   cxx_device --absent   no stack: every entry point fails cleanly
//
// Environment: RDMADL_TEST_DEVICE (default: first device), RDMADL_TEST_IP
// (the rxe netdev's IPv4 address, for GID selection and rdma_cm),
// RDMADL_TEST_GID_INDEX (the index the VM found for it).
#include "cxx_device.hpp"

#include <arpa/inet.h>
#include <cstdlib>
#include <cstring>

namespace cxx_device {

int failures = 0;
bool plain_cqs = false;
std::string dev_name;
std::uint32_t test_ip = 0;

void report(const char *name, bool ok) {
  std::printf("RDMADL-CHECK cxx-%s %s\n", name, ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  if (!ok)
    failures++;
}

void fill(std::span<std::byte> b, unsigned seed) {
  for (std::size_t i = 0; i < b.size(); i++)
    b[i] = static_cast<std::byte>((i * 131 + seed * 7 + 3) & 0xff);
}
bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// Waits for one completion and checks it succeeded.
qp_options test_qp_options() {
  qp_options o;
  o.gid.ipv4 = test_ip;
  return o;
}

result<completion> one(completion_queue &cq, std::chrono::milliseconds t) {
  std::array<completion, 1> c;
  auto r = cq.poll_wait(c, t);
  if (!r)
    return r.error();
  if (!c[0].ok()) {
    std::fprintf(stderr, "  completion wr_id %llu: %s (vendor_err %u)\n",
                 static_cast<unsigned long long>(c[0].wr_id), c[0].error().message().c_str(),
                 c[0].vendor_err);
    return c[0].error();
  }
  return c[0];
}

std::string cm_host() {
  return test_ip ? inet_ntoa(in_addr{test_ip}) : "127.0.0.1";
}

namespace {
// Moves the values of x and y into a and b; the first error if either failed.
template <class T> std::error_code take_both(result<T> &&x, result<T> &&y, T &a, T &b) {
  if (!x)
    return x.error();
  if (!y)
    return y.error();
  a = std::move(*x);
  b = std::move(*y);
  return {};
}
} // namespace

result<loop> make_loop(qp_type type, qp_options base, const completion_channel *ch,
                       const shared_receive_queue *srq_b, loop *reuse) {
  loop l;
  if (reuse) {
    l.ctx = std::move(reuse->ctx);
    l.pd = std::move(reuse->pd);
  } else {
    auto ctx = context::open(dev_name);
    if (!ctx)
      return ctx.error();
    l.ctx = std::move(*ctx);
    auto pd = protection_domain::create(l.ctx);
    if (!pd)
      return pd.error();
    l.pd = std::move(*pd);
  }
  cq_options co;
  co.depth = 64;
  co.extended = !plain_cqs;
  auto ca = completion_queue::create(l.ctx, co);
  co.channel = ch;
  if (auto ec = take_both(std::move(ca), completion_queue::create(l.ctx, co), l.cq_a, l.cq_b))
    return ec;
  base.type = type;
  base.gid.ipv4 = test_ip;
  auto qa = queue_pair::create(l.ctx, l.pd, l.cq_a, l.cq_a, base);
  base.srq = srq_b;
  if (auto ec =
          take_both(std::move(qa), queue_pair::create(l.ctx, l.pd, l.cq_b, l.cq_b, base), l.a, l.b))
    return ec;
  // Exchange endpoints through their serialised form, as peers would.
  auto ea = l.a.local_endpoint(), eb = l.b.local_endpoint();
  if (!ea || !eb)
    return errc::empty_object;
  auto pa = endpoint::parse(ea->serialize()), pb = endpoint::parse(eb->serialize());
  if (!pa || !pb)
    return errc::bad_size;
  if (auto r = l.a.connect(*pb); !r)
    return r.error();
  if (auto r = l.b.connect(*pa); !r)
    return r.error();
  return l;
}

result<channel_loop> make_channel_loop() {
  auto ctx = context::open(dev_name);
  if (!ctx)
    return ctx.error();
  auto ch = completion_channel::create(*ctx);
  if (!ch)
    return ch.error();
  auto pd = protection_domain::create(*ctx);
  if (!pd)
    return pd.error();
  loop seed{std::move(*ctx), std::move(*pd), {}, {}, {}, {}};
  auto l = make_loop(qp_type::rc, {}, &*ch, nullptr, &seed);
  if (!l)
    return l.error();
  return channel_loop{std::move(*ch), std::move(*l)};
}

namespace {

// --absent: the library or kernel is missing; everything fails cleanly.
int absent_main() {
  report("absent-available", !available());
  auto l = device_list::get();
  report("absent-device-list", !l && l.error() == std::errc::operation_not_supported);
  auto c = context::open();
  report("absent-context", !c && c.error() == std::errc::operation_not_supported);
  auto e = event_channel::create();
  report("absent-event-channel", !e && e.error() == std::errc::operation_not_supported);
  auto k = connect("127.0.0.1", 1);
  report("absent-cm-connect", !k && k.error() == std::errc::operation_not_supported);
  cm_channel_options co;
  co.connect = {{"127.0.0.1", 1}};
  auto mc = multi_channel::create_cm(nullptr, co);
  report("absent-cm-multi-channel", !mc && mc.error() == std::errc::operation_not_supported);
  return failures ? 1 : 0;
}

} // namespace
} // namespace cxx_device

using namespace cxx_device;

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--absent") == 0)
    return absent_main();
  if (const char *d = std::getenv("RDMADL_TEST_DEVICE"))
    dev_name = d;
  if (const char *ip = std::getenv("RDMADL_TEST_IP")) {
    in_addr a{};
    if (inet_pton(AF_INET, ip, &a) == 1)
      test_ip = a.s_addr;
  }
  const char *only = argc > 1 ? argv[1] : nullptr;
  if (argc > 2)
    churn_cycles = std::atoi(argv[2]);
  struct {
    const char *name;
    bool (*fn)();
  } checks[] = {
      {"peer-exit", check_peer_exit},   // first: forks before this process opens a device
      {"peer-death", check_peer_death}, // forks too
      {"probe", check_probe},
      {"device", check_device},
      {"gid-select", check_gid_select},
      {"memory-bounds", check_memory_bounds},
      {"rc-send-recv", [] { return check_send_recv(qp_type::rc); }},
      {"uc-send-recv", [] { return check_send_recv(qp_type::uc); }},
      {"send-imm", [] { return check_imm(false); }},
      {"write-imm", [] { return check_imm(true); }},
      {"write-read", check_write_read},
      {"dmabuf", check_dmabuf},
      {"atomics", check_atomics},
      {"ud-send-recv", check_ud},
      {"srq", check_srq},
      {"batch-poll", check_batch_poll},
      {"comp-channel", check_comp_channel},
      {"send-batch", [] { return check_send_batch(true); }},
      {"send-batch-chained", [] { return check_send_batch(false); }},
      {"endpoint", check_endpoint_errors},
      {"peer-mismatch", check_peer_mismatch},
      {"lifetimes", check_lifetimes},
      {"batch-guard", check_batch_guard},
      {"prepared", check_prepared},
      {"poll-session", check_poll_session},
      {"waits-saturate", check_waits_saturate},
      {"multi-channel", check_multi_channel},
      {"mixed-posts", check_mixed_posts},
      {"cm-connect", check_cm},
      {"cm-reject", check_cm_reject},
      {"cm-ack-timeout", check_cm_ack_timeout},
      {"cm-multi-channel", check_cm_multi_channel},
      {"cm-accept-deadline", check_cm_accept_deadline},
      {"cm-mesh", check_cm_mesh},
      {"churn-verbs", check_churn_verbs},
      {"churn-cm", check_churn_cm},
      {"churn-cm-channel", check_churn_cm_channel},
      {"churn-channel", check_churn_channel},
      {"churn-multi-channel", check_churn_multi_channel},
      {"exhaustion", check_exhaustion},     // its own process only: drops CAP_IPC_LOCK
      {"async-events", check_async_events}, // last: it takes the port down
  };
  for (auto &c : checks) {
    if (only && std::strcmp(only, c.name) != 0)
      continue;
    std::fprintf(stderr, "cxx-%s\n", c.name);
    report(c.name, c.fn());
  }
  return failures ? 1 : 0;
}

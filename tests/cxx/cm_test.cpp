// SPDX-License-Identifier: MIT
// rdma_cm without a reachable peer: what connect() and listener::bind()
// refuse before any RDMA call, the detail their failures leave, and what a
// peer's event means (connections over Soft-RoCE: the VM tier's cxx.cm.*).
#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <string_view>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {
bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
} // namespace

TEST_CASE("cm: options rdma_cm decides itself are refused before any RDMA call") {
  cm_options port;
  port.qp.port = 1;
  cm_options mtu;
  mtu.transport.mtu = 1024;
  cm_options rnr;
  rnr.transport.min_rnr_timer = 3;
  for (const cm_options *o : {&port, &mtu, &rnr}) {
    auto r = connect("127.0.0.1", 7471, *o);
    REQUIRE_FALSE(r);
    CHECK(r.error() == errc::not_honoured);
    INFO(last_error_detail());
    CHECK(starts_with(last_error_detail(), "rdmadl::connect to 127.0.0.1:7471: options: "));
  }
  cm_options uc;
  uc.qp.type = qp_type::uc;
  CHECK(connect("127.0.0.1", 7471, uc).error() == errc::wrong_qp_type);
  // The other transport settings are rdma_cm's to apply.
  cm_options fine;
  fine.transport.ack_timeout = 18;
  fine.transport.retry_count = 4;
  fine.transport.rnr_retry = 3;
  fine.transport.max_rd_atomic = 1;
  fine.step_timeout = 200ms;
  auto r = connect("127.0.0.1", 7471, fine); // nobody listens, or no RDMA here
  REQUIRE_FALSE(r);
  CHECK(r.error() != errc::not_honoured);
}

TEST_CASE("cm: a failed connect or bind names the call, host, port and step") {
  cm_options o;
  o.step_timeout = 200ms;
  auto c = connect("127.0.0.1", 7471, o); // nobody listens, or no RDMA here
  REQUIRE_FALSE(c);
  INFO(last_error_detail());
  CHECK(starts_with(last_error_detail(), "rdmadl::connect to 127.0.0.1:7471: "));
  CHECK(last_error_detail().find(c.error().message()) != std::string_view::npos);

  auto bad = connect("no-such-host.invalid", 7471, o);
  REQUIRE_FALSE(bad);
  if (stack() == stack_state::ready) {
    CHECK(bad.error() == std::errc::address_not_available);
    CHECK(starts_with(last_error_detail(),
                      "rdmadl::connect to no-such-host.invalid:7471: resolve the host name: "));
  } else {
    CHECK(bad.error() == std::errc::operation_not_supported);
    CHECK(starts_with(last_error_detail(), "rdmadl::connect to no-such-host.invalid:7471: "));
  }

  if (stack() != stack_state::ready) {
    auto l = listener::bind("", 7471);
    REQUIRE_FALSE(l);
    CHECK(l.error() == std::errc::operation_not_supported);
    CHECK(starts_with(last_error_detail(), "rdmadl::listener::bind on *:7471: "));
  }
  auto l = listener::bind("no-such-host.invalid", 0);
  REQUIRE_FALSE(l);
  CHECK(starts_with(last_error_detail(), "rdmadl::listener::bind on no-such-host.invalid:0: "));
}

TEST_CASE("cm: cm_peer_event::error() reads the status") {
  cm_peer_event e;
  e.kind = cm_event_kind::disconnected;
  CHECK_FALSE(e.error()); // a disconnect is news, not an error
  e.kind = cm_event_kind::connection_error;
  e.status = -ETIMEDOUT;
  CHECK(e.error() == std::errc::timed_out);
  CHECK(e.error().category() == std::generic_category());
  e.status = 0;
  CHECK(e.error() == std::errc::host_unreachable);
  e.kind = cm_event_kind::other;
  e.status = 28; // a rejection's reason code (IB CM: consumer reject)
  CHECK(e.error() == errc::rejected);
}

TEST_CASE("cm: create_cm without a listener to accept from answers errc::no_listener") {
  cm_channel_options o;
  o.accept = 1;
  auto r = multi_channel::create_cm(nullptr, o);
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::no_listener);
  CHECK(r.error() != errc::empty_object);
  CHECK(r.error() == std::errc::invalid_argument);
  cm_channel_options mtu;
  mtu.connect = {{"127.0.0.1", 7471}};
  mtu.channel.connect.transport.mtu = 1024;
  CHECK(multi_channel::create_cm(nullptr, mtu).error() == errc::not_honoured);
}

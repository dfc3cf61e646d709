// SPDX-License-Identifier: MIT
// Channels without a device: the error contract and endpoint lists (the
// out-of-band exchange: oob_test.cpp).
#include <doctest/doctest.h>

#include <array>
#include <chrono>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {
template <class T> void not_supported(const result<T> &r, const char *what) {
  INFO(what);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error() == std::errc::operation_not_supported);
}
#define NOT_SUPPORTED(expr) not_supported((expr), #expr)

endpoint sample(std::uint32_t i) {
  endpoint e;
  e.qpn = 0x100 + i;
  e.psn = 0xabcde + i;
  e.lid = static_cast<std::uint16_t>(i);
  e.gid_value.raw[10] = e.gid_value.raw[11] = 0xff;
  e.gid_value.raw[15] = static_cast<std::uint8_t>(i);
  e.qkey = 0x11111111;
  e.mtu = 1024;
  return e;
}
} // namespace

TEST_CASE("multi_channel: without RDMA every call fails with operation_not_supported") {
  if (stack() == stack_state::ready)
    return; // a host with a device: covered by the Soft-RoCE tier
  context none;
  NOT_SUPPORTED(multi_channel::create(none));
  NOT_SUPPORTED(channel::create(none));
  NOT_SUPPORTED(context::open());
  multi_channel mc;
  CHECK(mc.peers() == 0);
  CHECK_FALSE(mc.connected());
  NOT_SUPPORTED(mc.local_endpoint(0));
  CHECK(mc.local_endpoints().empty());
  NOT_SUPPORTED(mc.handshake({}));
  std::array<std::byte, 8> buf{};
  local_slice s{reinterpret_cast<std::uint64_t>(buf.data()), 8, 0};
  remote_region r{0x1000, 1, 8};
  NOT_SUPPORTED(mc.send(0, s, 10ms));
  NOT_SUPPORTED(mc.receive(0, s, 10ms));
  NOT_SUPPORTED(mc.write(0, s, r, 10ms));
  NOT_SUPPORTED(mc.read(0, s, r, 10ms));
  std::size_t peers[] = {0, 1};
  NOT_SUPPORTED(mc.multicast_send(peers, s, 10ms));
  {
    auto sc = mc.scope();
    NOT_SUPPORTED(sc.post_send(0, s));
    NOT_SUPPORTED(sc.post_recv(0, s));
    NOT_SUPPORTED(sc.wait(work_handle{1}, 10ms));
    NOT_SUPPORTED(sc.wait_all(10ms));
    CHECK(sc.pending() == 0);
  }
  channel c;
  NOT_SUPPORTED(c.local_endpoint());
  NOT_SUPPORTED(c.send(s, 10ms));
}

TEST_CASE("multi_channel: endpoint lists round-trip and malformed ones are refused") {
  for (std::uint32_t n : {0u, 1u, 3u}) {
    std::vector<endpoint> list;
    for (std::uint32_t i = 0; i < n; i++)
      list.push_back(sample(i));
    auto blob = serialize_endpoints(list);
    CHECK(blob.size() == 12 + n * endpoint::serialized_size);
    auto back = parse_endpoints(blob);
    REQUIRE(back);
    CHECK(*back == list);
    CHECK(serialize_endpoints(*back) == blob);
  }
  std::vector<endpoint> three{sample(0), sample(1), sample(2)};
  auto blob = serialize_endpoints(three);
  CHECK(parse_endpoints(std::span(blob).first(11)).error() == errc::bad_size);
  CHECK(parse_endpoints(std::span(blob).first(blob.size() - 1)).error() == errc::bad_size);
  auto longer = blob;
  longer.push_back(std::byte{0});
  CHECK(parse_endpoints(longer).error() == errc::bad_size);
  auto more = blob; // count says 4, three are there
  more[8] = std::byte{4};
  CHECK(parse_endpoints(more).error() == errc::bad_size);
  auto huge = blob; // a count that would overflow the size computation
  huge[8] = huge[9] = huge[10] = huge[11] = std::byte{0xff};
  CHECK(parse_endpoints(huge).error() == errc::bad_size);
  auto magic = blob;
  magic[0] = std::byte{'X'};
  CHECK(parse_endpoints(magic).error() == errc::bad_magic);
  auto newer = blob;
  newer[4] = std::byte{2};
  CHECK(parse_endpoints(newer).error() == errc::newer_format);
  auto inner = blob; // the second endpoint's own magic
  inner[12 + endpoint::serialized_size] = std::byte{'X'};
  CHECK(parse_endpoints(inner).error() == errc::bad_magic);
  for (auto *b : {&more, &magic, &newer, &inner})
    CHECK(parse_endpoints(*b).error() == std::errc::invalid_argument);
}

TEST_CASE(
    "multi_channel over rdma_cm: without RDMA every call fails with operation_not_supported") {
  if (stack() == stack_state::ready)
    return; // a host with a device: covered by the Soft-RoCE tier
  cm_channel_options o;
  o.connect = {{"127.0.0.1", 7471}};
  NOT_SUPPORTED(multi_channel::create_cm(nullptr, o));
  NOT_SUPPORTED(channel::create_cm(nullptr, o));
  NOT_SUPPORTED(listener::bind("127.0.0.1", 0));
  listener none; // what a failed bind leaves
  o.accept = 2;
  NOT_SUPPORTED(multi_channel::create_cm(&none, o));
  cm_channel_options only_accept;
  only_accept.accept = 1;
  NOT_SUPPORTED(channel::create_cm(&none, only_accept));
  multi_channel mc;
  CHECK(mc.cm_fd() == -1);
  CHECK_FALSE(mc.cm_connected(0));
  NOT_SUPPORTED(mc.next_cm_event());
  NOT_SUPPORTED(mc.next_cm_event(10ms));
}

TEST_CASE("multi_channel over rdma_cm: bad arguments get their documented error first") {
  // Checked before any RDMA call: the same answers with or without a stack.
  cm_channel_options o;
  CHECK(multi_channel::create_cm(nullptr, o).error() == errc::out_of_range); // no peer
  CHECK(channel::create_cm(nullptr, o).error() == errc::out_of_range);
  o.connect = {{"127.0.0.1", 7471}, {"127.0.0.1", 7472}};
  CHECK(channel::create_cm(nullptr, o).error() == errc::out_of_range); // two peers
  o.accept = 1;
  CHECK(multi_channel::create_cm(nullptr, o).error() == errc::no_listener); // no listener
  o.accept = 2;
  o.first_rank = UINT32_MAX; // ranks past 2^32
  CHECK(multi_channel::create_cm(nullptr, o).error() == errc::out_of_range);
  o.accept = 0;
  o.first_rank = 0;
  for (const cm_address &bad :
       {cm_address{"", 7471}, cm_address{"127.0.0.1", 0}, cm_address{"not an address", 7471}}) {
    INFO(bad.host << ":" << bad.port);
    cm_channel_options b;
    b.connect = {{"127.0.0.1", 7471}, bad};
    CHECK(multi_channel::create_cm(nullptr, b).error() == std::errc::address_not_available);
  }
  cm_channel_options pinned;
  pinned.connect = {{"127.0.0.1", 7471}};
  pinned.channel.port = 1;
  CHECK(multi_channel::create_cm(nullptr, pinned).error() == errc::not_honoured);
  pinned.channel.port = 0;
  pinned.channel.gid.ipv4 = 0x0100007f;
  CHECK(multi_channel::create_cm(nullptr, pinned).error() == errc::not_honoured);
  pinned.channel.gid = {};
  pinned.channel.connect.transport.min_rnr_timer = 3; // the kernel's to choose
  CHECK(multi_channel::create_cm(nullptr, pinned).error() == errc::not_honoured);
  // The new conditions compare equal to their std::errc.
  CHECK(make_error_code(errc::rank_refused) == std::errc::connection_refused);
  CHECK(make_error_code(errc::wrong_device) == std::errc::no_such_device);
}

TEST_CASE("cm_mesh: node k connects to the nodes before it and accepts the ones after") {
  std::vector<cm_address> nodes{{"10.0.0.1", 1}, {"10.0.0.2", 2}, {"10.0.0.3", 3}, {"h4", 4}};
  cm_channel_options base;
  base.step_timeout = 1234ms;
  for (std::size_t k = 0; k < nodes.size(); k++) {
    INFO("node " << k);
    auto o = cm_mesh(k, nodes, base);
    REQUIRE(o);
    CHECK(o->rank == k);
    REQUIRE(o->connect.size() == k);
    for (std::size_t j = 0; j < k; j++)
      CHECK((o->connect[j].host == nodes[j].host && o->connect[j].port == nodes[j].port));
    CHECK(o->accept == nodes.size() - 1 - k);
    CHECK(o->first_rank == k + 1);
    CHECK(o->step_timeout == 1234ms);
    // Node j > k arrives with rank j and becomes peer k + (j - (k + 1)) = j - 1.
    for (std::size_t j = k + 1; j < nodes.size(); j++)
      CHECK(o->connect.size() + (j - o->first_rank) == j - 1);
  }
  CHECK(cm_mesh(4, nodes).error() == errc::out_of_range);
  CHECK(cm_mesh(0, {}).error() == errc::out_of_range);
  auto single = cm_mesh(0, std::span(nodes).first(1));
  REQUIRE(single); // one node: no peer, so create_cm refuses it
  CHECK(multi_channel::create_cm(nullptr, *single).error() == errc::out_of_range);
}

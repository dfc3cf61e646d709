// SPDX-License-Identifier: MIT
// Serialised endpoints and remote regions: round trips and clear errors for
// malformed blobs. Needs no stack.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;

namespace {
endpoint sample_endpoint() {
  endpoint e;
  e.qpn = 0x123456;
  e.psn = 0xabcdef;
  e.lid = 0x1234;
  for (int i = 0; i < 16; i++)
    e.gid_value.raw[i] = static_cast<std::uint8_t>(0xf0 + i);
  e.qkey = 0x11111111;
  e.mtu = 1024;
  return e;
}
endpoint ok_parse(std::span<const std::byte> b) {
  auto r = endpoint::parse(b);
  REQUIRE(r);
  return *r;
}
} // namespace

TEST_CASE("serial: an endpoint round-trips byte for byte, GID included") {
  auto e = sample_endpoint();
  auto blob = e.serialize();
  CHECK(blob.size() == endpoint::serialized_size);
  CHECK(static_cast<char>(blob[0]) == 'R');
  CHECK(static_cast<std::uint8_t>(blob[4]) == endpoint::format_version);
  auto back = endpoint::parse(blob);
  REQUIRE(back);
  CHECK(*back == e);
  CHECK(back->gid_value.raw[15] == 0xff);
}

TEST_CASE("serial: an endpoint blob of the wrong size is rejected") {
  auto blob = sample_endpoint().serialize();
  std::vector<std::byte> longer(blob.begin(), blob.end());
  longer.push_back(std::byte{0});
  for (std::span<const std::byte> s :
       {std::span<const std::byte>(blob).first(endpoint::serialized_size - 1),
        std::span<const std::byte>(blob).first(3), std::span<const std::byte>(),
        std::span<const std::byte>(longer)}) {
    auto r = endpoint::parse(s);
    REQUIRE_FALSE(r);
    CHECK(r.error() == errc::bad_size);
    CHECK(r.error() == std::errc::invalid_argument);
  }
}

TEST_CASE("serial: an endpoint from a newer format version is rejected as such") {
  auto blob = sample_endpoint().serialize();
  blob[4] = std::byte{endpoint::format_version + 1};
  auto r = endpoint::parse(blob);
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::newer_format);
  CHECK(r.error().message().find("newer format") != std::string::npos);
  // A newer version may be longer: the version is reported, not the size.
  std::vector<std::byte> v2(blob.begin(), blob.end());
  v2.resize(64);
  CHECK(endpoint::parse(v2).error() == errc::newer_format);
}

TEST_CASE("serial: a remote_region blob is not an endpoint and vice versa") {
  remote_region rr{0x7f0000001000, 0xdeadbeef, 4096};
  auto rb = rr.serialize();
  auto eb = sample_endpoint().serialize();
  CHECK(endpoint::parse(rb).error() == errc::bad_magic);
  CHECK(remote_region::parse(eb).error() == errc::bad_magic);
  auto zero = rb;
  zero[4] = std::byte{0};
  CHECK(remote_region::parse(zero).error() == errc::bad_magic);
}

TEST_CASE("serial: a remote_region round-trips and malformed blobs give clear errors") {
  remote_region rr{0x7f0000001000, 0xdeadbeef, 4096};
  auto blob = rr.serialize();
  CHECK(blob.size() == remote_region::serialized_size);
  auto back = remote_region::parse(blob);
  REQUIRE(back);
  CHECK(*back == rr);
  CHECK(remote_region::parse(std::span<const std::byte>(blob).first(20)).error() == errc::bad_size);
  auto newer = blob;
  newer[4] = std::byte{2};
  CHECK(remote_region::parse(newer).error() == errc::newer_format);
}

TEST_CASE("serial: remote_region slices are bounds-checked") {
  remote_region rr{0x1000, 7, 100};
  auto s = rr.slice(10, 20);
  REQUIRE(s);
  CHECK(s->addr == 0x100a);
  CHECK(s->length == 20);
  CHECK(s->rkey == 7);
  CHECK(rr.slice(0, 100));
  CHECK(rr.slice(90, 11).error() == errc::out_of_range);
  CHECK(rr.slice(101, 1).error() == errc::out_of_range);
  CHECK(rr.slice(0, 0).error() == errc::empty_span);
  CHECK(rr.slice(50, UINT64_MAX).error() == errc::out_of_range);
  CHECK(rr.slice(UINT64_MAX, 2).error() == std::errc::invalid_argument);
}

TEST_CASE("serial: GID helpers recognise IPv4-mapped addresses") {
  gid g;
  CHECK(g.is_zero());
  g.raw[10] = g.raw[11] = 0xff;
  g.raw[12] = 192;
  g.raw[13] = 0;
  g.raw[14] = 2;
  g.raw[15] = 1;
  CHECK(g.is_ipv4_mapped());
  std::array<std::uint8_t, 4> ip{192, 0, 2, 1};
  std::uint32_t v;
  std::memcpy(&v, ip.data(), 4);
  CHECK(g.ipv4() == v);
  CHECK(g.to_string() == "0000:0000:0000:0000:0000:ffff:c000:0201");
}

namespace {
// Parses B as T; when accepted, serialize() must give B back byte for byte.
// Returns whether B was accepted.
template <class T> bool accepted_round_trips(std::span<const std::byte> b) {
  auto r = T::parse(b);
  if (!r) {
    CHECK(r.error() == std::errc::invalid_argument);
    return false;
  }
  auto again = r->serialize();
  CHECK(std::equal(again.begin(), again.end(), b.begin(), b.end()));
  return true;
}

// Every blob that differs from a valid one in one byte: accepted exactly when
// the byte is not one serialize() fixes, and then it round-trips.
template <class T> void single_byte_changes(const T &value, std::initializer_list<int> fixed) {
  const auto good = value.serialize();
  REQUIRE(accepted_round_trips<T>(good));
  for (std::size_t i = 0; i < good.size(); i++)
    for (int v : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
      auto b = good;
      b[i] = static_cast<std::byte>(v);
      bool changed = b != good;
      bool must_refuse =
          changed && std::find(fixed.begin(), fixed.end(), static_cast<int>(i)) != fixed.end();
      CAPTURE(i);
      CAPTURE(v);
      bool ok = accepted_round_trips<T>(b);
      if (must_refuse)
        CHECK_FALSE(ok);
    }
}
} // namespace

TEST_CASE("serial: reserved bytes must be zero") {
  auto eb = sample_endpoint().serialize();
  for (std::size_t i : {5u, 6u, 7u, 19u}) {
    auto b = eb;
    b[i] = std::byte{1};
    CAPTURE(i);
    auto r = endpoint::parse(b);
    REQUIRE_FALSE(r);
    CHECK(r.error() == std::errc::invalid_argument);
    CHECK(r.error() == errc::bad_blob);
  }
  auto rb = remote_region{0x1000, 1, 2}.serialize();
  for (std::size_t i : {5u, 6u, 7u}) {
    auto b = rb;
    b[i] = std::byte{0x80};
    CHECK(remote_region::parse(b).error() == errc::bad_blob);
  }
}

TEST_CASE("serial: an endpoint says its GID type in byte 18; 0 is not said") {
  auto e = sample_endpoint();
  CHECK(e.serialize()[18] == std::byte{0});
  CHECK_FALSE(ok_parse(e.serialize()).gid_kind);
  for (gid_type t : {gid_type::ib, gid_type::roce_v1, gid_type::roce_v2}) {
    e.gid_kind = t;
    auto b = e.serialize();
    CHECK(b[18] == static_cast<std::byte>(static_cast<int>(t) + 1));
    CHECK(ok_parse(b) == e);
  }
  auto b = e.serialize();
  b[18] = std::byte{4}; // no such type
  CHECK(endpoint::parse(b).error() == errc::bad_blob);
}

TEST_CASE("serial: QPN and PSN are 24-bit; serialize writes only those bits") {
  auto e = sample_endpoint();
  e.qpn = 0xffffff;
  e.psn = 0xffffff;
  auto ok = endpoint::parse(e.serialize());
  REQUIRE(ok);
  CHECK(*ok == e);
  for (int field : {8, 12}) {
    auto b = e.serialize();
    b[static_cast<std::size_t>(field) + 3] = std::byte{1}; // bit 24
    auto r = endpoint::parse(b);
    REQUIRE_FALSE(r);
    CHECK(r.error() == errc::bad_blob);
    CHECK(r.error() == std::errc::invalid_argument);
  }
  e.qpn = 0x1abcdef;
  e.psn = 0xff000001;
  auto back = endpoint::parse(e.serialize());
  REQUIRE(back);
  CHECK(back->qpn == 0xabcdef);
  CHECK(back->psn == 1);
}

TEST_CASE("serial: a remote region whose addr + length wraps is refused") {
  remote_region top{UINT64_MAX - 99, 5, 99}; // ends exactly at 2^64 - 1
  auto ok = remote_region::parse(top.serialize());
  REQUIRE(ok);
  CHECK(*ok == top);
  auto b = top.serialize();
  b[20] = std::byte{100}; // length 100: one past the end of the address space
  auto r = remote_region::parse(b);
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::bad_blob);
  CHECK(r.error() == std::errc::invalid_argument);
  // serialize() never writes such a blob: the length is cut at the end.
  remote_region wraps{UINT64_MAX - 9, 5, 4096};
  auto cut = remote_region::parse(wraps.serialize());
  REQUIRE(cut);
  CHECK(cut->addr == wraps.addr);
  CHECK(cut->length == 9);
  CHECK(remote_region::parse(remote_region{0, 1, UINT64_MAX}.serialize()));
  CHECK(remote_region::parse(remote_region{}.serialize()));
}

TEST_CASE("serial: every accepted blob round-trips byte for byte") {
  // One byte changed anywhere: the header bytes and the reserved bytes must
  // be refused; whatever is accepted serialises back to the same bytes.
  single_byte_changes(sample_endpoint(), {0, 1, 2, 3, 4, 5, 6, 7, 11, 15, 19});
  single_byte_changes(remote_region{0x7f0000001000, 0xdeadbeef, 4096}, {0, 1, 2, 3, 4, 5, 6, 7});
  single_byte_changes(remote_region{UINT64_MAX - 4095, 1, 4096}, {0, 1, 2, 3, 4, 5, 6, 7, 27});
  // Random bodies behind a valid header (a fixed seed: the same blobs each run).
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<std::byte>(x);
  };
  int accepted_ep = 0, accepted_rr = 0;
  for (int round = 0; round < 20000; round++) {
    auto eb = sample_endpoint().serialize();
    for (std::size_t i = 8; i < eb.size(); i++)
      eb[i] = next();
    if (round % 2) { // make the constrained fields valid half of the time
      eb[11] = eb[15] = eb[18] = eb[19] = std::byte{0};
    }
    accepted_ep += accepted_round_trips<endpoint>(eb);
    auto rb = remote_region{}.serialize();
    for (std::size_t i = 8; i < rb.size(); i++)
      rb[i] = next();
    accepted_rr += accepted_round_trips<remote_region>(rb);
  }
  // Both outcomes were exercised.
  CHECK(accepted_ep > 1000);
  CHECK(accepted_ep < 20000);
  CHECK(accepted_rr > 1000);
  CHECK(accepted_rr < 20000);
}

namespace {
channel_endpoint sample_channel_endpoint(std::uint8_t caps) {
  channel_endpoint c;
  c.caps = caps;
  if (caps & channel_endpoint::can_tcp) {
    c.family = 4;
    c.port = 0x1234;
    c.address = {127, 0, 0, 1};
  }
  if (caps & channel_endpoint::can_rdma)
    c.rdma = sample_endpoint();
  c.token = 0x0102030405060708ull;
  return c;
}
} // namespace

TEST_CASE("serial: a channel endpoint round-trips for each set of capabilities") {
  for (std::uint8_t caps : {1, 2, 3}) {
    auto c = sample_channel_endpoint(caps);
    auto blob = c.serialize();
    CHECK(blob.size() == channel_endpoint::serialized_size);
    CHECK(static_cast<char>(blob[0]) == 'R');
    CHECK(static_cast<char>(blob[2]) == 'C');
    CHECK(static_cast<std::uint8_t>(blob[8]) == caps);
    CHECK(static_cast<std::uint8_t>(blob[16]) == 0x08); // token, little-endian
    auto back = channel_endpoint::parse(blob);
    REQUIRE(back);
    CHECK(*back == c);
  }
  auto v6 = sample_channel_endpoint(channel_endpoint::can_tcp);
  v6.family = 6;
  v6.address = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  auto back = channel_endpoint::parse(v6.serialize());
  REQUIRE(back);
  CHECK(*back == v6);
}

TEST_CASE("serial: malformed channel endpoints are refused with the field's error") {
  const auto good = sample_channel_endpoint(3).serialize();
  auto with = [&](std::size_t at, std::uint8_t v) {
    auto b = good;
    b[at] = static_cast<std::byte>(v);
    return channel_endpoint::parse(b);
  };
  CHECK(with(0, 'X').error() == errc::bad_magic);
  CHECK(with(4, 2).error() == errc::newer_format);
  CHECK(with(5, 1).error() == errc::bad_blob);     // reserved
  CHECK(with(8, 0).error() == errc::bad_blob);     // no capability
  CHECK(with(8, 7).error() == errc::bad_blob);     // an unknown one
  CHECK(with(9, 5).error() == errc::bad_blob);     // family
  CHECK(with(12, 1).error() == errc::bad_blob);    // reserved
  CHECK(with(30, 1).error() == errc::bad_blob);    // an IPv4 address's unused bytes
  CHECK(with(40, 'X').error() == errc::bad_magic); // the RDMA endpoint's own check
  CHECK(with(4, 2).error() == std::errc::invalid_argument);
  // Port 0 with TCP; a token of 0.
  auto b = good;
  b[10] = b[11] = std::byte{0};
  CHECK(channel_endpoint::parse(b).error() == errc::bad_blob);
  b = good;
  std::fill(b.begin() + 16, b.begin() + 24, std::byte{0});
  CHECK(channel_endpoint::parse(b).error() == errc::bad_blob);
  // Without RDMA, the endpoint bytes must be zero; without TCP, the address.
  auto tcp_only = sample_channel_endpoint(channel_endpoint::can_tcp).serialize();
  tcp_only[50] = std::byte{1};
  CHECK(channel_endpoint::parse(tcp_only).error() == errc::bad_blob);
  auto rdma_only = sample_channel_endpoint(channel_endpoint::can_rdma).serialize();
  rdma_only[24] = std::byte{1};
  CHECK(channel_endpoint::parse(rdma_only).error() == errc::bad_blob);
  // Sizes.
  CHECK(channel_endpoint::parse(std::span(good).first(83)).error() == errc::bad_size);
  std::vector<std::byte> longer(good.begin(), good.end());
  longer.push_back(std::byte{0});
  CHECK(channel_endpoint::parse(longer).error() == errc::bad_size);
}

TEST_CASE("serial: channel endpoint lists round-trip and malformed ones are refused") {
  std::vector<channel_endpoint> list = {sample_channel_endpoint(1), sample_channel_endpoint(2),
                                        sample_channel_endpoint(3)};
  auto blob = serialize_channel_endpoints(list);
  CHECK(blob.size() == 12 + 3 * channel_endpoint::serialized_size);
  auto back = parse_channel_endpoints(blob);
  REQUIRE(back);
  CHECK(*back == list);
  CHECK(parse_channel_endpoints(serialize_channel_endpoints({}))->empty());
  auto cut = blob;
  cut.pop_back();
  CHECK(parse_channel_endpoints(cut).error() == errc::bad_size);
  auto bad = blob;
  bad[12 + channel_endpoint::serialized_size + 8] = std::byte{0}; // entry 1: no caps
  CHECK(parse_channel_endpoints(bad).error() == errc::bad_blob);
  auto other = blob;
  other[3] = std::byte{'E'}; // "RDCE" is one endpoint, not a list
  CHECK(parse_channel_endpoints(other).error() == errc::bad_magic);
  CHECK(parse_endpoints(blob).error() == errc::bad_magic);
}

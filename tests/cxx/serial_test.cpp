// SPDX-License-Identifier: MIT
// Serialised endpoints and remote regions: round trips and clear errors for
// malformed blobs. Needs no stack.
#include <doctest/doctest.h>

#include <array>
#include <cstring>
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
  CHECK(rr.slice(0, 0).error() == errc::out_of_range);
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

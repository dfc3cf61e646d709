// SPDX-License-Identifier: MIT
// libFuzzer target: rdmadl::channel_endpoint::parse and
// parse_channel_endpoints accept only blobs that serialise back byte for
// byte (fuzz_common.hpp for the single one), and an accepted endpoint's
// capabilities match its fields.
#include <cstring>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  rdmadl::channel_endpoint tcp;
  tcp.caps = rdmadl::channel_endpoint::can_tcp;
  tcp.family = 4;
  tcp.port = 4791;
  tcp.address = {10, 0, 0, 1};
  tcp.token = 42;
  rdmadl::channel_endpoint both = tcp;
  both.caps |= rdmadl::channel_endpoint::can_rdma;
  both.rdma.qpn = 0x123;
  both.rdma.mtu = 1024;
  const rdmadl::channel_endpoint seeds[] = {tcp, both};
  rdmadl_fuzz::write_seeds("chep-", seeds);
  auto list = rdmadl::serialize_channel_endpoints(seeds);
  rdmadl_fuzz::write_seed("chep-list", list.data(), list.size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  if (rdmadl_fuzz::check_round_trip<rdmadl::channel_endpoint>(data, size)) {
    auto e = rdmadl::channel_endpoint::parse(
        std::span<const std::byte>(reinterpret_cast<const std::byte *>(data), size));
    const bool tcp = e->caps & rdmadl::channel_endpoint::can_tcp;
    if (e->token == 0 || (tcp && (e->port == 0 || (e->family != 4 && e->family != 6))) ||
        (!tcp && e->family != 0))
      rdmadl_fuzz::fail("an accepted endpoint's fields do not match its capabilities");
  }
  auto list = rdmadl::parse_channel_endpoints(
      std::span<const std::byte>(reinterpret_cast<const std::byte *>(data), size));
  if (!list) {
    if (list.error() != std::errc::invalid_argument)
      rdmadl_fuzz::fail("a list refused with an error not equal to invalid_argument");
    return 0;
  }
  auto again = rdmadl::serialize_channel_endpoints(*list);
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0)
    rdmadl_fuzz::fail("an accepted list does not serialise back to the same bytes");
  return 0;
}

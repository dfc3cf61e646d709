// SPDX-License-Identifier: MIT
// libFuzzer target: rdmadl::parse_endpoints accepts only blobs that
// serialize_endpoints() gives back byte for byte, and refuses the rest with
// an error equal to invalid_argument.
#include "fuzz_common.hpp"

namespace {
void write_seed(const char *name, std::span<const rdmadl::endpoint> list) {
  auto b = rdmadl::serialize_endpoints(list);
  rdmadl_fuzz::write_seed(name, b.data(), b.size());
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  rdmadl::endpoint a, b;
  b.qpn = 0xabcdef;
  b.psn = 1;
  b.qkey = 0x11111111;
  b.gid_value.raw[0] = 0xfe;
  const rdmadl::endpoint two[] = {a, b};
  write_seed("endpoints-0", {});
  write_seed("endpoints-1", std::span(two).first(1));
  write_seed("endpoints-2", two);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  std::span<const std::byte> blob(reinterpret_cast<const std::byte *>(data), size);
  auto r = rdmadl::parse_endpoints(blob);
  if (!r) {
    if (r.error() != std::errc::invalid_argument)
      rdmadl_fuzz::fail("refused with an error not equal to invalid_argument");
    return 0;
  }
  auto again = rdmadl::serialize_endpoints(*r);
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0)
    rdmadl_fuzz::fail("an accepted list does not serialise back to the same bytes");
  return 0;
}

// SPDX-License-Identifier: MIT
// libFuzzer target: rdmadl::remote_region::parse accepts only blobs that
// serialize() gives back byte for byte (fuzz_common.hpp), and an accepted
// region's slices never wrap.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  const rdmadl::remote_region seeds[] = {
      {}, {0x7f0000001000, 0xdeadbeef, 4096}, {UINT64_MAX - 4095, 1, 4095}, {0, 2, UINT64_MAX}};
  rdmadl_fuzz::write_seeds("region-", seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  if (!rdmadl_fuzz::check_round_trip<rdmadl::remote_region>(data, size))
    return 0;
  auto r = rdmadl::remote_region::parse(
      std::span<const std::byte>(reinterpret_cast<const std::byte *>(data), size));
  if (r->length == 0)
    return 0;
  auto whole = r->slice(0, r->length);
  if (!whole || whole->addr != r->addr || whole->length != r->length)
    rdmadl_fuzz::fail("an accepted region cannot be sliced whole");
  auto last = r->slice(r->length - 1, 1);
  if (!last || last->addr < r->addr)
    rdmadl_fuzz::fail("a slice of an accepted region wraps");
  return 0;
}

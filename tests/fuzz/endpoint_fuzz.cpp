// SPDX-License-Identifier: MIT
// libFuzzer target: rdmadl::endpoint::parse accepts only blobs that
// serialize() gives back byte for byte (fuzz_common.hpp).
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  rdmadl::endpoint a;
  rdmadl::endpoint b;
  b.qpn = 0xffffff;
  b.psn = 0x123456;
  b.lid = 0xffff;
  for (int i = 0; i < 16; i++)
    b.gid_value.raw[i] = static_cast<std::uint8_t>(0xf0 + i);
  b.qkey = 0x11111111;
  b.mtu = 4096;
  b.gid_kind = rdmadl::gid_type::roce_v2;
  const rdmadl::endpoint seeds[] = {a, b};
  rdmadl_fuzz::write_seeds("endpoint-", seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  rdmadl_fuzz::check_round_trip<rdmadl::endpoint>(data, size);
  return 0;
}

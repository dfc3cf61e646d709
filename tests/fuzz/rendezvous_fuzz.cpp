// SPDX-License-Identifier: MIT
// libFuzzer target: create_cm's TCP rendezvous frame (src/cm_hello.hpp).
// parse_cm_rendezvous accepts exactly the 16-byte inputs that encode()
// writes for the fields it returns, and refuses every other one with an
// error equal to std::errc::invalid_argument.
#include <array>
#include <cstring>
#include <string>

#include "cm_hello.hpp"
#include "fuzz_common.hpp"

namespace {
using rdmadl::detail::cm_rendezvous;
using rdmadl::detail::encode;

void write_seed(const std::string &name, const cm_rendezvous &r) {
  auto b = encode(r);
  rdmadl_fuzz::write_seed(name, b.data(), b.size());
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  write_seed("rank-0-tcp", {0, rdmadl::detail::cm_can_tcp});
  write_seed("rank-max-both",
             {0xffffffffu, rdmadl::detail::cm_can_tcp | rdmadl::detail::cm_can_rdma});
  write_seed("refusal-taken", {3, rdmadl::detail::cm_can_tcp});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  std::span<const std::byte> b(reinterpret_cast<const std::byte *>(data), size);
  auto r = rdmadl::detail::parse_cm_rendezvous(b);
  if (!r) {
    if (r.error() != std::errc::invalid_argument)
      rdmadl_fuzz::fail("refused with an error not equal to invalid_argument");
    return 0;
  }
  if (size != rdmadl::detail::cm_rendezvous_size)
    rdmadl_fuzz::fail("a frame that is not 16 bytes was accepted");
  if (!(r->caps & rdmadl::detail::cm_can_tcp))
    rdmadl_fuzz::fail("a frame without can_tcp was accepted");
  auto again = encode(*r);
  if (std::memcmp(again.data(), data, size) != 0)
    rdmadl_fuzz::fail("an accepted frame does not encode back to the same bytes");
  return 0;
}

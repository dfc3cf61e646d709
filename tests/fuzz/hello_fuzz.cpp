// SPDX-License-Identifier: MIT
// libFuzzer target: the rdma_cm channels' hello frame (src/cm_hello.hpp).
// parse_cm_hello accepts exactly the inputs whose first 12 bytes are what
// cm_hello() writes for the value it returns; what follows them (the
// transport's padding) is not looked at.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cm_hello.hpp"
#include "fuzz_common.hpp"

namespace {
using rdmadl::detail::cm_hello;
using rdmadl::detail::cm_hello_size;

void write_seed(const std::string &name, std::span<const std::byte> b) {
  rdmadl_fuzz::write_seed(name, b.data(), b.size());
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  write_seed("hello-0", cm_hello(0));
  write_seed("hello-max", cm_hello(0xffffffffu));
  // A rank as rdma_cm delivers it: padded with zeros to 56 bytes.
  std::array<std::byte, 56> padded{};
  auto h = cm_hello(7);
  std::copy(h.begin(), h.end(), padded.begin());
  write_seed("hello-padded", padded);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  std::span<const std::byte> b(reinterpret_cast<const std::byte *>(data), size);
  auto v = rdmadl::detail::parse_cm_hello(b);
  if (size < cm_hello_size) {
    if (v)
      rdmadl_fuzz::fail("a frame shorter than 12 bytes was accepted");
    return 0;
  }
  // The only frame that can carry this input's value.
  auto want = cm_hello(static_cast<std::uint32_t>(data[8]) | std::uint32_t{data[9]} << 8 |
                       std::uint32_t{data[10]} << 16 | std::uint32_t{data[11]} << 24);
  const bool exact = std::memcmp(want.data(), data, cm_hello_size) == 0;
  if (v && !exact)
    rdmadl_fuzz::fail("an accepted frame is not what cm_hello() writes for its value");
  if (!v && exact)
    rdmadl_fuzz::fail("a frame cm_hello() writes was refused");
  if (v && cm_hello(*v) != want)
    rdmadl_fuzz::fail("the accepted value is not the frame's");
  return 0;
}

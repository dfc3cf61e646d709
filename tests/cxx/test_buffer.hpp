// SPDX-License-Identifier: MIT
// test_buffer: a registered buffer holding a pattern made from a seed, for
// the channel tests that check every byte moved. Include after doctest.
#ifndef RDMADL_TESTS_TEST_BUFFER_HPP
#define RDMADL_TESTS_TEST_BUFFER_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rdmadl/memory.hpp"
#include "test_ok.hpp"

namespace {

// A buffer filled with a pattern of seed, registered on pd.
struct buffer {
  std::vector<std::byte> bytes;
  rdmadl::memory_region mr;
  buffer(const rdmadl::protection_domain &pd, std::size_t n, unsigned seed,
         rdmadl::access rights = rdmadl::access::local)
      : bytes(n) {
    fill(seed);
    mr = ok(pd.register_memory(bytes, rights));
  }
  void fill(unsigned seed) {
    for (std::size_t i = 0; i < bytes.size(); i++)
      bytes[i] = at(i, seed);
  }
  bool holds(unsigned seed, std::size_t from = 0, std::size_t len = SIZE_MAX) const {
    len = std::min(len, bytes.size() - from);
    for (std::size_t i = from; i < from + len; i++)
      if (bytes[i] != at(i, seed))
        return false;
    return true;
  }
  rdmadl::local_slice all() const { return ok(mr.all()); }
  // The pattern's byte at i.
  static std::byte at(std::size_t i, unsigned seed) {
    return static_cast<std::byte>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  }
};

} // namespace

#endif // RDMADL_TESTS_TEST_BUFFER_HPP

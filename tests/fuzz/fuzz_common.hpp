// SPDX-License-Identifier: MIT
// The round-trip property both parser fuzz targets check: a blob that parse()
// accepts serialises back to exactly the same bytes, and a refused one is
// refused with an error equal to std::errc::invalid_argument. Any other
// outcome aborts, which libFuzzer reports as a crash.
#ifndef RDMADL_TESTS_FUZZ_COMMON_HPP
#define RDMADL_TESTS_FUZZ_COMMON_HPP

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <system_error>

#include "rdmadl/rdmadl.hpp"

namespace rdmadl_fuzz {

[[noreturn]] inline void fail(const char *what) {
  std::fprintf(stderr, "fuzz: %s\n", what);
  std::abort();
}

// Checks the property for one input. The branches on the error make each way
// of being refused a distinct feature for libFuzzer (the library itself is not
// instrumented).
template <class T> int check_round_trip(const std::uint8_t *data, std::size_t size) {
  std::span<const std::byte> blob(reinterpret_cast<const std::byte *>(data), size);
  auto r = T::parse(blob);
  if (!r) {
    const std::error_code ec = r.error();
    if (ec != std::errc::invalid_argument)
      fail("refused with an error not equal to invalid_argument");
    if (ec == rdmadl::errc::bad_size)
      return 0;
    if (ec == rdmadl::errc::bad_magic)
      return 0;
    if (ec == rdmadl::errc::newer_format)
      return 0;
    if (ec == rdmadl::errc::bad_blob)
      return 0;
    return 0;
  }
  auto again = r->serialize();
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0)
    fail("an accepted blob does not serialise back to the same bytes");
  return 1;
}

// Writes one seed file NAME with the given bytes into the directory named by
// the environment variable RDMADL_FUZZ_SEED_DIR, if set.
inline void write_seed(const std::string &name, const void *data, std::size_t size) {
  const char *dir = std::getenv("RDMADL_FUZZ_SEED_DIR");
  if (!dir)
    return;
  std::string path = std::string(dir) + "/" + name;
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0)
    fail("cannot write a seed into RDMADL_FUZZ_SEED_DIR");
}

// Writes SEEDS (serialised values) into the directory named by the
// environment variable RDMADL_FUZZ_SEED_DIR, if set; the ctest run points it
// at the corpus directory it starts with.
template <class T, std::size_t N> void write_seeds(const char *prefix, const T (&seeds)[N]) {
  for (std::size_t i = 0; i < N; i++) {
    auto b = seeds[i].serialize();
    write_seed(prefix + std::to_string(i), b.data(), b.size());
  }
}

} // namespace rdmadl_fuzz

#endif // RDMADL_TESTS_FUZZ_COMMON_HPP

// SPDX-License-Identifier: MIT
// Little-endian field encoding for the serialised descriptors.
#ifndef RDMADL_SRC_SERIAL_HPP
#define RDMADL_SRC_SERIAL_HPP

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "rdmadl/error.hpp"

namespace rdmadl::detail {

// (On a little-endian host one unaligned load or store each: the TCP
// engine encodes and parses a frame header per message.)
template <class T> void put_le(std::byte *p, T v) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof v);
  } else {
    for (std::size_t i = 0; i < sizeof(T); i++)
      p[i] = static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
  }
}
template <class T> T get_le(const std::byte *p) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  } else {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(T); i++)
      v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    return static_cast<T>(v);
  }
}

// Whether b[off, off + n) are all zero (the reserved bytes serialize() writes).
inline bool zero_bytes(std::span<const std::byte> b, std::size_t off, std::size_t n) noexcept {
  for (std::size_t i = off; i < off + n; i++)
    if (b[i] != std::byte{0})
      return false;
  return true;
}

// Checks a blob's header: 4-byte magic, 1-byte format version, 3 reserved
// zero bytes. Accepts only what put_header() writes for this build's version
// (a parser of version N reads only version-N blobs). Order: too short for a
// header, wrong magic or version 0 (errc::bad_magic), newer version
// (errc::newer_format), an older version (errc::bad_magic), non-zero reserved
// bytes (errc::bad_blob), then the exact size (errc::bad_size).
inline std::error_code check_header(std::span<const std::byte> b, const char (&magic)[5],
                                    std::uint8_t version, std::size_t size) noexcept {
  if (b.size() < 8)
    return make_error_code(errc::bad_size);
  for (int i = 0; i < 4; i++)
    if (b[i] != static_cast<std::byte>(magic[i]))
      return make_error_code(errc::bad_magic);
  auto v = static_cast<std::uint8_t>(b[4]);
  if (v == 0)
    return make_error_code(errc::bad_magic);
  if (v > version)
    return make_error_code(errc::newer_format);
  if (v != version)
    return make_error_code(errc::bad_magic);
  if (!zero_bytes(b, 5, 3))
    return make_error_code(errc::bad_blob);
  if (b.size() != size)
    return make_error_code(errc::bad_size);
  return {};
}

// QPNs and PSNs are 24-bit on the wire.
inline constexpr std::uint32_t max_24bit = 0xffffff;

inline void put_header(std::byte *p, const char (&magic)[5], std::uint8_t version) noexcept {
  for (int i = 0; i < 4; i++)
    p[i] = static_cast<std::byte>(magic[i]);
  p[4] = static_cast<std::byte>(version);
  p[5] = p[6] = p[7] = std::byte{0};
}

} // namespace rdmadl::detail

#endif // RDMADL_SRC_SERIAL_HPP

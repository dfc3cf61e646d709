// SPDX-License-Identifier: MIT
// The hello frame of the rdma_cm channels (multi_channel_cm.cpp): 12 bytes
// of rdma_cm private data, "RDMC", version 1, 3 zero bytes, then a 32-bit
// value, little-endian. A connecting side sends its rank in one; a side
// that rejects a connection request sends its reason in one.
#ifndef RDMADL_SRC_CM_HELLO_HPP
#define RDMADL_SRC_CM_HELLO_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "serial.hpp"

namespace rdmadl::detail {

inline constexpr char cm_hello_magic[5] = "RDMC";
inline constexpr std::uint8_t cm_hello_version = 1;
inline constexpr std::size_t cm_hello_size = 12;

// The frame that carries v.
inline std::array<std::byte, cm_hello_size> cm_hello(std::uint32_t v) noexcept {
  std::array<std::byte, cm_hello_size> b{};
  put_header(b.data(), cm_hello_magic, cm_hello_version);
  put_le(b.data() + 8, v);
  return b;
}

// The value of the frame b begins with, or nothing when its first 12 bytes
// are not exactly what cm_hello() writes (magic, version, zero reserved
// bytes). Bytes after the 12 are the transport's padding (rdma_cm hands over
// private data at the transport's full length) and are not looked at.
inline std::optional<std::uint32_t> parse_cm_hello(std::span<const std::byte> b) noexcept {
  if (b.size() < cm_hello_size)
    return std::nullopt;
  auto head = b.first(cm_hello_size);
  if (check_header(head, cm_hello_magic, cm_hello_version, cm_hello_size))
    return std::nullopt;
  return get_le<std::uint32_t>(head.data() + 8);
}

} // namespace rdmadl::detail

#endif // RDMADL_SRC_CM_HELLO_HPP

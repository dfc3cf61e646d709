// SPDX-License-Identifier: MIT
// The hello frame of the rdma_cm channels (multi_channel_cm.cpp): 12 bytes
// of rdma_cm private data, "RDMC", version 1, 3 zero bytes, then a 32-bit
// value, little-endian. A connecting side sends its rank in one; a side
// that rejects a connection request sends its reason in one.
//
// The rendezvous frame of create_cm over TCP (cm_rendezvous.hpp): 16 bytes,
// "RDMR", version 1, 3 zero bytes, a 32-bit value, the sender's caps (1
// byte: channel_endpoint::can_tcp, always, and can_rdma when it offers
// RDMA), 3 zero bytes, little-endian. The connecting side sends its rank in
// one; the accepting side answers with 0 (taken) or its reason (refused).
#ifndef RDMADL_SRC_CM_HELLO_HPP
#define RDMADL_SRC_CM_HELLO_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "rdmadl/error.hpp"
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

inline constexpr char cm_rendezvous_magic[5] = "RDMR";
// Version 2: after a rendezvous that chose RDMA the connection stays open
// for the outcome frame (below); version 1 closed it at once.
inline constexpr std::uint8_t cm_rendezvous_version = 2;
inline constexpr std::size_t cm_rendezvous_size = 16;
inline constexpr std::uint8_t cm_can_rdma = 1, cm_can_tcp = 2; // channel_endpoint's caps bits
// After a rendezvous that chose RDMA, the connecting side sends one more
// frame on the same connection once its rdma_cm connect is over, with
// value cm_outcome_rdma (connected: the connection then closes) or
// cm_outcome_tcp (rdma_cm could not connect: the pair falls back to TCP,
// and this connection is its TCP connection).
inline constexpr std::uint32_t cm_outcome_rdma = 0, cm_outcome_tcp = 1;

// One rendezvous frame's fields.
struct cm_rendezvous {
  std::uint32_t value = 0; // the rank, or 0 / the reason of a refusal
  std::uint8_t caps = cm_can_tcp;
};

// The frame of r.
inline std::array<std::byte, cm_rendezvous_size> encode(const cm_rendezvous &r) noexcept {
  std::array<std::byte, cm_rendezvous_size> b{};
  put_header(b.data(), cm_rendezvous_magic, cm_rendezvous_version);
  put_le(b.data() + 8, r.value);
  b[12] = static_cast<std::byte>(r.caps);
  return b;
}

// The fields of b, which must be exactly what encode() writes: 16 bytes,
// magic, version, zero reserved bytes, caps with can_tcp and no unknown bit.
// Errors (equal to invalid_argument): errc::bad_size, errc::bad_magic,
// errc::newer_format, errc::bad_blob.
inline result<cm_rendezvous> parse_cm_rendezvous(std::span<const std::byte> b) noexcept {
  if (auto ec = check_header(b, cm_rendezvous_magic, cm_rendezvous_version, cm_rendezvous_size))
    return ec;
  cm_rendezvous r;
  r.value = get_le<std::uint32_t>(b.data() + 8);
  r.caps = static_cast<std::uint8_t>(b[12]);
  if (!(r.caps & cm_can_tcp) || (r.caps & ~(cm_can_rdma | cm_can_tcp)) || !zero_bytes(b, 13, 3))
    return errc::bad_blob;
  return r;
}

} // namespace rdmadl::detail

#endif // RDMADL_SRC_CM_HELLO_HPP

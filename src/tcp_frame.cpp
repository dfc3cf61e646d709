// SPDX-License-Identifier: MIT
#include "tcp_frame.hpp"

#include <cstring>

#include "serial.hpp"

namespace rdmadl::detail {

namespace {
constexpr char hello_magic[5] = "RDTH";

tcp_hello hello_tokens(std::span<const std::byte> b) noexcept {
  return {get_le<std::uint64_t>(b.data() + 8), get_le<std::uint64_t>(b.data() + 16)};
}
} // namespace

std::array<std::byte, tcp_hello_size> encode(const tcp_hello &h) noexcept {
  std::array<std::byte, tcp_hello_size> b{};
  put_header(b.data(), hello_magic, tcp_hello_version);
  put_le(b.data() + 8, h.acceptor_token);
  put_le(b.data() + 16, h.connector_token);
  return b;
}

result<tcp_hello> parse_hello(std::span<const std::byte> b) noexcept {
  if (auto ec = check_header(b, hello_magic, tcp_hello_version, tcp_hello_size))
    return ec;
  const tcp_hello h = hello_tokens(b);
  if (h.acceptor_token == 0 || h.connector_token == 0)
    return errc::bad_blob;
  return h;
}

tcp_hello_seen peek_hello(std::span<const std::byte> b) noexcept {
  tcp_hello_seen seen;
  if (b.size() != tcp_hello_size || std::memcmp(b.data(), hello_magic, 4) != 0)
    return seen;
  seen.version = static_cast<std::uint8_t>(b[4]);
  seen.tokens = hello_tokens(b);
  return seen;
}

} // namespace rdmadl::detail

// SPDX-License-Identifier: MIT
#include "tcp_frame.hpp"

#include "serial.hpp"

namespace rdmadl::detail {

namespace {
constexpr char hello_magic[5] = "RDTH";
constexpr std::uint8_t hello_version = 3; // 2: eager sends; 3: an ack answers a run (tcp_frame.hpp)
} // namespace

std::array<std::byte, tcp_hello_size> encode(const tcp_hello &h) noexcept {
  std::array<std::byte, tcp_hello_size> b{};
  put_header(b.data(), hello_magic, hello_version);
  put_le(b.data() + 8, h.acceptor_token);
  put_le(b.data() + 16, h.connector_token);
  return b;
}

result<tcp_hello> parse_hello(std::span<const std::byte> b) noexcept {
  if (auto ec = check_header(b, hello_magic, hello_version, tcp_hello_size))
    return ec;
  tcp_hello h{get_le<std::uint64_t>(b.data() + 8), get_le<std::uint64_t>(b.data() + 16)};
  if (h.acceptor_token == 0 || h.connector_token == 0)
    return errc::bad_blob;
  return h;
}

} // namespace rdmadl::detail

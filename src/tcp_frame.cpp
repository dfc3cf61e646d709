// SPDX-License-Identifier: MIT
#include "tcp_frame.hpp"

#include "serial.hpp"

namespace rdmadl::detail {

namespace {
constexpr char hello_magic[5] = "RDTH";
constexpr std::uint8_t hello_version = 2; // 2: eager sends (tcp_frame.hpp)
} // namespace

std::array<std::byte, tcp_header_size> encode(const tcp_frame &f) noexcept {
  std::array<std::byte, tcp_header_size> b{};
  b[0] = static_cast<std::byte>(f.op);
  put_le(b.data() + 2, f.credit);
  put_le(b.data() + 4, f.length);
  put_le(b.data() + 8, f.wr_id);
  put_le(b.data() + 16, f.addr);
  put_le(b.data() + 24, f.rkey);
  put_le(b.data() + 28, f.status);
  return b;
}

result<tcp_frame> parse_frame(std::span<const std::byte> b) noexcept {
  if (b.size() != tcp_header_size)
    return errc::bad_size;
  const auto op = static_cast<std::uint8_t>(b[0]);
  if (op < static_cast<std::uint8_t>(tcp_op::send) ||
      op > static_cast<std::uint8_t>(tcp_op::credit))
    return errc::bad_magic;
  if (!zero_bytes(b, 1, 1))
    return errc::bad_blob;
  tcp_frame f;
  f.op = static_cast<tcp_op>(op);
  f.credit = get_le<std::uint16_t>(b.data() + 2);
  f.length = get_le<std::uint32_t>(b.data() + 4);
  f.wr_id = get_le<std::uint64_t>(b.data() + 8);
  f.addr = get_le<std::uint64_t>(b.data() + 16);
  f.rkey = get_le<std::uint32_t>(b.data() + 24);
  f.status = get_le<std::uint32_t>(b.data() + 28);
  const bool remote = f.op == tcp_op::write || f.op == tcp_op::read_request;
  if (remote ? f.length > UINT64_MAX - f.addr : f.addr != 0 || f.rkey != 0)
    return errc::bad_blob;
  if (f.op == tcp_op::nack ? f.status == 0 || f.status > tcp_max_status : f.status != 0)
    return errc::bad_blob;
  if ((f.op == tcp_op::ack || f.op == tcp_op::nack) && f.length != 0)
    return errc::bad_blob;
  if (f.op == tcp_op::credit && f.length == 0)
    return errc::bad_blob;
  return f;
}

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

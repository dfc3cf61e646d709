// SPDX-License-Identifier: MIT
// libFuzzer target: the TCP engine's wire parsers (src/tcp_frame.cpp). The
// input is cut into 32-byte frame headers (and, first, a 24-byte hello
// when it starts with "RDTH"): every header parse_frame() accepts must
// re-encode to exactly its bytes and name a payload only for send, write and
// read response; every refusal must be one of the documented errors. Any
// other outcome aborts.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.hpp"
#include "tcp_frame.hpp"

using namespace rdmadl::detail;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  std::vector<std::uint8_t> s;
  auto add = [&](const auto &bytes) {
    for (auto b : bytes)
      s.push_back(static_cast<std::uint8_t>(b));
  };
  add(encode(tcp_hello{0x1122334455667788ull, 1}));
  add(encode(tcp_frame{tcp_op::write, 16, 7, 0x7f0000001000ull, 0x100001, 0}));
  add(encode(tcp_frame{tcp_op::nack, 0, 7, 0, 0, 10}));
  add(encode(tcp_frame{tcp_op::read_request, 4096, 8, 0x1000, 3, 0}));
  add(encode(tcp_frame{tcp_op::credit, 2, 0, 0, 0, 0}));
  add(encode(tcp_frame{tcp_op::ack, 2, 9, 0, 0, 0, 3})); // an ack of two, a credit riding on it
  add(encode(tcp_frame{tcp_op::send, 64, 10, 0, 0, 0, 0xffff}));
  rdmadl_fuzz::write_seed("tcp-frame-0", s.data(), s.size());
  return 0;
}

namespace {
void check_error(const std::error_code &ec) {
  if (ec != std::errc::invalid_argument)
    rdmadl_fuzz::fail("refused with an error not equal to invalid_argument");
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte *>(data), size);
  if (size >= tcp_hello_size && std::memcmp(data, "RDTH", 4) == 0) {
    auto h = parse_hello(in.first(tcp_hello_size));
    if (h) {
      auto again = encode(*h);
      if (std::memcmp(again.data(), data, tcp_hello_size) != 0)
        rdmadl_fuzz::fail("an accepted hello does not encode back to the same bytes");
      if (h->acceptor_token == 0 || h->connector_token == 0)
        rdmadl_fuzz::fail("a hello with a zero token was accepted");
    } else {
      check_error(h.error());
    }
    in = in.subspan(tcp_hello_size);
  }
  if (in.size() % tcp_header_size)
    check_error(parse_frame(in.first(in.size() % tcp_header_size)).error());
  for (; in.size() >= tcp_header_size; in = in.subspan(tcp_header_size)) {
    auto f = parse_frame(in.first(tcp_header_size));
    if (!f) {
      check_error(f.error());
      continue;
    }
    auto again = encode(*f);
    if (std::memcmp(again.data(), in.data(), tcp_header_size) != 0)
      rdmadl_fuzz::fail("an accepted header does not encode back to the same bytes");
    const bool carries =
        f->op == tcp_op::send || f->op == tcp_op::write || f->op == tcp_op::read_response;
    if (f->payload() != (carries ? f->length : 0))
      rdmadl_fuzz::fail("a payload for a frame that carries none, or the wrong size");
    if ((f->op == tcp_op::write || f->op == tcp_op::read_request) &&
        f->length > UINT64_MAX - f->addr)
      rdmadl_fuzz::fail("an accepted remote range wraps");
    if ((f->op == tcp_op::nack) != (f->status != 0))
      rdmadl_fuzz::fail("a status outside a nack, or a nack without one");
    if (f->op == tcp_op::credit && f->length == 0)
      rdmadl_fuzz::fail("a credit for no receive");
    if (f->op == tcp_op::ack && f->length == 0)
      rdmadl_fuzz::fail("an ack of no request");
    if (f->op == tcp_op::nack && f->length != 0)
      rdmadl_fuzz::fail("a nack of more than one request");
  }
  return 0;
}

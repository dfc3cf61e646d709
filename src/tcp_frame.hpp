// SPDX-License-Identifier: MIT
// The TCP engine's wire format (src/tcp_engine.cpp), as pure functions so a
// fuzzer can drive the parser alone.
//
// A connection opens with the connector's hello (24 bytes: "RDTH", version
// 3, 3 reserved bytes, the token the acceptor gave for this pair, the
// connector's own token). Then each side sends frames: a fixed 32-byte
// little-endian header (opcode, flags 0, a 16-bit credit, length, wr_id,
// remote address, rkey, status) and, for send, write and read-response,
// length payload bytes. A request is answered in order: send and write by
// an ack (placed) or a nack (its status), a read request by a read response
// carrying the bytes, or a nack. An ack answers the next length requests on
// the wire at once (version 3; every one a send or a write, the last one's
// wr_id in it): a side that placed a run of them before its answers went
// out sends one frame for the run, not one per request, and the requester
// checks the run against its own queue. A credit frame (length: how many), or the
// credit field of any frame (version 2), tells the peer that this side has
// posted that many more receives: a side sends a
// send against a credit, so a send never waits in the stream for a receive
// and holds up the answers behind it (RC keeps a requester's and a
// responder's traffic apart in the same way). Version 2 adds eager sends: a
// side may also send up to tcp_eager_sends sends of at most tcp_eager_max
// bytes beyond the credits it has (the peer's receives it was told of, minus
// its sends), and the peer reads each into a staging buffer of its own and
// places it in the next receive posted there; it is acknowledged then, so an
// ack still means "placed in a receive", as RC's. Without it a blocking
// ping-pong pays a credit's trip before each message (the receive is posted
// only once the previous send has completed).
#ifndef RDMADL_SRC_TCP_FRAME_HPP
#define RDMADL_SRC_TCP_FRAME_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rdmadl/error.hpp"
#include "serial.hpp"

namespace rdmadl::detail {

enum class tcp_op : std::uint8_t {
  send = 1,
  write,
  read_request,
  read_response,
  ack,
  nack,
  credit
};

struct tcp_frame {
  tcp_op op = tcp_op::ack;
  std::uint32_t length = 0; // payload bytes (read request: the bytes asked for; credit: receives;
                            // ack: the requests it answers)
  std::uint64_t wr_id = 0;  // the initiator's, echoed in the answer
  std::uint64_t addr = 0;   // write, read request: the target address
  std::uint32_t rkey = 0;   // write, read request: the target region's key
  std::uint32_t status = 0; // nack: the ibv_wc_status the initiator completes with
  std::uint16_t credit = 0; // any frame: receives posted since the last credit told
  // Payload bytes that follow the header.
  std::uint32_t payload() const noexcept {
    return op == tcp_op::send || op == tcp_op::write || op == tcp_op::read_response ? length : 0;
  }
};

inline constexpr std::size_t tcp_header_size = 32;
inline constexpr std::size_t tcp_hello_size = 24;
// Eager sends (see above): how many a side may have beyond its credits, and
// the largest; a receiving side keeps tcp_eager_sends * tcp_eager_max bytes
// of staging per TCP peer.
inline constexpr std::size_t tcp_eager_sends = 2;
inline constexpr std::uint32_t tcp_eager_max = 64 * 1024;
// The largest ibv_wc_status a nack may carry (IBV_WC_TM_RNDV_INCOMPLETE).
inline constexpr std::uint32_t tcp_max_status = 23;

// The header of f. (Inline, as parse_frame(): the engine encodes and parses
// one per frame.)
inline std::array<std::byte, tcp_header_size> encode(const tcp_frame &f) noexcept {
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

// Parses a header; accepts exactly what encode() writes for a well-formed
// frame: a known opcode, zero flags, any credit, and no field the
// opcode does not use (ack and nack carry no address or key, a nack no
// length; only a nack has a status, 1 to tcp_max_status; an ack and a
// credit have a length of at least 1; a write or read names a range that
// does not wrap). Errors: errc::bad_size (not tcp_header_size
// bytes), errc::bad_magic (unknown opcode), errc::bad_blob (any other field).
inline result<tcp_frame> parse_frame(std::span<const std::byte> b) noexcept {
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
  if (f.op == tcp_op::nack && f.length != 0)
    return errc::bad_blob;
  if ((f.op == tcp_op::credit || f.op == tcp_op::ack) && f.length == 0)
    return errc::bad_blob;
  return f;
}

// The hello's version: 2, eager sends; 3, an ack answers a run. Both ends
// of a connection speak the same one (docs/compatibility.md).
inline constexpr std::uint8_t tcp_hello_version = 3;

struct tcp_hello {
  std::uint64_t acceptor_token = 0; // the token the acceptor gave this pair
  std::uint64_t connector_token = 0;
};
std::array<std::byte, tcp_hello_size> encode(const tcp_hello &h) noexcept;
// Errors: as check_header (src/serial.hpp), errc::bad_blob for a zero token.
result<tcp_hello> parse_hello(std::span<const std::byte> blob) noexcept;
// The version a hello-sized blob with the hello's magic names, and its
// tokens as this version lays them out (version 0: not a hello). Lets an
// acceptor tell which of its peers runs another release when parse_hello()
// refuses the version.
struct tcp_hello_seen {
  std::uint8_t version = 0;
  tcp_hello tokens;
};
tcp_hello_seen peek_hello(std::span<const std::byte> blob) noexcept;

} // namespace rdmadl::detail

#endif // RDMADL_SRC_TCP_FRAME_HPP

// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/oob.hpp - a small out-of-band channel over TCP: the endpoint blobs
/// two peers must trade before they can connect (every RDMA program writes
/// one; this is ours, for examples, tests and simple tools), and a kept
/// connection that carries a stream of blobs (a TCP fallback path).
///
/// Each blob travels as a 4-byte little-endian length and its bytes; the
/// connecting side sends first. Every failure sets last_error_detail() to a
/// sentence naming the call, the side (listen on / connect to), host and port,
/// and what happened (e.g. "oob::exchange: connect to node2:18515 timed out
/// after 5000 ms (last attempt: Connection refused)").
#ifndef RDMADL_OOB_HPP
#define RDMADL_OOB_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "rdmadl/error.hpp"
#include "rdmadl/export.hpp"

/// Out-of-band exchange over TCP, for what peers trade before RDMA connects.
namespace rdmadl::oob {

/// The largest blob exchange() carries, and a connection's default limit.
inline constexpr std::size_t max_blob = 64 * 1024;

/// Sends mine to one peer and returns the peer's blob. With listen, listens
/// on every address of host:port (host empty: any IPv4 and IPv6 address) and
/// answers the first connection that sends a whole blob; connections that
/// close, fail or announce a blob over max_blob (port scanners, health
/// checks) are dropped and it keeps listening until the timeout. Else
/// connects to host:port, trying every address of host at once and again
/// until the peer listens. milliseconds::max() waits for ever. Errors:
/// errc::timed_out, errc::over_limit (a blob over max_blob),
/// errc::peer_closed (equal to std::errc::connection_reset: the peer closed
/// early), std::errc::address_not_available (host does not resolve), or the
/// errno of the socket call; each with last_error_detail().
RDMADL_CXX_API result<std::vector<std::byte>> exchange(std::string_view host, std::uint16_t port,
                                                       bool listen, std::span<const std::byte> mine,
                                                       std::chrono::milliseconds timeout);

} // namespace rdmadl::oob

namespace rdmadl::detail {
struct oob_stream;
}

namespace rdmadl::oob {

/// A kept TCP connection carrying a stream of blobs both ways, framed as
/// exchange() frames them (exchange() is one send and one receive on one).
/// Move-only; closes on destruction. Every call clears last_error_detail()
/// and sets it when it fails. Timeouts: milliseconds::max() waits for ever,
/// 0 or less only does what needs no waiting. One thread may send (send,
/// flush) while another receives; two sends or two receives at once may not.
class RDMADL_CXX_API connection {
public:
  /// An empty connection: every call fails with errc::empty_object.
  connection() noexcept;
  /// Moves; the source becomes empty.
  connection(connection &&) noexcept;
  /// Closes what this held, then moves; the source becomes empty.
  connection &operator=(connection &&) noexcept;
  /// Closes the socket (a blob still queued by a timed-out send is dropped).
  ~connection();

  /// Listens on host:port as exchange() does and keeps the first connection
  /// that sends a whole blob (of at most max_size bytes; strays are dropped);
  /// that blob is the first receive() returns. Errors: errc::timed_out,
  /// std::errc::address_not_available, the errno of bind/listen.
  static result<connection> listen(std::string_view host, std::uint16_t port,
                                   std::chrono::milliseconds timeout,
                                   std::size_t max_size = max_blob);
  /// Connects to host:port as exchange() does (every address, again until
  /// the peer listens). Errors: errc::timed_out,
  /// std::errc::address_not_available, the errno of the socket call.
  static result<connection> connect(std::string_view host, std::uint16_t port,
                                    std::chrono::milliseconds timeout,
                                    std::size_t max_size = max_blob);

  /// Sends blob (after what an earlier timed-out send left queued). Errors:
  /// errc::over_limit (over max_size(): nothing sent), errc::timed_out (the
  /// blob is queued whole and goes first with the next send() or flush();
  /// do not send it again), errc::peer_closed, errc::empty_object, the errno.
  result<void> send(std::span<const std::byte> blob, std::chrono::milliseconds timeout);
  /// Sends what a timed-out send() left queued. Errors: as send().
  result<void> flush(std::chrono::milliseconds timeout);
  /// The next blob. Errors: errc::timed_out (what arrived of a blob is kept:
  /// the next receive() continues it), errc::over_limit (the peer announced
  /// more than max_size(); the stream cannot go on), errc::peer_closed (the
  /// peer closed between blobs or, says the detail, in the middle of one),
  /// errc::empty_object, the errno. After over_limit, peer_closed or an errno
  /// every later receive() fails the same way (and after peer_closed or an
  /// errno of a send, every later send() and flush()).
  result<std::vector<std::byte>> receive(std::chrono::milliseconds timeout);

  /// The largest blob this connection sends or accepts.
  std::size_t max_size() const noexcept;
  /// Whether this holds a connection (not empty or moved from).
  explicit operator bool() const noexcept { return s_ != nullptr; }
  /// The socket, for poll(2); rdmadl keeps reading and writing it.
  int native_handle() const noexcept;

private:
  explicit connection(std::unique_ptr<detail::oob_stream> s) noexcept;
  // listen() and connect(): API names the call in error details.
  static result<connection> open(const char *api, std::string_view host, std::uint16_t port,
                                 bool listen, std::chrono::milliseconds timeout,
                                 std::size_t max_size);
  std::unique_ptr<detail::oob_stream> s_;
};

} // namespace rdmadl::oob

#endif // RDMADL_OOB_HPP

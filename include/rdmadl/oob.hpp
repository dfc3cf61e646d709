// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/oob.hpp - a small out-of-band exchange over TCP, for the endpoint
/// blobs two peers must trade before they can connect (every RDMA program
/// writes one; this is ours, for examples, tests and simple tools).
#ifndef RDMADL_OOB_HPP
#define RDMADL_OOB_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "rdmadl/error.hpp"
#include "rdmadl/export.hpp"

/// Out-of-band exchange over TCP, for what peers trade before RDMA connects.
namespace rdmadl::oob {

/// The largest blob exchange() carries.
inline constexpr std::size_t max_blob = 64 * 1024;

/// Sends mine to one peer and returns the peer's blob. With listen, listens
/// on every address of host:port (host empty: any IPv4 and IPv6 address) and
/// answers the first connection that sends a whole blob; connections that
/// close, fail or announce a blob over max_blob (port scanners, health
/// checks) are dropped and it keeps listening until the timeout. Else
/// connects to host:port, trying every address of host at once and again
/// until the peer listens. Each blob travels as a 4-byte little-endian length
/// and its bytes (the client sends first). milliseconds::max() waits for
/// ever. Errors: errc::timed_out, errc::bad_size (a blob over max_blob),
/// std::errc::connection_reset (the listening peer closed early),
/// std::errc::address_not_available (host does not resolve), or the errno of
/// the socket call.
RDMADL_CXX_API result<std::vector<std::byte>> exchange(std::string_view host, std::uint16_t port,
                                                       bool listen, std::span<const std::byte> mine,
                                                       std::chrono::milliseconds timeout);

} // namespace rdmadl::oob

#endif // RDMADL_OOB_HPP

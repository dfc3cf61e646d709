// SPDX-License-Identifier: MIT
// What the two users of rdma_cm (cm.cpp's connection/listener and
// multi_channel_cm.cpp's channels) share: address resolution, timed event
// waits and the error an unexpected event means.
#ifndef RDMADL_SRC_CM_COMMON_HPP
#define RDMADL_SRC_CM_COMMON_HPP

#include "rdmadl_verbs.h"

#include <chrono>
#include <cstdint>
#include <string_view>
#include <sys/socket.h>
#include <system_error>

#include "detail.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/runtime.hpp"

namespace rdmadl::detail {

// rdma_cm's millisecond timeouts are ints: clamped to [0, 2^30].
int cm_timeout(std::chrono::milliseconds t) noexcept;
// host:port as a socket address (numeric port; passive: host may be empty,
// any address). Errors: address_not_available.
result<sockaddr_storage> resolve_address(std::string_view host, std::uint16_t port, bool passive);
// The next event on ch, waiting until deadline; the caller acks it. Errors:
// errc::timed_out, or the errno.
result<rdma_cm_event *> take_cm_event(rdma_event_channel *ch,
                                      std::chrono::steady_clock::time_point deadline);
// Sets id's ACK timeout (RDMA_OPTION_ID_ACK_TIMEOUT) unless it is 0 (keep
// rdma_cm's); before connect/accept, since the QP takes it on its way to
// RTS. Errors: the errno.
result<void> set_ack_timeout(rdma_cm_id *id, std::uint8_t ack_timeout);
// What an event other than the awaited one means: errc::rejected, the
// status of an address, route or connect error, else
// errc::unexpected_event.
std::error_code cm_event_error(const rdma_cm_event *ev);

} // namespace rdmadl::detail

#endif // RDMADL_SRC_CM_COMMON_HPP

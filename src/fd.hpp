// SPDX-License-Identifier: MIT
// The one seam between the C++ layer and file descriptors: every wait on a
// completion channel, an async event fd, an rdma_cm event channel or an oob
// socket goes through wait_ready (one poll(2), one EINTR retry), and every
// O_NONBLOCK through set_nonblocking. Include after "rdmadl_verbs.h".
#ifndef RDMADL_SRC_FD_HPP
#define RDMADL_SRC_FD_HPP

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <poll.h>
#include <system_error>

#include "detail.hpp"

namespace rdmadl::detail {

// Sets O_NONBLOCK on fd (no change when it is set already). Returns the
// errno of fcntl(2).
std::error_code set_nonblocking(int fd) noexcept;

// Waits until one of the n fds has one of its events (their revents filled
// in) or deadline passes; a deadline that has passed still looks once.
// Returns {}, errc::timed_out, or the errno of poll(2).
std::error_code wait_ready(pollfd *fds, std::size_t n,
                           std::chrono::steady_clock::time_point deadline) noexcept;
// wait_ready on fd alone, for reading (POLLIN) or writing (POLLOUT).
std::error_code wait_readable(int fd, std::chrono::steady_clock::time_point deadline) noexcept;
std::error_code wait_writable(int fd, std::chrono::steady_clock::time_point deadline) noexcept;

// Calls take() (true on success; false with errno set) until it succeeds,
// waiting for fd to become readable between tries: the non-blocking event
// reads of verbs and rdma_cm. Returns {}, errc::timed_out once deadline has
// passed, or the errno of take() (other than EAGAIN, EWOULDBLOCK, EINTR) or
// of poll(2).
template <class Take>
std::error_code take_when_readable(int fd, std::chrono::steady_clock::time_point deadline,
                                   Take take) {
  for (;;) {
    if (take())
      return {};
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return rdma_error();
    if (expired(deadline))
      return errc::timed_out;
    if (auto ec = wait_readable(fd, deadline); ec && ec != errc::timed_out)
      return ec;
  }
}

} // namespace rdmadl::detail

#endif // RDMADL_SRC_FD_HPP

// SPDX-License-Identifier: MIT
// The one seam between the C++ layer and file descriptors: every wait on a
// completion channel, an async event fd, an rdma_cm event channel or an oob
// socket goes through wait_ready (one poll(2), one EINTR retry), and every
// O_NONBLOCK through set_nonblocking, and every socket a call owns is held
// by an fd_guard. Include after "rdmadl_verbs.h".
#ifndef RDMADL_SRC_FD_HPP
#define RDMADL_SRC_FD_HPP

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <sys/socket.h>
#include <system_error>
#include <unistd.h>
#include <utility>

#include "detail.hpp"

namespace rdmadl::detail {

// Owns a file descriptor (-1: none), closing it when destroyed or reset.
class fd_guard {
public:
  explicit fd_guard(int fd = -1) noexcept : fd_(fd) {}
  fd_guard(const fd_guard &) = delete;
  fd_guard &operator=(const fd_guard &) = delete;
  fd_guard(fd_guard &&o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  fd_guard &operator=(fd_guard &&o) noexcept {
    reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~fd_guard() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  int get() const noexcept { return fd_; }
  // Closes what it holds and takes fd.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = fd;
  }
  // Gives up the descriptor without closing it.
  int release() noexcept { return std::exchange(fd_, -1); }

private:
  int fd_;
};

// A failed system call's error (not an rdma-core one: no rdma_error()): e
// as it is, in the generic category, and EIO for a 0 no failure should leave.
inline std::error_code sys_error(int e = errno) noexcept {
  return {e ? e : EIO, std::generic_category()};
}

// The length of addr's sockaddr, for bind(2) and connect(2): an IPv6 or
// an IPv4 one.
inline socklen_t sockaddr_len(const sockaddr_storage &addr) noexcept {
  return addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}
// The port socket fd is bound to, or nothing (errno set by getsockname(2)).
std::optional<std::uint16_t> bound_port(int fd) noexcept;

// Sets O_NONBLOCK on fd (no change when it is set already). Returns the
// errno of fcntl(2) as it is (a system call: no rdma_error()).
std::error_code set_nonblocking(int fd) noexcept;
// Clears O_NONBLOCK on fd (no change when it is clear already). Returns the
// errno of fcntl(2) as it is.
std::error_code set_blocking(int fd) noexcept;

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
// passed, rdma_error() of take()'s errno (other than EAGAIN, EWOULDBLOCK,
// EINTR), or the errno of poll(2).
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

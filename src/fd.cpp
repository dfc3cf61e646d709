// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <arpa/inet.h>
#include <fcntl.h>

#include "fd.hpp"

namespace rdmadl::detail {

std::optional<std::uint16_t> bound_port(int fd) noexcept {
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(fd, reinterpret_cast<sockaddr *>(&bound), &len) != 0)
    return std::nullopt;
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
}

std::error_code set_nonblocking(int fd) noexcept {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || (!(fl & O_NONBLOCK) && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
    return sys_error();
  return {};
}

std::error_code set_blocking(int fd) noexcept {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ((fl & O_NONBLOCK) && ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0))
    return sys_error();
  return {};
}

std::error_code wait_ready(pollfd *fds, std::size_t n,
                           std::chrono::steady_clock::time_point deadline) noexcept {
  for (;;) {
    int rc = ::poll(fds, n, poll_timeout(deadline));
    if (rc > 0)
      return {};
    if (rc == 0)
      return errc::timed_out;
    if (errno != EINTR)
      return sys_error();
  }
}

std::error_code wait_readable(int fd, std::chrono::steady_clock::time_point deadline) noexcept {
  pollfd p{fd, POLLIN, 0};
  return wait_ready(&p, 1, deadline);
}

std::error_code wait_writable(int fd, std::chrono::steady_clock::time_point deadline) noexcept {
  pollfd p{fd, POLLOUT, 0};
  return wait_ready(&p, 1, deadline);
}

} // namespace rdmadl::detail

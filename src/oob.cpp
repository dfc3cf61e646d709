// SPDX-License-Identifier: MIT
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "lookup.hpp"
#include "rdmadl/oob.hpp"

namespace rdmadl::oob {

namespace {
using clock = std::chrono::steady_clock;

class fd_guard {
public:
  explicit fd_guard(int fd = -1) noexcept : fd_(fd) {}
  fd_guard(const fd_guard &) = delete;
  fd_guard &operator=(const fd_guard &) = delete;
  ~fd_guard() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  int get() const noexcept { return fd_; }
  void reset(int fd) noexcept {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_;
};

std::error_code last() noexcept {
  return {errno ? errno : EIO, std::generic_category()};
}

// Milliseconds left until d (at least 0).
int left(clock::time_point d) noexcept {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d - clock::now()).count();
  return ms <= 0 ? 0 : ms > 1 << 30 ? 1 << 30 : static_cast<int>(ms);
}

// Waits for events on fd until d. Errors: timed_out, the errno.
std::error_code wait_for(int fd, short events, clock::time_point d) noexcept {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, left(d));
    if (rc > 0)
      return {};
    if (rc == 0)
      return make_error_code(errc::timed_out);
    if (errno != EINTR)
      return last();
  }
}

std::error_code send_all(int fd, const std::byte *p, std::size_t n, clock::time_point d) noexcept {
  while (n) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= static_cast<std::size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EPIPE || errno == ECONNRESET))
      return std::make_error_code(std::errc::connection_reset);
    if (k < 0 && errno != EAGAIN && errno != EINTR)
      return last();
    if (auto ec = wait_for(fd, POLLOUT, d))
      return ec;
  }
  return {};
}

std::error_code recv_all(int fd, std::byte *p, std::size_t n, clock::time_point d) noexcept {
  while (n) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<std::size_t>(k);
      continue;
    }
    if (k == 0)
      return std::make_error_code(std::errc::connection_reset);
    if (errno != EAGAIN && errno != EINTR)
      return last();
    if (auto ec = wait_for(fd, POLLIN, d))
      return ec;
  }
  return {};
}

int nonblocking_socket(const addrinfo *a) noexcept {
  int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
  return fd;
}
} // namespace

result<std::vector<std::byte>> exchange(std::string_view host, std::uint16_t port, bool listen,
                                        std::span<const std::byte> mine,
                                        std::chrono::milliseconds timeout) {
  if (mine.size() > max_blob)
    return errc::bad_size;
  const auto deadline = timeout.count() <= 0 ? clock::now() : clock::now() + timeout;
  auto res = detail::lookup_address(host, port, listen);
  if (!res)
    return res.error();
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> ai(*res, freeaddrinfo);
  fd_guard conn;
  if (listen) {
    fd_guard l(nonblocking_socket(ai.get()));
    if (l.get() < 0)
      return last();
    int one = 1;
    ::setsockopt(l.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(l.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(l.get(), 1) != 0)
      return last();
    for (;;) {
      int fd = ::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        conn.reset(fd);
        break;
      }
      if (errno != EAGAIN && errno != EINTR)
        return last();
      if (auto ec = wait_for(l.get(), POLLIN, deadline))
        return ec;
    }
  } else {
    // The peer may not listen yet: retry refused connections until the deadline.
    for (;;) {
      conn.reset(nonblocking_socket(ai.get()));
      if (conn.get() < 0)
        return last();
      int rc = ::connect(conn.get(), ai->ai_addr, ai->ai_addrlen);
      int err = rc == 0 ? 0 : errno;
      if (err == EINPROGRESS) {
        if (auto ec = wait_for(conn.get(), POLLOUT, deadline))
          return ec;
        socklen_t len = sizeof err;
        ::getsockopt(conn.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
      if (err == 0)
        break;
      if (err != ECONNREFUSED && err != ENETUNREACH && err != EHOSTUNREACH)
        return std::error_code(err, std::generic_category());
      if (left(deadline) == 0)
        return errc::timed_out;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::byte len[4];
  const auto n = static_cast<std::uint32_t>(mine.size());
  for (int i = 0; i < 4; i++)
    len[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  if (auto ec = send_all(conn.get(), len, 4, deadline))
    return ec;
  if (auto ec = send_all(conn.get(), mine.data(), mine.size(), deadline))
    return ec;
  if (auto ec = recv_all(conn.get(), len, 4, deadline))
    return ec;
  std::uint32_t theirs = 0;
  for (int i = 0; i < 4; i++)
    theirs |= static_cast<std::uint32_t>(len[i]) << (8 * i);
  if (theirs > max_blob)
    return errc::bad_size;
  std::vector<std::byte> out(theirs);
  if (auto ec = recv_all(conn.get(), out.data(), out.size(), deadline))
    return ec;
  return out;
}

} // namespace rdmadl::oob

namespace rdmadl::detail {

result<addrinfo *> lookup_address(std::string_view host, std::uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  std::string h(host), p = std::to_string(port);
  addrinfo *res = nullptr;
  if (getaddrinfo(h.empty() ? nullptr : h.c_str(), p.c_str(), &hints, &res) != 0 || !res)
    return std::errc::address_not_available;
  return res;
}

} // namespace rdmadl::detail

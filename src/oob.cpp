// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "detail.hpp"
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

bool expired(clock::time_point d) noexcept {
  return d != clock::time_point::max() && clock::now() >= d;
}

// Waits for events on fds until d. Errors: timed_out, the errno.
std::error_code wait_any(pollfd *p, std::size_t n, clock::time_point d) noexcept {
  for (;;) {
    int rc = ::poll(p, n, detail::poll_timeout(d));
    if (rc > 0)
      return {};
    if (rc == 0)
      return make_error_code(errc::timed_out);
    if (errno != EINTR)
      return last();
  }
}

std::error_code wait_for(int fd, short events, clock::time_point d) noexcept {
  pollfd p{fd, events, 0};
  return wait_any(&p, 1, d);
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
  return ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
}

// At most this many addresses of a name are used, and this many accepted
// connections wait for their blob at once (the oldest goes first).
constexpr std::size_t max_addresses = 8;
constexpr std::size_t max_pending = 16;

// An address that says "not here, or not yet": try the others, try again.
bool retryable(int err) noexcept {
  return err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH || err == EADDRNOTAVAIL ||
         err == EAFNOSUPPORT || err == ETIMEDOUT;
}

std::array<std::byte, 4> length_prefix(std::size_t n) noexcept {
  std::array<std::byte, 4> len;
  for (int i = 0; i < 4; i++)
    len[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  return len;
}

std::uint32_t parse_length(const std::byte *len) noexcept {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= static_cast<std::uint32_t>(len[i]) << (8 * i);
  return v;
}

// Listening sockets on every address of the lookup: "" (any address) is
// IPv4 and IPv6, a name is each of its addresses. An address this host
// cannot have (no IPv6, say) is skipped; any other bind error is the error.
result<std::vector<fd_guard>> listen_all(const addrinfo *list) {
  bool has_v4 = false;
  for (const addrinfo *a = list; a; a = a->ai_next)
    has_v4 |= a->ai_family == AF_INET;
  std::vector<fd_guard> out;
  std::error_code skipped;
  std::size_t n = 0;
  for (const addrinfo *a = list; a && n < max_addresses; a = a->ai_next, n++) {
    fd_guard l(nonblocking_socket(a));
    if (l.get() < 0) {
      if (!skipped)
        skipped = last();
      continue;
    }
    int one = 1;
    ::setsockopt(l.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // Beside an IPv4 socket the IPv6 one takes IPv6 only, so both can bind.
    if (a->ai_family == AF_INET6 && has_v4)
      ::setsockopt(l.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (::bind(l.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(l.get(), 8) != 0) {
      int err = errno;
      if (err != EADDRNOTAVAIL && err != EAFNOSUPPORT)
        return std::error_code(err, std::generic_category());
      if (!skipped)
        skipped = std::error_code(err, std::generic_category());
      continue;
    }
    out.push_back(std::move(l));
  }
  if (out.empty())
    return skipped ? skipped : std::make_error_code(std::errc::address_not_available);
  return out;
}

// A connection accepted by the listener, reading the peer's blob.
struct incoming {
  fd_guard fd;
  std::array<std::byte, 4> len{};
  std::size_t got = 0; // bytes of len, then of blob
  bool have_len = false;
  std::vector<std::byte> blob;
};

// Reads what c has. Returns true when c is finished: blob complete, or a
// stray (closed, failed, or a length over max_blob) with its fd closed.
bool read_some(incoming &c) {
  for (;;) {
    std::byte *p = c.have_len ? c.blob.data() + c.got : c.len.data() + c.got;
    std::size_t want = c.have_len ? c.blob.size() - c.got : 4 - c.got;
    if (want == 0) {
      if (c.have_len)
        return true;
      std::uint32_t n = parse_length(c.len.data());
      if (n > max_blob) {
        c.fd.reset(-1);
        return true;
      }
      c.have_len = true;
      c.blob.resize(n);
      c.got = 0;
      continue;
    }
    ssize_t k = ::recv(c.fd.get(), p, want, 0);
    if (k > 0) {
      c.got += static_cast<std::size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EINTR))
      return false;
    c.fd.reset(-1); // closed or failed: a stray
    return true;
  }
}

// Accepts until one connection has sent a whole blob, then answers it with
// mine. Connections that close, fail or announce an oversized blob (port
// scanners, health checks, another protocol) are dropped; the listener keeps
// going until the deadline.
result<std::vector<std::byte>> serve(const std::vector<fd_guard> &listeners,
                                     std::span<const std::byte> mine, clock::time_point deadline) {
  std::vector<std::unique_ptr<incoming>> conns;
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    for (auto &l : listeners)
      fds.push_back({l.get(), POLLIN, 0});
    for (auto &c : conns)
      fds.push_back({c->fd.get(), POLLIN, 0});
    if (auto ec = wait_any(fds.data(), fds.size(), deadline))
      return ec;
    for (std::size_t i = 0; i < listeners.size(); i++) {
      if (!fds[i].revents)
        continue;
      int fd = ::accept4(listeners[i].get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0)
        continue; // gone before accept (ECONNABORTED), EAGAIN, out of fds: poll again
      if (conns.size() == max_pending)
        conns.erase(conns.begin());
      conns.push_back(std::make_unique<incoming>());
      conns.back()->fd.reset(fd);
    }
    for (std::size_t i = 0; i < conns.size();) {
      incoming &c = *conns[i];
      if (!read_some(c)) {
        i++;
        continue;
      }
      if (c.fd.get() >= 0) {
        auto len = length_prefix(mine.size());
        std::error_code ec = send_all(c.fd.get(), len.data(), len.size(), deadline);
        if (!ec)
          ec = send_all(c.fd.get(), mine.data(), mine.size(), deadline);
        if (!ec)
          return std::move(c.blob);
        if (ec == errc::timed_out)
          return ec;
      }
      conns.erase(conns.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
}

// Connects to the first address of the list that accepts, trying them all
// at once; refused ones again every 20 ms (the peer may not listen yet)
// until the deadline. Errors: timed_out, or the error of the first address
// when none can ever work.
result<fd_guard> connect_any(const addrinfo *list, clock::time_point deadline) {
  for (;;) {
    std::vector<fd_guard> socks;
    std::vector<pollfd> fds;
    std::error_code first_error;
    bool retry = false;
    auto failed = [&](int err) {
      retry |= retryable(err);
      if (!first_error)
        first_error = std::error_code(err, std::generic_category());
    };
    std::size_t n = 0;
    for (const addrinfo *a = list; a && n < max_addresses; a = a->ai_next, n++) {
      fd_guard s(nonblocking_socket(a));
      if (s.get() < 0) {
        failed(errno);
        continue;
      }
      int rc = ::connect(s.get(), a->ai_addr, a->ai_addrlen);
      if (rc == 0)
        return s;
      if (errno != EINPROGRESS) {
        failed(errno);
        continue;
      }
      fds.push_back({s.get(), POLLOUT, 0});
      socks.push_back(std::move(s));
    }
    while (!socks.empty()) {
      if (auto ec = wait_any(fds.data(), fds.size(), deadline))
        return ec;
      for (std::size_t i = 0; i < socks.size();) {
        if (!fds[i].revents) {
          i++;
          continue;
        }
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(socks[i].get(), SOL_SOCKET, SO_ERROR, &err, &len);
        if (err == 0)
          return std::move(socks[i]);
        failed(err);
        socks.erase(socks.begin() + static_cast<std::ptrdiff_t>(i));
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    if (!retry)
      return first_error ? first_error : std::make_error_code(std::errc::address_not_available);
    if (expired(deadline))
      return errc::timed_out;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}
} // namespace

result<std::vector<std::byte>> exchange(std::string_view host, std::uint16_t port, bool listen,
                                        std::span<const std::byte> mine,
                                        std::chrono::milliseconds timeout) {
  if (mine.size() > max_blob)
    return errc::bad_size;
  const auto deadline = detail::deadline(timeout);
  auto res = detail::lookup_address(host, port, listen);
  if (!res)
    return res.error();
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> ai(*res, freeaddrinfo);
  if (listen) {
    auto listeners = listen_all(ai.get());
    if (!listeners)
      return listeners.error();
    return serve(*listeners, mine, deadline);
  }
  auto conn = connect_any(ai.get(), deadline);
  if (!conn)
    return conn.error();
  auto len = length_prefix(mine.size());
  if (auto ec = send_all(conn->get(), len.data(), len.size(), deadline))
    return ec;
  if (auto ec = send_all(conn->get(), mine.data(), mine.size(), deadline))
    return ec;
  if (auto ec = recv_all(conn->get(), len.data(), len.size(), deadline))
    return ec;
  std::uint32_t theirs = parse_length(len.data());
  if (theirs > max_blob)
    return errc::bad_size;
  std::vector<std::byte> out(theirs);
  if (auto ec = recv_all(conn->get(), out.data(), out.size(), deadline))
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

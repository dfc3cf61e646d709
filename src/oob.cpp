// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "detail.hpp"
#include "fd.hpp"
#include "frame.hpp"
#include "lookup.hpp"
#include "rdmadl/oob.hpp"

namespace rdmadl::oob {

namespace {
using clock = std::chrono::steady_clock;

using detail::fd_guard;

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
        skipped = detail::sys_error();
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

// Connects to the first address of the list that accepts, trying them all
// at once; refused ones again every 20 ms (the peer may not listen yet)
// until the deadline. Errors: timed_out, or the error of the first address
// when none can ever work.
result<fd_guard> connect_any(const addrinfo *list, clock::time_point deadline,
                             std::error_code &last_failure) {
  for (;;) {
    std::vector<fd_guard> socks;
    std::vector<pollfd> fds;
    std::error_code first_error;
    bool retry = false;
    auto failed = [&](int err) {
      retry |= retryable(err);
      last_failure = std::error_code(err, std::generic_category());
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
      if (auto ec = detail::wait_ready(fds.data(), fds.size(), deadline))
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
    if (detail::expired(deadline))
      return errc::timed_out;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}
} // namespace

} // namespace rdmadl::oob

namespace rdmadl::detail {

// A connection's state: the socket, the frame being received, the bytes of
// frames a timed-out send left, and what the detail sentences say about it.
struct oob_stream {
  oob::fd_guard fd;
  frame_reader in;
  std::vector<std::byte> out; // queued frame bytes, out_done of them sent
  std::size_t out_done = 0;
  bool has_first = false; // listen: the blob that chose this connection
  std::vector<std::byte> first;
  // A direction that cannot go on: every later call on it fails with the
  // code and its sentence. Sending and receiving keep their own, so a send
  // and a receive may run at once on two threads.
  struct stop {
    status_code code;
    std::string text;
  } in_stop, out_stop;
  std::string where; // "connect to node2:18515"
  explicit oob_stream(std::size_t limit) : in(limit) {}
};

} // namespace rdmadl::detail

namespace rdmadl::oob {
namespace {
using detail::oob_stream;

// What a failing call says: "oob::exchange: connect to node2:18515".
struct call {
  const char *api;
  std::string where;
  std::chrono::milliseconds timeout;
};

std::string show_host(std::string_view host, std::uint16_t port) {
  // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on
  // "[" + h + "]" (its bug 105329), which -Werror turns into a failed build.
  bool v6 = host.find(':') != std::string_view::npos;
  std::string h;
  h.reserve(host.size() + 8);
  if (host.empty())
    h += '*';
  if (v6)
    h += '[';
  h += host;
  if (v6)
    h += ']';
  h += ':';
  h += std::to_string(port);
  return h;
}

std::string show_timeout(std::chrono::milliseconds t) {
  if (t == std::chrono::milliseconds::max())
    return "no limit";
  return std::to_string(t.count()) + " ms";
}

status_code fail(const call &c, status_code s, const std::string &what) {
  return detail::fail(s, std::string(c.api) + ": " + c.where + what);
}

std::string message(std::error_code ec) {
  return ec.message();
}

// A direction that cannot go on: this and every later call on it fail with s.
status_code stop_here(oob_stream::stop &at, const call &c, status_code s, const std::string &what) {
  at.code = s;
  at.text = std::string(c.api) + ": " + c.where + what;
  detail::set_error_detail(at.text);
  return s;
}
status_code stopped(const oob_stream::stop &at) {
  return detail::fail(at.code, at.text);
}

// Sends the queued bytes. On timed_out they stay queued.
status_code flush_out(oob_stream &st, const call &c, clock::time_point d) {
  while (st.out_done < st.out.size()) {
    ssize_t k =
        ::send(st.fd.get(), st.out.data() + st.out_done, st.out.size() - st.out_done, MSG_NOSIGNAL);
    if (k > 0) {
      st.out_done += static_cast<std::size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EPIPE || errno == ECONNRESET))
      return stop_here(st.out_stop, c, errc::peer_closed, ": the peer closed the connection");
    if (k < 0 && errno != EAGAIN && errno != EINTR) {
      auto ec = detail::sys_error();
      return stop_here(st.out_stop, c, ec, ": send failed (" + message(ec) + ")");
    }
    if (auto ec = detail::wait_writable(st.fd.get(), d)) {
      if (ec == errc::timed_out)
        return fail(c, ec,
                    ": send timed out after " + show_timeout(c.timeout) + " (" +
                        std::to_string(st.out.size() - st.out_done) +
                        " bytes queued: they go first with the next send or flush)");
      return stop_here(st.out_stop, c, ec, ": waiting to send failed (" + message(ec) + ")");
    }
  }
  st.out.clear();
  st.out_done = 0;
  return {};
}

status_code send_frame(oob_stream &st, const call &c, std::span<const std::byte> blob,
                       clock::time_point d) {
  if (st.out_stop.code)
    return stopped(st.out_stop);
  if (blob.size() > st.in.limit())
    return fail(c, errc::over_limit,
                ": our blob is " + std::to_string(blob.size()) + " bytes, over the limit of " +
                    std::to_string(st.in.limit()));
  // Queued behind what an earlier timed-out send left, so that a timeout
  // always means "queued whole".
  st.out.erase(st.out.begin(), st.out.begin() + static_cast<std::ptrdiff_t>(st.out_done));
  st.out_done = 0;
  auto h = detail::frame_header(static_cast<std::uint32_t>(blob.size()));
  st.out.insert(st.out.end(), h.begin(), h.end());
  st.out.insert(st.out.end(), blob.begin(), blob.end());
  return flush_out(st, c, d);
}

result<std::vector<std::byte>> receive_frame(oob_stream &st, const call &c, clock::time_point d) {
  if (st.has_first) {
    st.has_first = false;
    return std::move(st.first);
  }
  if (st.in_stop.code)
    return stopped(st.in_stop);
  for (;;) {
    if (st.in.done())
      return st.in.take();
    auto room = st.in.room();
    ssize_t k = ::recv(st.fd.get(), room.data(), room.size(), 0);
    if (k > 0) {
      if (auto s = st.in.advance(static_cast<std::size_t>(k)); !s.ok())
        return stop_here(st.in_stop, c, s,
                         ": the peer announced a blob of " + std::to_string(st.in.announced()) +
                             " bytes, over the limit of " + std::to_string(st.in.limit()) +
                             " (not an rdmadl oob peer, or a limit to raise)");
      continue;
    }
    if (k == 0) {
      if (!st.in.mid_frame())
        return stop_here(st.in_stop, c, errc::peer_closed, ": the peer closed the connection");
      return stop_here(st.in_stop, c, errc::peer_closed,
                       st.in.announced() || st.in.received()
                           ? ": the peer closed the connection after " +
                                 std::to_string(st.in.received()) + " of the " +
                                 std::to_string(st.in.announced()) + " bytes of a blob"
                           : std::string(": the peer closed the connection within a blob's "
                                         "length prefix"));
    }
    if (errno == EAGAIN || errno == EINTR) {
      if (auto ec = detail::wait_readable(st.fd.get(), d)) {
        if (ec == errc::timed_out)
          return fail(c, ec,
                      ": receive timed out after " + show_timeout(c.timeout) +
                          (st.in.mid_frame() ? " within a blob (what arrived is kept)" : ""));
        return stop_here(st.in_stop, c, ec, ": waiting to receive failed (" + message(ec) + ")");
      }
      continue;
    }
    auto ec = detail::sys_error();
    if (ec == std::errc::connection_reset)
      return stop_here(st.in_stop, c, errc::peer_closed,
                       ": the peer closed the connection (reset)");
    return stop_here(st.in_stop, c, ec, ": receive failed (" + message(ec) + ")");
  }
}

// Accepts until one connection has sent a whole blob (of at most limit
// bytes) and returns it as a stream whose first blob is that one.
// Connections that close, fail or announce an oversized blob (port scanners,
// health checks, another protocol) are dropped; the listener keeps going
// until the deadline.
result<std::unique_ptr<oob_stream>> serve(const std::vector<fd_guard> &listeners, std::size_t limit,
                                          const call &c, clock::time_point deadline) {
  std::vector<std::unique_ptr<oob_stream>> conns;
  std::vector<pollfd> fds;
  std::size_t accepted = 0;
  for (;;) {
    fds.clear();
    for (auto &l : listeners)
      fds.push_back({l.get(), POLLIN, 0});
    for (auto &st : conns)
      fds.push_back({st->fd.get(), POLLIN, 0});
    if (auto ec = detail::wait_ready(fds.data(), fds.size(), deadline)) {
      if (ec != errc::timed_out)
        return fail(c, ec, ": waiting for connections failed (" + message(ec) + ")");
      return fail(c, ec,
                  " timed out after " + show_timeout(c.timeout) +
                      (accepted ? ": " + std::to_string(accepted) +
                                      " connection(s) came, none sent a whole blob"
                                : std::string(": no peer connected")));
    }
    for (std::size_t i = 0; i < listeners.size(); i++) {
      if (!fds[i].revents)
        continue;
      int fd = ::accept4(listeners[i].get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0)
        continue; // gone before accept (ECONNABORTED), EAGAIN, out of fds: poll again
      accepted++;
      if (conns.size() == max_pending)
        conns.erase(conns.begin());
      conns.push_back(std::make_unique<oob_stream>(limit));
      conns.back()->fd.reset(fd);
    }
    for (std::size_t i = 0; i < conns.size();) {
      oob_stream &st = *conns[i];
      bool drop = false;
      for (;;) {
        if (st.in.done())
          break;
        auto room = st.in.room();
        ssize_t k = ::recv(st.fd.get(), room.data(), room.size(), 0);
        if (k > 0) {
          drop = !st.in.advance(static_cast<std::size_t>(k)).ok();
          if (drop)
            break;
          continue;
        }
        drop = !(k < 0 && (errno == EAGAIN || errno == EINTR)); // closed or failed: a stray
        break;
      }
      if (st.in.done()) {
        auto chosen = std::move(conns[i]);
        chosen->first = chosen->in.take();
        chosen->has_first = true;
        chosen->where = c.where;
        return chosen;
      }
      if (drop)
        conns.erase(conns.begin() + static_cast<std::ptrdiff_t>(i));
      else
        i++;
    }
  }
}

// Opens one side: listen (serve until a whole first blob) or connect.
result<std::unique_ptr<oob_stream>> open_stream(const call &c, std::string_view host,
                                                std::uint16_t port, bool listen, std::size_t limit,
                                                clock::time_point deadline) {
  auto res = detail::lookup_address(host, port, listen);
  if (!res)
    return fail(c, res.error(), ": the host name does not resolve");
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> ai(*res, freeaddrinfo);
  if (listen) {
    auto listeners = listen_all(ai.get());
    if (!listeners)
      return fail(c, listeners.error(), ": cannot listen (" + message(listeners.error()) + ")");
    return serve(*listeners, limit, c, deadline);
  }
  std::error_code last_failure;
  auto conn = connect_any(ai.get(), deadline, last_failure);
  if (!conn) {
    if (conn.error() == errc::timed_out)
      return fail(c, conn.error(),
                  " timed out after " + show_timeout(c.timeout) +
                      (last_failure ? " (last attempt: " + message(last_failure) + ")"
                                    : std::string(" (no answer)")));
    return fail(c, conn.error(), ": cannot connect (" + message(conn.error()) + ")");
  }
  auto st = std::make_unique<oob_stream>(limit);
  st->fd = std::move(*conn);
  st->where = c.where;
  return st;
}

call make_call(const char *api, std::string_view host, std::uint16_t port, bool listen,
               std::chrono::milliseconds timeout) {
  return {api, (listen ? "listen on " : "connect to ") + show_host(host, port), timeout};
}

} // namespace

result<std::vector<std::byte>> exchange(std::string_view host, std::uint16_t port, bool listen,
                                        std::span<const std::byte> mine,
                                        std::chrono::milliseconds timeout) {
  detail::clear_error_detail();
  const call c = make_call("oob::exchange", host, port, listen, timeout);
  if (mine.size() > max_blob)
    return fail(c, errc::over_limit,
                ": our blob is " + std::to_string(mine.size()) + " bytes, over max_blob (" +
                    std::to_string(max_blob) + ")");
  const auto deadline = detail::deadline(timeout);
  auto st = open_stream(c, host, port, listen, max_blob, deadline);
  if (!st)
    return st.error();
  oob_stream &s = **st;
  if (listen) {
    auto theirs = receive_frame(s, c, deadline); // the blob that chose this peer
    if (auto e = send_frame(s, c, mine, deadline); !e.ok())
      return e;
    return theirs;
  }
  if (auto e = send_frame(s, c, mine, deadline); !e.ok())
    return e;
  return receive_frame(s, c, deadline);
}

// ---- connection ----

connection::connection() noexcept = default;
connection::connection(std::unique_ptr<detail::oob_stream> s) noexcept : s_(std::move(s)) {}
connection::connection(connection &&) noexcept = default;
connection &connection::operator=(connection &&) noexcept = default;
connection::~connection() = default;

result<connection> connection::open(const char *api, std::string_view host, std::uint16_t port,
                                    bool listen, std::chrono::milliseconds timeout,
                                    std::size_t max_size) {
  detail::clear_error_detail();
  const call c = make_call(api, host, port, listen, timeout);
  auto st = open_stream(c, host, port, listen, max_size, detail::deadline(timeout));
  if (!st)
    return st.error();
  return connection(std::move(*st));
}

result<connection> connection::listen(std::string_view host, std::uint16_t port,
                                      std::chrono::milliseconds timeout, std::size_t max_size) {
  return open("oob::connection::listen", host, port, true, timeout, max_size);
}

result<connection> connection::connect(std::string_view host, std::uint16_t port,
                                       std::chrono::milliseconds timeout, std::size_t max_size) {
  return open("oob::connection::connect", host, port, false, timeout, max_size);
}

result<void> connection::send(std::span<const std::byte> blob, std::chrono::milliseconds timeout) {
  detail::clear_error_detail();
  if (!s_)
    return errc::empty_object; // no RDMA involved: never the stack's condition
  const call c{"oob::connection::send", s_->where, timeout};
  return send_frame(*s_, c, blob, detail::deadline(timeout));
}

result<void> connection::flush(std::chrono::milliseconds timeout) {
  detail::clear_error_detail();
  if (!s_)
    return errc::empty_object; // no RDMA involved: never the stack's condition
  if (s_->out_stop.code)
    return stopped(s_->out_stop);
  const call c{"oob::connection::flush", s_->where, timeout};
  return flush_out(*s_, c, detail::deadline(timeout));
}

result<std::vector<std::byte>> connection::receive(std::chrono::milliseconds timeout) {
  detail::clear_error_detail();
  if (!s_)
    return errc::empty_object; // no RDMA involved: never the stack's condition
  const call c{"oob::connection::receive", s_->where, timeout};
  return receive_frame(*s_, c, detail::deadline(timeout));
}

std::size_t connection::max_size() const noexcept {
  return s_ ? s_->in.limit() : max_blob;
}

int connection::native_handle() const noexcept {
  return s_ ? s_->fd.get() : -1;
}

} // namespace rdmadl::oob

// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include "cm_rendezvous.hpp"

#include <cerrno>
#include <netinet/in.h>
#include <sys/socket.h>

namespace rdmadl::detail {

result<rendezvous_reply> rendezvous_connect(const sockaddr_storage &addr, const cm_rendezvous &mine,
                                            std::chrono::steady_clock::time_point deadline,
                                            const char **step, std::uint32_t *refusal) {
  *step = "rendezvous: connect";
  rendezvous_reply out;
  out.fd.reset(::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int fd = out.fd.get();
  if (fd < 0)
    return sys_error(errno);
  if (::connect(fd, reinterpret_cast<const sockaddr *>(&addr), sockaddr_len(addr)) != 0) {
    if (errno != EINPROGRESS)
      return sys_error(errno);
    if (auto ec = wait_writable(fd, deadline))
      return ec;
    int err = 0;
    socklen_t elen = sizeof err;
    (void)::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
    if (err)
      return sys_error(err);
  }
  *step = "rendezvous: send the rank";
  if (auto r = rendezvous_send(fd, mine, deadline); !r)
    return r.error();
  // Exactly the answer's bytes: what follows is the TCP engine's.
  *step = "rendezvous: the answer";
  std::array<std::byte, cm_rendezvous_size> got{};
  for (std::size_t off = 0; off < got.size();) {
    const ssize_t n = ::recv(fd, got.data() + off, got.size() - off, 0);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
    } else if (n == 0) {
      return std::errc::connection_reset;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (auto ec = wait_readable(fd, deadline))
        return ec;
    } else {
      return sys_error(errno);
    }
  }
  auto answer = parse_cm_rendezvous(got);
  if (!answer)
    return answer.error();
  if (answer->value != 0) {
    *refusal = answer->value;
    return errc::rank_refused;
  }
  out.answer = *answer;
  return out;
}

result<void> rendezvous_answer(int fd, const cm_rendezvous &answer) {
  const auto frame = encode(answer);
  const ssize_t n = ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0)
    return sys_error(errno);
  if (static_cast<std::size_t>(n) != frame.size())
    return std::errc::connection_reset;
  return {};
}

result<void> rendezvous_send(int fd, const cm_rendezvous &frame,
                             std::chrono::steady_clock::time_point deadline) {
  const auto bytes = encode(frame);
  for (std::size_t off = 0; off < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (auto ec = wait_writable(fd, deadline))
        return ec;
    } else {
      return sys_error(errno);
    }
  }
  return {};
}

void rendezvous_desk::expect(fd_guard fd, std::size_t peer) {
  waiting_.push_back({std::move(fd), {}, 0, peer});
}

void rendezvous_desk::take(std::vector<arrival> &out) {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      break;
    fd_guard g(fd);
    if (waiting_.size() < max_) // more strangers than that: refused (closed)
      waiting_.push_back({std::move(g), {}, 0, SIZE_MAX});
  }
  for (std::size_t i = 0; i < waiting_.size();) {
    auto &w = waiting_[i];
    // Exactly the frame's bytes: what follows is the TCP engine's.
    const ssize_t n = ::recv(w.fd.get(), w.buf.data() + w.off, w.buf.size() - w.off, 0);
    bool drop = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    if (n > 0)
      w.off += static_cast<std::size_t>(n);
    if (!drop && w.off == w.buf.size()) {
      auto frame = parse_cm_rendezvous(w.buf);
      out.push_back({std::move(w.fd), frame ? std::optional(*frame) : std::nullopt, w.peer});
      drop = true;
    } else if (drop && w.peer != SIZE_MAX) { // an awaited outcome that cannot come
      out.push_back({std::move(w.fd), std::nullopt, w.peer});
    }
    if (drop) {
      waiting_[i] = std::move(waiting_.back());
      waiting_.pop_back();
    } else {
      i++;
    }
  }
}

void rendezvous_desk::watch(std::vector<pollfd> &out) const {
  out.push_back({listen_fd_, POLLIN, 0});
  for (const auto &w : waiting_)
    out.push_back({w.fd.get(), POLLIN, 0});
}

} // namespace rdmadl::detail

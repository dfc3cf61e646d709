// SPDX-License-Identifier: MIT
// multi_channel::create_cm's TCP rendezvous (its frame: cm_hello.hpp). With a
// transport other than rdma, the connecting side opens TCP to the
// listener's TCP socket, sends its rank and what it can do, and reads the
// answer: the accepting side's caps, or why it refused the rank. Both then
// choose as multi_channel::connect() does: RDMA when both offer it (the
// connecting side then runs rdma_cm's connect as before), else TCP, when
// that connection itself becomes the peer's (tcp_engine::peer_setup::fd).
#ifndef RDMADL_SRC_CM_RENDEZVOUS_HPP
#define RDMADL_SRC_CM_RENDEZVOUS_HPP

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <poll.h>
#include <sys/socket.h>
#include <vector>

#include "cm_hello.hpp"
#include "fd.hpp"
#include "rdmadl/error.hpp"

namespace rdmadl::detail {

// What the connecting side learnt: the connection (the peer's, over TCP)
// and the accepting side's answer.
struct rendezvous_reply {
  fd_guard fd;
  cm_rendezvous answer;
};

// Connects to addr, sends mine and reads the answer, all before deadline;
// *step names the step that failed. Errors: the errno of socket(2) or
// connect(2) (std::errc::connection_refused: nothing listens there for
// TCP), errc::timed_out, std::errc::connection_reset (the connection
// closed before a whole answer), an answer's parse errors (errc::bad_size,
// bad_magic, newer_format, bad_blob), errc::rank_refused (answer.value
// says why, in *refusal).
result<rendezvous_reply> rendezvous_connect(const sockaddr_storage &addr, const cm_rendezvous &mine,
                                            std::chrono::steady_clock::time_point deadline,
                                            const char **step, std::uint32_t *refusal);

// Sends the answer to a rendezvous without blocking (16 bytes on a fresh
// connection: the socket takes them). Errors: the errno of send(2),
// std::errc::connection_reset for a short send.
result<void> rendezvous_answer(int fd, const cm_rendezvous &answer);

// Sends frame whole on fd (non-blocking), waiting for room until deadline.
// Errors: the errno of send(2), errc::timed_out.
result<void> rendezvous_send(int fd, const cm_rendezvous &frame,
                             std::chrono::steady_clock::time_point deadline);

// The accepting side's connections whose frame has not all come yet.
class rendezvous_desk {
public:
  // A connection whose frame came whole, and the frame (none: malformed).
  // For a connection given to expect(), peer is its peer, and one that
  // closed or failed first arrives too, without a frame; a new one's peer is
  // SIZE_MAX.
  struct arrival {
    fd_guard fd;
    std::optional<cm_rendezvous> frame;
    std::size_t peer = SIZE_MAX;
  };
  // Takes connections from listen_fd (non-blocking), at most max_pending
  // waiting at once (more are closed).
  rendezvous_desk(int listen_fd, std::size_t max_pending) noexcept
      : listen_fd_(listen_fd), max_(max_pending) {}
  // Accepts what the listener has and reads what the connections sent,
  // without blocking; appends those whose frame is whole to out. One that
  // closes or fails before is dropped.
  void take(std::vector<arrival> &out);
  // The descriptors to wait on for take() (the listener and every waiting
  // connection, for input), appended to out.
  void watch(std::vector<pollfd> &out) const;
  // Waits for peer's next frame on fd (the outcome of its rdma_cm connect),
  // reported by take(); not counted against max_pending.
  void expect(fd_guard fd, std::size_t peer);

private:
  struct waiting {
    fd_guard fd;
    std::array<std::byte, cm_rendezvous_size> buf{};
    std::size_t off = 0;
    std::size_t peer = SIZE_MAX;
  };
  int listen_fd_;
  std::size_t max_;
  std::vector<waiting> waiting_;
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_CM_RENDEZVOUS_HPP

// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/completion_channel.hpp - completion channels: a file descriptor that becomes
/// readable when an armed completion queue gets a completion.
#ifndef RDMADL_COMPLETION_CHANNEL_HPP
#define RDMADL_COMPLETION_CHANNEL_HPP

#include <chrono>
#include <memory>

#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/fwd.hpp"

namespace rdmadl {

/// A completion channel (ibv_create_comp_channel). Its fd is non-blocking and
/// can go into epoll/poll. Every event taken is acknowledged at once, so
/// destroying the queues never waits for unacknowledged events. Keeps its
/// context alive; destroyed when it and the queues using it are gone.
/// Move-only.
class RDMADL_CXX_API completion_channel {
public:
  /// Creates a channel on ctx. Errors: operation_not_supported,
  /// errc::empty_object, or the errno.
  static result<completion_channel> create(const context &ctx);

  /// An empty channel.
  completion_channel() noexcept = default;
  /// Moves; the source becomes empty.
  completion_channel(completion_channel &&o) noexcept = default;
  /// Moves; the source becomes empty and this handle's former channel is
  /// released (destroyed when no queue uses it).
  completion_channel &operator=(completion_channel &&o) noexcept = default;
  /// Releases this handle; the channel is destroyed with its last queue.
  ~completion_channel() = default;

  /// The file descriptor (readable when an event is pending), -1 when empty.
  int fd() const noexcept;
  /// Waits up to timeout (milliseconds::max(): no limit) for one event, takes
  /// and acknowledges it, and returns the queue it is for (re-arm it with
  /// request_notify() before polling it empty). Errors: errc::timed_out,
  /// errc::empty_object, or the errno.
  result<::ibv_cq *> wait(std::chrono::milliseconds timeout) const;

  /// The rdma-core channel; null when empty.
  ::ibv_comp_channel *native_handle() const noexcept { return ch_; }
  /// False for an empty (default-constructed or moved-from) channel.
  explicit operator bool() const noexcept { return ch_.get() != nullptr; }

private:
  friend struct detail::access;
  detail::take<::ibv_comp_channel *> ch_;
  std::shared_ptr<detail::channel_node> n_;
};

} // namespace rdmadl

#endif // RDMADL_COMPLETION_CHANNEL_HPP

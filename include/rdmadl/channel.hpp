// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/channel.hpp - a channel to one peer: a multi_channel of one, with
/// the peer index left out of every call.
///
/// @code
/// auto ch = channel::create(ctx).value();
/// send_to_peer(ch.local_endpoint().value());  // out of band
/// ch.handshake(endpoint_from_peer()).value();
/// ch.send(*mr.slice(0, 64), 1s).value();
/// @endcode
#ifndef RDMADL_CHANNEL_HPP
#define RDMADL_CHANNEL_HPP

#include <chrono>
#include <cstdint>

#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/memory.hpp"
#include "rdmadl/multi_channel.hpp"
#include "rdmadl/qp.hpp"

namespace rdmadl {

/// One peer: a multi_channel of one.
class RDMADL_CXX_API channel {
public:
  /// multi_channel::create() with one peer (opts.peers is ignored).
  static result<channel> create(const context &ctx, channel_options opts = {});
  /// multi_channel::create(const channel_options &) with one peer: a
  /// transport-neutral channel (RDMA when both sides can, else TCP, as
  /// opts.transport allows). Exchange local_channel_endpoint().
  static result<channel> create(channel_options opts);
  /// multi_channel::create_cm with exactly one peer (one address, or accept
  /// == 1); else errc::no_peers (none) or errc::one_peer_only (more). Events:
  /// base().next_cm_event().
  static result<channel> create_cm(listener *accept_from, const cm_channel_options &opts);
  /// An empty channel.
  channel() noexcept = default;
  /// @name As multi_channel's, for peer 0
  /**@{*/
  /// The multi_channel member of the same name, for the one peer.
  result<endpoint> local_endpoint() const { return mc_.local_endpoint(0); }
  result<void> handshake(const endpoint &remote) { return mc_.handshake({&remote, 1}); }
  /// multi_channel::channel_endpoints()' only entry: what to give the peer.
  result<channel_endpoint> local_channel_endpoint() const {
    auto all = mc_.channel_endpoints();
    if (!all)
      return all.error();
    return all->front();
  }
  result<void> connect(const channel_endpoint &remote) { return mc_.connect({&remote, 1}); }
  /// multi_channel::transport_of(0).
  channel_transport transport() const noexcept { return mc_.transport_of(0); }
  std::string describe() const { return mc_.describe(0); }
  bool connected() const noexcept { return mc_.connected(); }
  const protection_domain &pd() const noexcept { return mc_.pd(); }
  polling_scope scope() noexcept { return mc_.scope(); }
  result<void> send(const local_slice &buf, std::chrono::milliseconds timeout) {
    return mc_.send(0, buf, timeout);
  }
  result<std::uint32_t> receive(const local_slice &buf, std::chrono::milliseconds timeout) {
    return mc_.receive(0, buf, timeout);
  }
  result<void> write(const local_slice &buf, const remote_region &dst,
                     std::chrono::milliseconds timeout) {
    return mc_.write(0, buf, dst, timeout);
  }
  result<void> read(const local_slice &buf, const remote_region &src,
                    std::chrono::milliseconds timeout) {
    return mc_.read(0, buf, src, timeout);
  }
  result<std::uint32_t> send_receive(const local_slice &out, const local_slice &in,
                                     std::chrono::milliseconds timeout) {
    return mc_.send_receive(0, out, 0, in, timeout);
  }
  /**@}*/
  /// The multi_channel of one peer underneath (its qp(0), cq(), rdma_cm events).
  multi_channel &base() noexcept { return mc_; }

private:
  // MC as a channel, or MC's error (create and create_cm end here).
  static result<channel> wrap(result<multi_channel> mc);

  multi_channel mc_;
};

} // namespace rdmadl

#endif // RDMADL_CHANNEL_HPP

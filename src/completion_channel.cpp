// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <utility>

#include "detail.hpp"
#include "fd.hpp"
#include "nodes.hpp"
#include "rdmadl/completion_channel.hpp"

namespace rdmadl {

result<completion_channel> completion_channel::create(const context &ctx) {
  if (!ctx)
    return detail::rdma_error(errc::empty_object);
  ibv_comp_channel *ch = ibv_create_comp_channel(ctx.native_handle());
  if (!ch)
    return detail::rdma_error();
  auto n = std::make_shared<detail::channel_node>();
  n->ch = ch;
  n->ctx = detail::access::node(ctx);
  if (auto ec = detail::set_nonblocking(ch->fd))
    return ec; // n destroys the channel
  return detail::access::make<completion_channel>(std::move(n));
}

int completion_channel::fd() const noexcept {
  return ch_ ? ch_.get()->fd : -1;
}

result<ibv_cq *> completion_channel::wait(std::chrono::milliseconds timeout) const {
  if (!ch_)
    return detail::rdma_error(errc::empty_object);
  ibv_cq *cq = nullptr;
  void *cq_ctx = nullptr;
  if (auto ec = detail::take_when_readable(ch_.get()->fd, detail::deadline(timeout), [&] {
        return ibv_get_cq_event(ch_, &cq, &cq_ctx) == 0;
      }))
    return ec;
  ibv_ack_cq_events(cq, 1);
  return cq;
}

} // namespace rdmadl

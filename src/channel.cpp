// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <utility>

#include "rdmadl/channel.hpp"

namespace rdmadl {

result<channel> channel::create(const context &ctx, channel_options opts) {
  opts.peers = 1;
  return wrap(multi_channel::create(ctx, opts));
}

result<channel> channel::create(channel_options opts) {
  opts.peers = 1;
  return wrap(multi_channel::create(opts));
}

result<channel> channel::wrap(result<multi_channel> mc) {
  if (!mc)
    return mc.error();
  channel c;
  c.mc_ = std::move(*mc);
  return c;
}

} // namespace rdmadl

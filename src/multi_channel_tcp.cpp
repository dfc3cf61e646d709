// SPDX-License-Identifier: MIT
// Transport-neutral multi_channels: creation without a context, the
// channel_endpoint exchange, and the per-peer choice between RDMA and TCP
// (the TCP engine itself: src/tcp_engine.cpp).
#include "rdmadl_verbs.h"

#include <arpa/inet.h>
#include <cstring>
#include <netinet/in.h>
#include <random>

#include "channel_state.hpp"
#include "detail.hpp"
#include "log.h"
#include "nodes.hpp"
#include "rdmadl/loader.h"
#include "rdmadl/multi_channel.hpp"
#include "rdmadl/runtime.hpp"

namespace rdmadl {

namespace {
// A random token, never 0.
std::uint64_t fresh_token() {
  std::random_device rd;
  std::uint64_t t = 0;
  while (t == 0)
    t = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return t;
}

// The sockaddr of e's listener.
detail::tcp_engine::peer_setup setup_of(const channel_endpoint &e) noexcept {
  detail::tcp_engine::peer_setup s;
  s.tcp = true;
  s.theirs = e.token;
  if (e.family == 6) {
    auto *a = reinterpret_cast<sockaddr_in6 *>(&s.addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(e.port);
    std::memcpy(&a->sin6_addr, e.address.data(), 16);
    s.addr_len = sizeof *a;
  } else {
    auto *a = reinterpret_cast<sockaddr_in *>(&s.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(e.port);
    std::memcpy(&a->sin_addr, e.address.data(), 4);
    s.addr_len = sizeof *a;
  }
  return s;
}
} // namespace

result<multi_channel> multi_channel::create(const channel_options &opts) {
  if (opts.peers == 0)
    return errc::no_peers;
  multi_channel mc;
  std::string no_rdma;
  if (opts.transport != channel_transport::tcp) {
    auto ctx = context::open(opts.device);
    result<multi_channel> made = ctx ? [&] {
      channel_options o = opts;
      o.transport = channel_transport::rdma;
      return create(*ctx, o);
    }()
                                     : result<multi_channel>(ctx.error());
    if (made) {
      mc = std::move(*made);
    } else if (opts.transport == channel_transport::rdma) {
      return made.error();
    } else {
      no_rdma =
          stack() == stack_state::ready ? made.error().message() : std::string(diagnose().sentence);
    }
  } else {
    no_rdma = "the channel's transport is tcp";
  }
  if (!mc.s_) { // TCP only: a software PD, no CQ, no queue pairs
    auto s = std::make_shared<detail::channel_state>();
    s->pd = detail::software_pd();
    s->peer_state.assign(opts.peers, 0);
    s->conn = opts.connect;
    s->limit = opts.scope_limit;
    mc.adopt(std::move(s));
  }
  auto &s = *mc.s_;
  s.allowed = opts.transport;
  s.no_rdma = std::move(no_rdma);
  s.over_tcp.assign(opts.peers, 0);
  for (auto &st : s.peer_state) // posts go out of line, where TCP is known
    st |= detail::channel_core::k_neutral;
  s.set_ready();
  s.why.assign(opts.peers, {});
  for (std::size_t i = 0; i < opts.peers; i++)
    s.tokens.push_back(fresh_token());
  if (opts.transport != channel_transport::rdma) {
    auto e =
        detail::tcp_engine::listen(opts.tcp_address, opts.tcp_port, opts.peers,
                                   detail::access::node(s.pd), opts.send_depth, opts.recv_depth);
    if (!e)
      return e.error();
    (*e)->keep_alive(opts.connect.transport.ack_timeout, opts.connect.transport.retry_count);
    s.tcp = std::move(*e);
  }
  return mc;
}

result<std::vector<channel_endpoint>> multi_channel::channel_endpoints() const {
  detail::clear_error_detail();
  if (!s_)
    return detail::rdma_error(errc::empty_object);
  auto &s = *s_;
  while (s.tokens.size() < s.peers()) // a channel made with a context
    s.tokens.push_back(fresh_token());
  std::vector<endpoint> rdma;
  if (!s.qps.empty() && s.allowed != channel_transport::tcp) {
    auto r = local_endpoints();
    if (!r)
      return r.error();
    rdma = std::move(*r);
  }
  std::vector<channel_endpoint> out(s.peers());
  for (std::size_t i = 0; i < out.size(); i++) {
    auto &e = out[i];
    if (!rdma.empty()) {
      e.caps |= channel_endpoint::can_rdma;
      e.rdma = rdma[i];
    }
    if (s.tcp)
      s.tcp->advertise(e);
    e.token = s.tokens[i];
  }
  return out;
}

result<void> multi_channel::connect(std::span<const channel_endpoint> remote) {
  detail::clear_error_detail();
  if (!s_)
    return detail::rdma_error(errc::empty_object);
  auto &s = *s_;
  const std::size_t n = s.peers();
  if (remote.size() != n)
    return detail::fail(
        errc::endpoint_count,
        detail::format("multi_channel::connect: %zu endpoints for %zu peers", remote.size(), n));
  if (s.tcp_started)
    return detail::fail(std::errc::already_connected,
                        "multi_channel::connect: its TCP peers are connected already");
  while (s.tokens.size() < n) // a channel made with a context: RDMA only
    s.tokens.push_back(fresh_token());
  const bool rdma_here = !s.qps.empty() && s.allowed != channel_transport::tcp;
  std::vector<detail::tcp_engine::peer_setup> setups(n);
  bool any_tcp = false;
  for (std::size_t i = 0; i < n; i++) {
    const auto &r = remote[i];
    const bool rdma_there = r.caps & channel_endpoint::can_rdma;
    if (r.token == s.tokens[i])
      return detail::fail(errc::bad_blob,
                          detail::format("multi_channel::connect: peer %zu: its token is ours "
                                         "(our own endpoint given back?)",
                                         i));
    if (rdma_here && rdma_there)
      continue;
    if (!s.tcp || !(r.caps & channel_endpoint::can_tcp))
      return detail::fail(
          errc::no_common_transport,
          detail::format("multi_channel::connect: peer %zu: %s", i,
                         !s.tcp ? "it offers no RDMA this side can use, and this side's "
                                  "transport is rdma"
                                : "it offers no TCP, and no RDMA this side can use"));
    setups[i] = setup_of(r);
    setups[i].mine = s.tokens[i];
    any_tcp = true;
  }
  for (std::size_t i = 0; i < n; i++)
    if (!setups[i].tcp)
      if (auto c = s.qps[i].connect(remote[i].rdma, s.conn); !c) {
        detail::set_error_detail(detail::format("multi_channel::connect: peer %zu: ", i) +
                                 std::string(last_error_detail()));
        return c;
      }
  s.why.resize(n); // (a channel made with a context has none yet)
  for (std::size_t i = 0; i < n; i++)
    (void)s.choose(i, rdma_here, !setups[i].tcp);
  if (any_tcp) {
    if (auto st = s.tcp->start(std::move(setups)); !st.ok())
      return st;
    s.tcp_started = true;
  }
  s.connected = true;
  return {};
}

bool detail::channel_state::choose(std::size_t peer, bool rdma_here, bool rdma_there,
                                   std::string_view rdma_failed) {
  if (rdma_here && rdma_there) {
    why[peer] = detail::format("peer %zu over RDMA", peer);
    return false;
  }
  over_tcp[peer] = 1;
  if (!rdma_failed.empty())
    why[peer] = detail::format("peer %zu over TCP: %.*s", peer,
                               static_cast<int>(rdma_failed.size()), rdma_failed.data());
  else if (!rdma_here)
    why[peer] =
        detail::format("peer %zu over TCP: this host has no RDMA: %s", peer, no_rdma.c_str());
  else
    why[peer] =
        detail::format("peer %zu over TCP: its host has no RDMA (or its transport is tcp)", peer);
  rdmadl_log_emit(RDMADL_LOG_WARN, "multi_channel: %s", why[peer].c_str());
  return true;
}

channel_transport multi_channel::transport_of(std::size_t peer) const noexcept {
  return s_ && peer < s_->over_tcp.size() && s_->over_tcp[peer] ? channel_transport::tcp
                                                                : channel_transport::rdma;
}

std::string multi_channel::describe(std::size_t peer) const {
  if (!s_ || peer >= s_->peers())
    return detail::format("peer %zu: no such peer", peer);
  if (peer >= s_->why.size() || s_->why[peer].empty())
    return detail::format("peer %zu: not connected yet", peer);
  std::string out = s_->why[peer];
  if (s_->tcp && s_->over_tcp[peer])
    if (auto f = s_->tcp->failure(peer); !f.empty())
      out += "; failed: " + f;
  return out;
}

} // namespace rdmadl

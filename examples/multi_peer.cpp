// SPDX-License-Identifier: MIT
// A hub talking to three peers through one multi_channel: it multicasts a
// question and gathers the answers, with each peer's outcome. The peers are channels on the same
// device here; across machines they would trade the same endpoint lists with oob::exchange, or
// connect through rdma_cm as --cm does. Usage: rdmadl-example-multi-peer [--cm
// ADDRESS-OF-THE-RDMA-DEVICE]
#include <array>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <rdmadl/rdmadl.hpp>

using namespace rdmadl;
using namespace std::chrono_literals;

int main(int argc, char **argv) {
  constexpr std::size_t n = 3, len = 64;
  auto ctx = context::open();
  if (!ctx)
    return std::printf("no RDMA: %s\n", ctx.error().message().c_str()), 1;
  multi_channel hub;
  channel peer[n];
  if (argc > 2 && std::string(argv[1]) == "--cm") {
    // rdma_cm: the hub accepts n peers; peer i connects with rank i, so it
    // becomes the hub's peer i whatever the order of arrival.
    auto lst = listener::bind(argv[2], 0).value();
    cm_channel_options accept;
    accept.accept = n;
    std::thread hub_side([&] { hub = multi_channel::create_cm(&lst, accept).value(); });
    for (std::size_t i = 0; i < n; i++) {
      cm_channel_options o;
      o.connect = {{argv[2], lst.port()}};
      o.rank = static_cast<std::uint32_t>(i);
      peer[i] = channel::create_cm(nullptr, o).value();
    }
    hub_side.join();
  } else {
    channel_options opts;
    opts.peers = n;
    hub = multi_channel::create(*ctx, opts).value();
    // Out of band: the hub's entry i goes to peer i, peer i's endpoint to the hub.
    std::vector<endpoint> theirs;
    for (std::size_t i = 0; i < n; i++) {
      peer[i] = channel::create(*ctx).value();
      peer[i].handshake(hub.local_endpoint(i).value()).value();
      theirs.push_back(peer[i].local_endpoint().value());
    }
    hub.handshake(theirs).value();
  }

  char hub_buf[n][len] = {"what is your number?"}, peer_buf[n][len] = {};
  auto hub_mr = hub.pd().register_memory(std::as_writable_bytes(std::span(hub_buf))).value();
  std::vector<std::thread> peers; // each peer answers the question it receives
  for (std::size_t i = 0; i < n; i++)
    peers.emplace_back([&, i] {
      auto mine = std::as_writable_bytes(std::span(peer_buf[i]));
      auto mr = peer[i].pd().register_memory(mine).value();
      peer[i].receive(*mr.all(), 5s).value();
      std::snprintf(peer_buf[i], len, "peer %zu says %zu", i, 10 * (i + 1));
      peer[i].send(*mr.all(), 5s).value();
    });
  hub.multicast_send(std::array<std::size_t, n>{0, 1, 2}, *hub_mr.slice(0, len), 5s).value();
  std::vector<multi_channel::part> parts;
  for (std::size_t i = 0; i < n; i++)
    parts.push_back({i, *hub_mr.slice(i * len, len), {}});
  std::array<work_result, n> got; // each part's peer, status and length
  auto r = hub.gather_receive(parts, 5s, got);
  for (auto &t : peers)
    t.join();
  if (!r)
    std::printf("gather failed: %s\n", r.error().message().c_str());
  int wrong = !r;
  for (std::size_t i = 0; i < n; i++) {
    std::printf("hub got %u bytes from peer %zu: %s\n", got[i].byte_len, got[i].peer, hub_buf[i]);
    wrong += std::string(hub_buf[i]) !=
             "peer " + std::to_string(i) + " says " + std::to_string(10 * (i + 1));
  }
  return wrong;
}

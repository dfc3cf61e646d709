// SPDX-License-Identifier: MIT
// cxx_device: the C++ API against a real device, a guest program of the
// Soft-RoCE VM tier (tests/guest/programs.txt). What its parts share: the
// device and address under test, the EXPECT macros, a report line per check,
// byte patterns, and two queue pairs connected to each other on one device.
// Each check returns true when it passed; main() prints
// "RDMADL-CHECK cxx-<name> PASS|FAIL" for it.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "rdmadl/rdmadl.hpp"

namespace cxx_device {

using namespace rdmadl;
using namespace std::chrono_literals;

extern int failures;
extern bool plain_cqs; // make_loop: ibv_create_cq even where extended CQs work
extern std::string dev_name;
extern std::uint32_t test_ip;

#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "  %s:%d: expected %s\n", __FILE__, __LINE__, #cond);                   \
      return false;                                                                                \
    }                                                                                              \
  } while (0)
// Evaluates r once (a failed commit() must not be committed again).
#define EXPECT_OK(r)                                                                               \
  do {                                                                                             \
    const auto &expect_ok_r_ = (r);                                                                \
    if (!expect_ok_r_) {                                                                           \
      std::fprintf(stderr, "  %s:%d: %s failed: %s\n", __FILE__, __LINE__, #r,                     \
                   expect_ok_r_.error().message().c_str());                                        \
      return false;                                                                                \
    }                                                                                              \
  } while (0)
#define TRY(var, expr)                                                                             \
  auto var = (expr);                                                                               \
  EXPECT_OK(var)

// Prints the check's line; a failure makes the exit status 1.
void report(const char *name, bool ok);
// A byte pattern per seed, and whether two buffers hold the same bytes.
void fill(std::span<std::byte> b, unsigned seed);
bool same(std::span<const std::byte> a, std::span<const std::byte> b);
// Waits for one completion and checks it succeeded.
result<completion> one(completion_queue &cq, std::chrono::milliseconds t = 5000ms);
// Queue-pair options whose GID is the test address's.
qp_options test_qp_options();
// The test address as text: the client side of rdma_cm (loopback without one).
std::string cm_host();

// Two queue pairs of one type on the test device, connected to each other.
struct loop {
  context ctx;
  protection_domain pd;
  completion_queue cq_a, cq_b;
  queue_pair a, b;
};
result<loop> make_loop(qp_type type = qp_type::rc, qp_options base = {},
                       const completion_channel *ch = nullptr,
                       const shared_receive_queue *srq_b = nullptr, loop *reuse = nullptr);

// A loop whose cq_b reports to a completion channel of the same context.
struct channel_loop {
  completion_channel ch;
  loop l;
};
result<channel_loop> make_channel_loop();

// cxx_device_verbs.cpp: one device's objects, queue pairs and completions.
bool check_probe();
bool check_device();
bool check_gid_select();
bool check_memory_bounds();
bool check_send_recv(qp_type type);
bool check_imm(bool write);
bool check_write_read();
bool check_dmabuf();
bool check_atomics();
bool check_ud();
bool check_srq();
bool check_batch_poll();
bool check_comp_channel();
bool check_send_batch(bool wr_api);
bool check_endpoint_errors();
bool check_peer_mismatch();
bool check_lifetimes();
bool check_batch_guard();
bool check_prepared();
bool check_poll_session();
bool check_waits_saturate();
bool check_async_events();
bool check_mixed_posts();
bool check_peer_exit();
// cxx_device_cm.cpp: connection and listener over rdma_cm.
bool check_cm();
bool check_cm_ack_timeout();
bool check_cm_reject();
// cxx_device_multi_channel.cpp: multi_channel over queue pairs and rdma_cm.
bool check_multi_channel();
bool check_cm_multi_channel();
bool check_cm_accept_deadline();
bool check_cm_mesh();
// cxx_device_churn.cpp: connect/transfer/disconnect cycles leave nothing
// behind (churn_cycles of them: 1000, or main's second argument).
extern int churn_cycles;
bool check_churn_verbs();
bool check_churn_cm();
bool check_churn_cm_channel();
bool check_churn_channel();
bool check_churn_multi_channel();
// cxx_device_exhaustion.cpp: QPs, CQs and MRs until the rdma cgroup says no,
// pinned memory until RLIMIT_MEMLOCK does (changes this process for good).
bool check_exhaustion();
// cxx_device_peer_death.cpp: peers killed in each phase of a connection.
bool check_peer_death();

} // namespace cxx_device

// SPDX-License-Identifier: MIT
// With no RDMA stack (RDMADL_DISABLE=1, or a library path that does not
// exist), every public operation fails with operation_not_supported.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {
const std::error_code enotsup = std::make_error_code(std::errc::operation_not_supported);

template <class T> void not_supported(const result<T> &r, const char *what) {
  INFO(what);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error() == std::errc::operation_not_supported);
  CHECK(r.error().value() != 0);
}
#define NOT_SUPPORTED(expr) not_supported((expr), #expr)

// The number of symbols each library has in the one table (loader/symbols.def).
constexpr int rdmadl_is_IBV = 1, rdmadl_is_CM = 0;
constexpr std::size_t ibverbs_symbols = 0
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) +rdmadl_is_##lib
#include "symbols.def"
#undef RDMADL_SYM
    ;
constexpr std::size_t rdmacm_symbols = 0
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args) +(1 - rdmadl_is_##lib)
#include "symbols.def"
#undef RDMADL_SYM
    ;
static_assert(ibverbs_symbols > 0 && rdmacm_symbols > 0);

// Set by the tier that runs this test against a real rdma-core release with
// no override: the library loads, the kernel has no RDMA.
bool real_library() {
  return std::getenv("RDMADL_EXPECT_NO_KERNEL") != nullptr;
}

bool disabled_by_env() {
  const char *d = std::getenv("RDMADL_DISABLE");
  return d && std::strcmp(d, "1") == 0;
}
} // namespace

TEST_CASE("absent: runtime reports no stack and why") {
  if (real_library()) {
    CHECK(available());
    CHECK(stack() == stack_state::no_kernel_support);
    CHECK_FALSE(reason().empty());
    CHECK(status(library::ibverbs).state != library_state::not_found);
    CHECK(status(library::ibverbs).symbol_count == ibverbs_symbols);
    return;
  }
  REQUIRE_FALSE(available());
  auto st = stack();
  CHECK((st == stack_state::disabled || st == stack_state::no_library));
  CHECK(st == (disabled_by_env() ? stack_state::disabled : stack_state::no_library));
  CHECK_FALSE(reason().empty());
  auto s = status(library::ibverbs);
  CHECK(s.state == (disabled_by_env() ? library_state::disabled : library_state::not_found));
  CHECK(s.path.empty());
  CHECK(s.missing.size() == s.symbol_count);
  CHECK(s.symbol_count == ibverbs_symbols);
  CHECK(status(library::rdmacm).symbol_count == rdmacm_symbols);
  for (feature f : all_features) {
    INFO(name(f));
    CHECK_FALSE(supports(f));
  }
}

TEST_CASE("absent: device discovery fails with operation_not_supported") {
  NOT_SUPPORTED(device_list::get());
  NOT_SUPPORTED(context::open());
  NOT_SUPPORTED(context::open("rxe0"));
  NOT_SUPPORTED(event_channel::create());
  NOT_SUPPORTED(listener::bind("", 0));
  NOT_SUPPORTED(listener::bind("127.0.0.1", 7471));
  NOT_SUPPORTED(connect("127.0.0.1", 7471));
  context none;
  NOT_SUPPORTED(context::open(device(nullptr)));
  CHECK_FALSE(none.supports(feature::extended_cq));
}

TEST_CASE("absent: every object operation fails with operation_not_supported") {
  context ctx;
  NOT_SUPPORTED(ctx.query_device());
  NOT_SUPPORTED(ctx.query_port(1));
  NOT_SUPPORTED(ctx.first_active_port());
  NOT_SUPPORTED(ctx.gid_table(1));
  NOT_SUPPORTED(ctx.select_gid(1));
  NOT_SUPPORTED(protection_domain::create(ctx));
  NOT_SUPPORTED(completion_channel::create(ctx));
  NOT_SUPPORTED(completion_queue::create(ctx));

  protection_domain pd;
  std::array<std::byte, 64> buf{};
  NOT_SUPPORTED(pd.register_memory(buf));
  NOT_SUPPORTED(pd.register_memory(buf, access::remote_write | access::remote_read));
  NOT_SUPPORTED(shared_receive_queue::create(pd));

  memory_region mr;
  NOT_SUPPORTED(mr.all());
  NOT_SUPPORTED(mr.slice(0, 8));
  NOT_SUPPORTED(mr.remote());

  completion_queue cq;
  std::array<completion, 4> wc;
  NOT_SUPPORTED(cq.poll(wc));
  NOT_SUPPORTED(cq.poll_wait(wc, 10ms));
  NOT_SUPPORTED(cq.request_notify());
  completion_channel ch;
  NOT_SUPPORTED(ch.wait(10ms));
  CHECK(ch.fd() == -1);

  NOT_SUPPORTED(queue_pair::create(ctx, pd, cq, cq));
  NOT_SUPPORTED(queue_pair::borrow(nullptr, qp_type::rc));
  queue_pair qp;
  local_slice s{reinterpret_cast<std::uint64_t>(buf.data()), 8, 0};
  remote_region r{0x1000, 1, 8};
  endpoint peer;
  NOT_SUPPORTED(qp.local_endpoint());
  NOT_SUPPORTED(qp.connect(peer));
  NOT_SUPPORTED(qp.to_error());
  NOT_SUPPORTED(qp.post_recv(s, 1));
  NOT_SUPPORTED(qp.post_send(s, 1));
  NOT_SUPPORTED(qp.post_send_imm(s, 7, 1));
  NOT_SUPPORTED(qp.post_write(s, r, 1));
  NOT_SUPPORTED(qp.post_write_imm(s, r, 7, 1));
  NOT_SUPPORTED(qp.post_read(s, r, 1));
  NOT_SUPPORTED(qp.post_fetch_add(s, r, 1, 1));
  NOT_SUPPORTED(qp.post_compare_swap(s, r, 0, 1, 1));
  address_handle ah;
  NOT_SUPPORTED(qp.post_send_ud(s, ah, peer, 1));
  NOT_SUPPORTED(address_handle::create(pd, qp, peer));
  {
    auto b = qp.batch();
    b.send(s, 1).write(s, r, 2).read(s, r, 3);
    NOT_SUPPORTED(b.commit());
  }
  shared_receive_queue srq;
  NOT_SUPPORTED(srq.post_recv(s, 1));

  connection conn;
  NOT_SUPPORTED(conn.disconnect(10ms));
  NOT_SUPPORTED(conn.wait_disconnect(10ms));
  CHECK(conn.peer_data().empty());
  connection_request req;
  NOT_SUPPORTED(req.accept());
  NOT_SUPPORTED(req.reject());
  listener l;
  NOT_SUPPORTED(l.get_request(10ms));
  CHECK(l.port() == 0);
}

TEST_CASE("absent: argument errors still come first and say what is wrong") {
  protection_domain pd;
  auto r = pd.register_memory({});
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::empty_span);
  CHECK(r.error() == std::errc::invalid_argument);
  completion_queue cq;
  auto p = cq.poll({});
  REQUIRE_FALSE(p);
  CHECK(p.error() == errc::empty_span);
}

// SPDX-License-Identifier: MIT
// The one error path (loader/refusal.h, src/error.cpp's detail::rdma_error):
// a stub that refuses a call records why, and the C++ API's translator reads
// that record instead of asking the loader again; no error path lists the
// devices. ctest runs each case against the scripted fake provider
// (tests/fakes/fake_provider.c): the complete one, or the same device in a
// library as old as IBVERBS_1.1 (fake_provider_v1_1).
#include <array>
#include <cerrno>
#include <cstddef>
#include <string>
#include <system_error>
#include <utility>

#include "rdmadl/rdmadl.hpp"

#include <doctest/doctest.h>

#include "fake_provider_case.hpp"

using namespace rdmadl;

namespace {

bool has(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// The fake's device, opened, and a protection domain on it.
struct opened {
  context ctx;
  protection_domain pd;
};
opened open_device() {
  start();
  auto ctx = context::open();
  REQUIRE(ctx);
  auto pd = protection_domain::create(*ctx);
  REQUIRE(pd);
  return {std::move(*ctx), std::move(*pd)};
}

} // namespace

TEST_CASE("refusal: a call the loaded release lacks fails with errc::library_lacks") {
  auto [ctx, pd] = open_device();
  // ibv_reg_dmabuf_mr is IBVERBS_1.12: this libibverbs stops at 1.1.
  auto mr = pd.register_dmabuf(0, 0, 4096, 0);
  REQUIRE_FALSE(mr);
  CHECK(mr.error() == errc::library_lacks);
  CHECK(mr.error() == std::errc::operation_not_supported);
  std::string_view detail = last_error_detail();
  INFO(detail);
  CHECK(has(detail, "ibv_reg_dmabuf_mr (IBVERBS_1.12)"));
  CHECK(has(detail, "newest version node is IBVERBS_1.1:"));
  // The record is read once: the provider's own EOPNOTSUPP that follows is
  // the provider's, not the release's.
  fp().fakeprov_fail_next(FAKEPROV_OP_ALLOC_PD, EOPNOTSUPP, 1);
  auto refused = protection_domain::create(ctx);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == std::error_code(EOPNOTSUPP, std::generic_category()));
  CHECK(refused.error() != errc::library_lacks);
}

TEST_CASE("refusal: error paths never list the devices") {
  auto [ctx, pd] = open_device();
  auto cq = completion_queue::create(ctx);
  REQUIRE(cq);
  const unsigned long listed = fp().fakeprov_calls(FAKEPROV_OP_GET_DEVICE_LIST);
  CHECK(listed >= 1); // context::open() did, once

  // Failures the provider reports, each translated.
  fp().fakeprov_fail_next(FAKEPROV_OP_ALLOC_PD, ENOMEM, 1);
  CHECK(protection_domain::create(ctx).error() == std::errc::not_enough_memory);
  fp().fakeprov_fail_next(FAKEPROV_OP_QUERY_PORT, EIO, 1);
  CHECK(ctx.query_port(1).error() == std::errc::io_error);
  fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_QP_EX, EINVAL, 1);
  fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_QP, EINVAL, 1);
  CHECK(queue_pair::create(ctx, pd, *cq, *cq).error() == std::errc::invalid_argument);
  fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_CQ_EX, ENOMEM, 1);
  fp().fakeprov_fail_next(FAKEPROV_OP_CREATE_CQ, ENOMEM, 1);
  CHECK(completion_queue::create(ctx).error() == std::errc::not_enough_memory);

  // Operations on empty objects.
  std::array<std::byte, 64> buf{};
  CHECK(protection_domain().register_memory(buf).error() == errc::empty_object);
  std::array<completion, 2> wc;
  CHECK(completion_queue().poll(wc).error() == errc::empty_object);
  local_slice s{reinterpret_cast<std::uint64_t>(buf.data()), 8, 0};
  CHECK(queue_pair().post_send(s, 1).error() == errc::empty_object);
  CHECK(queue_pair().to_error().error() == errc::empty_object);

  CHECK(fp().fakeprov_calls(FAKEPROV_OP_GET_DEVICE_LIST) == listed);
}

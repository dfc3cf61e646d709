// SPDX-License-Identifier: MIT
// What a C++ test case run against the scripted fake provider
// (fake_provider.c; ctest points RDMADL_IBVERBS_PATH at it) starts and ends
// with. Include after doctest.
#ifndef RDMADL_TESTS_FAKE_PROVIDER_CASE_HPP
#define RDMADL_TESTS_FAKE_PROVIDER_CASE_HPP

#include <cstdint>
#include <vector>

#include "rdmadl/loader.h"

#define FAKEPROV_WANT_OPEN
#include "fake_provider.h"

namespace {

// The fake's scripting API (FAKEPROV_1.0), found once.
[[maybe_unused]] fakeprov_api &fp() {
  static fakeprov_api api = [] {
    fakeprov_api a{};
    REQUIRE(rdmadl_load() == 0);
    REQUIRE(fakeprov_open(&a) == 0);
    return a;
  }();
  return api;
}

// Objects live when the case started (a case about leaks leaves some).
[[maybe_unused]] int baseline = 0;

// Starts a case: a reset fake.
[[maybe_unused]] void start() {
  fp().fakeprov_reset();
  baseline = fp().fakeprov_live_total();
}

// Ends a case: nothing leaked, nothing used after free.
[[maybe_unused]] void finish() {
  CHECK(fp().fakeprov_live_total() == baseline);
  CHECK_MESSAGE(fp().fakeprov_violations() == 0, fp().fakeprov_last_violation());
}

// Every work request posted on QP (or SRQ) QPN, oldest first.
[[maybe_unused]] std::vector<fakeprov_wr_record> wr_log(std::uint32_t qpn) {
  std::vector<fakeprov_wr_record> v(fp().fakeprov_wr_log(qpn, nullptr, 0));
  CHECK(fp().fakeprov_wr_log(qpn, v.data(), v.size()) == v.size());
  return v;
}

} // namespace

#endif // RDMADL_TESTS_FAKE_PROVIDER_CASE_HPP

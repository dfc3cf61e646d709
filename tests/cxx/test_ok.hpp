// SPDX-License-Identifier: MIT
// ok(): a test's way to unwrap a result it expects to succeed, stopping the
// case with the error's message when it did not. Include after doctest.
#ifndef RDMADL_TESTS_TEST_OK_HPP
#define RDMADL_TESTS_TEST_OK_HPP

#include <utility>

#include "rdmadl/error.hpp"

namespace {

// The value of R; stops the case with R's error message if R failed.
template <class T> T ok(rdmadl::result<T> r) {
  REQUIRE_MESSAGE(r, r.error().message());
  return std::move(*r);
}

// Stops the case with R's error message if R failed.
[[maybe_unused]] void ok(rdmadl::result<void> r) {
  REQUIRE_MESSAGE(r, r.error().message());
}

} // namespace

#endif // RDMADL_TESTS_TEST_OK_HPP

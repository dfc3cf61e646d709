// SPDX-License-Identifier: MIT
// The runtime's answers agree with the loader's diagnostics, whatever this
// machine has (absent, library without kernel support, devices).
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "rdmadl/loader.h"
#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;

TEST_CASE("runtime: status mirrors loader.h") {
  for (library lib : {library::ibverbs, library::rdmacm}) {
    auto l = static_cast<rdmadl_lib>(lib);
    auto s = status(lib);
    CHECK(static_cast<int>(s.state) == static_cast<int>(rdmadl_lib_state(l)));
    CHECK(s.missing.size() == rdmadl_lib_missing_count(l));
    CHECK(s.symbol_count == rdmadl_lib_symbol_count(l));
    CHECK(s.state_name == rdmadl_state_name(rdmadl_lib_state(l)));
  }
  CHECK(available() == (rdmadl_load() == 0));
  CHECK(static_cast<int>(stack()) == static_cast<int>(rdmadl_stack_state()));
}

// The ground truth comes from outside the loader: the release's own export
// list (readelf over its libibverbs.so.1, ci/fetch-releases.sh), named by
// RDMADL_EXPECT_EXPORTS in the cxx.runtime.release.* tests.
TEST_CASE("runtime: the probe agrees with the library's real exports") {
  struct {
    feature f;
    const char *symbol;
  } const needs[] = {{feature::wr_api, "ibv_qp_to_qp_ex"},
                     {feature::dmabuf_mr, "ibv_reg_dmabuf_mr"},
                     {feature::query_gid_ex, "_ibv_query_gid_ex"},
                     {feature::reg_mr_iova, "ibv_reg_mr_iova2"},
                     {feature::srq, "ibv_create_srq"}};
  const char *file = std::getenv("RDMADL_EXPECT_EXPORTS");
  if (!file) {
    if (!available()) {
      for (feature f : all_features)
        CHECK_FALSE(supports(f));
    } else {
      MESSAGE("a library is loaded but no export list was given: see cxx.runtime.release.*");
      CHECK(supports(feature::extended_cq));
    }
    return;
  }
  std::ifstream in(file);
  REQUIRE(in);
  std::set<std::string> exported;
  for (std::string name, node; in >> name >> node;)
    exported.insert(name);
  REQUIRE(exported.size() > 50);
  REQUIRE(available());
  for (const auto &n : needs) {
    INFO(name(n.f));
    CHECK(supports(n.f) == (exported.count(n.symbol) > 0));
  }
}

TEST_CASE("runtime: device discovery matches the stack state") {
  auto list = device_list::get();
  switch (stack()) {
  case stack_state::disabled:
  case stack_state::no_library:
    CHECK(list.error() == std::errc::operation_not_supported);
    break;
  case stack_state::no_kernel_support:
    CHECK(list.error() == errc::no_kernel_support);
    CHECK(list.error() == std::errc::operation_not_supported);
    CHECK(context::open().error() == std::errc::operation_not_supported);
    break;
  case stack_state::no_devices:
    CHECK(list.error() == errc::no_devices);
    CHECK(list.error() == std::errc::no_such_device);
    break;
  case stack_state::ready:
    REQUIRE(list);
    CHECK(list->size() > 0);
    CHECK(list->find("no-such-device-0").error() == errc::no_devices);
    break;
  }
}

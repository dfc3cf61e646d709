// SPDX-License-Identifier: MIT
// The loader against a real rdma-core release (Debian's libibverbs1 and
// librdmacm1, extracted by ci/fetch-releases.sh) on a host without RDMA
// devices: every symbol the release exports resolves at its node, every
// newer one is reported missing, and the resolved set equals the release's
// real export list (RDMADL_EXPECT_EXPORTS: "name node" lines from readelf).
#include <fstream>
#include <set>
#include <string>
#include <sys/stat.h>

#include "rdmadl/loader.h"
#include <doctest/doctest.h>

namespace {

std::set<std::string> expected_exports() {
  const char *file = std::getenv("RDMADL_EXPECT_EXPORTS");
  REQUIRE(file != nullptr);
  std::ifstream in(file);
  REQUIRE(in.good());
  std::set<std::string> out;
  for (std::string name, node; in >> name >> node;)
    out.insert(name + "@" + node);
  return out;
}

std::string highest(const std::set<std::string> &exports, const std::string &prefix) {
  int best = -1;
  for (const std::string &e : exports) {
    size_t at = e.find("@" + prefix);
    if (at != std::string::npos)
      best = std::max(best, std::stoi(e.substr(at + 1 + prefix.size())));
  }
  return prefix + std::to_string(best);
}

} // namespace

TEST_CASE("release: resolved set equals the release's exports") {
  const std::set<std::string> exports = expected_exports();
  REQUIRE(exports.size() > 100);
  CHECK(rdmadl_load() == 0);
  for (rdmadl_lib lib : {RDMADL_LIB_IBVERBS, RDMADL_LIB_RDMACM}) {
    CAPTURE(lib);
    rdmadl_state s = rdmadl_lib_state(lib);
    CHECK((s == RDMADL_STATE_LOADED || s == RDMADL_STATE_PARTIAL));
    CHECK(rdmadl_lib_path(lib) != nullptr);
  }
  size_t resolved = 0, known = 0;
  for (size_t i = 0; const char *name = rdmadl_symbol_name(i, nullptr); i++) {
    const char *node = nullptr;
    int status = rdmadl_symbol_status(name, &node);
    bool exported = exports.count(std::string(name) + "@" + node) != 0;
    CAPTURE(name);
    CAPTURE(node);
    CHECK(status == (exported ? 1 : 0));
    resolved += status == 1;
    known += exported;
  }
  // Nothing the release exports is unknown to the table.
  CHECK(known == exports.size());
  CHECK(resolved == exports.size());
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) +
            rdmadl_lib_missing_count(RDMADL_LIB_RDMACM) ==
        169 - exports.size());
  CHECK(std::string(rdmadl_lib_version_node(RDMADL_LIB_IBVERBS)) == highest(exports, "IBVERBS_1."));
  CHECK(std::string(rdmadl_lib_version_node(RDMADL_LIB_RDMACM)) == highest(exports, "RDMACM_1."));
}

TEST_CASE("release: a kernel without RDMA is its own state, not an absent stack") {
  struct stat st;
  if (stat("/sys/class/infiniband_verbs", &st) == 0) {
    MESSAGE("this kernel has RDMA; state is ", rdmadl_stack_name(rdmadl_stack_state()));
    CHECK(rdmadl_stack_state() != RDMADL_STACK_NO_LIBRARY);
  } else {
    CHECK(rdmadl_stack_state() == RDMADL_STACK_NO_KERNEL_SUPPORT);
  }
}

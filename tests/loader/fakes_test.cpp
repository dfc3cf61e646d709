// SPDX-License-Identifier: MIT
// The loader against fake libraries at the dlopen boundary (tests/fakes).
// ctest runs one case per process, with RDMADL_IBVERBS_PATH pointing at the
// fake and RDMADL_RDMACM_PATH at a file that does not exist.
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include <infiniband/verbs.h>

#include "rdmadl/loader.h"
#include <doctest/doctest.h>

#undef ibv_get_device_list
#undef ibv_reg_mr

namespace {

std::string str(const char *s) {
  return s ? s : "(null)";
}

std::string override_realpath() {
  char buf[PATH_MAX];
  const char *p = std::getenv("RDMADL_IBVERBS_PATH");
  REQUIRE(p != nullptr);
  REQUIRE(realpath(p, buf) != nullptr);
  return buf;
}

// Every stub of a library that bound nothing fails with EOPNOTSUPP.
void check_nothing_bound() {
  CHECK(rdmadl_load() == EOPNOTSUPP);
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) == 95);
  int n = 7;
  errno = 0;
  CHECK(ibv_get_device_list(&n) == nullptr);
  CHECK(n == 0);
  CHECK(errno == EOPNOTSUPP);
  CHECK(rdmadl_lib_state(RDMADL_LIB_RDMACM) == RDMADL_STATE_SKIPPED);
}

// The library was refused as incompatible, for a reason whose text holds each
// of the given parts, and nothing was bound.
void check_refused(std::initializer_list<const char *> why) {
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_INCOMPATIBLE);
  std::string err = str(rdmadl_lib_error(RDMADL_LIB_IBVERBS));
  CAPTURE(err);
  for (const char *part : why)
    CHECK(err.find(part) != std::string::npos);
  CHECK(rdmadl_symbol_status("ibv_open_device", nullptr) == 0);
  check_nothing_bound();
}

} // namespace

TEST_CASE("fake: a complete library binds all 95 symbols") {
  CHECK(rdmadl_load() == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_LOADED);
  CHECK(str(rdmadl_lib_version_node(RDMADL_LIB_IBVERBS)) == "IBVERBS_1.18");
  CHECK(str(rdmadl_lib_path(RDMADL_LIB_IBVERBS)) == override_realpath());
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_RDMACM) == RDMADL_STATE_NOT_FOUND);
  int n = 7;
  ibv_device **list = ibv_get_device_list(&n);
  CHECK(list != nullptr);
  CHECK(n == 0);
  CHECK(rdmadl_stack_state() == RDMADL_STACK_NO_DEVICES);
  CHECK(str(rdmadl_reason()).find("loaded (IBVERBS_1.18, loaded)") != std::string::npos);
}

TEST_CASE("fake: a library missing one symbol fails only that one") {
  CHECK(rdmadl_load() == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_PARTIAL);
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) == 1);
  CHECK(str(rdmadl_lib_missing_symbol(RDMADL_LIB_IBVERBS, 0)) == "ibv_query_ece");
  CHECK(rdmadl_symbol_status("ibv_query_ece", nullptr) == 0);
  CHECK(rdmadl_symbol_status("ibv_set_ece", nullptr) == 1);
  errno = 0;
  CHECK(ibv_query_ece(nullptr, nullptr) == EOPNOTSUPP);
  CHECK(errno == EOPNOTSUPP);
  int n = 7;
  CHECK(ibv_get_device_list(&n) != nullptr);
  CHECK(str(rdmadl_reason()).find("1 of 95 symbols missing") != std::string::npos);
}

TEST_CASE("fake: an IBVERBS_1.0/1.1-only library binds exactly those nodes") {
  CHECK(rdmadl_load() == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_PARTIAL);
  CHECK(str(rdmadl_lib_version_node(RDMADL_LIB_IBVERBS)) == "IBVERBS_1.1");
  size_t old = 0;
  for (size_t i = 0; const char *name = rdmadl_symbol_name(i, nullptr); i++) {
    const char *node = nullptr;
    int status = rdmadl_symbol_status(name, &node);
    std::string n = node;
    CAPTURE(name);
    if (n == "IBVERBS_1.0" || n == "IBVERBS_1.1") {
      CHECK(status == 1);
      old++;
    } else if (n.rfind("IBVERBS_", 0) == 0) {
      CHECK(status == 0);
    }
  }
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) == 95 - old);
}

TEST_CASE("fake: ibv_reg_mr_iova2 falls back to ibv_reg_mr when iova == addr") {
  REQUIRE(rdmadl_symbol_status("ibv_reg_mr_iova2", nullptr) == 0);
  char buf[64];
  auto *pd = reinterpret_cast<ibv_pd *>(buf);
  ibv_mr *mr = ibv_reg_mr_iova2(pd, buf, sizeof buf, reinterpret_cast<uintptr_t>(buf),
                                IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  CHECK(mr->addr == buf);
  CHECK(mr->length == sizeof buf);
  CHECK(mr->lkey == IBV_ACCESS_LOCAL_WRITE);
  errno = 0;
  CHECK(ibv_reg_mr_iova2(pd, buf, sizeof buf, 4096, IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == EOPNOTSUPP);
}

TEST_CASE("fake: a garbage file is a failed load, not a crash") {
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_LOAD_FAILED);
  std::string err = str(rdmadl_lib_error(RDMADL_LIB_IBVERBS));
  CAPTURE(err);
  CHECK((err.find("invalid ELF header") != std::string::npos ||
         err.find("file too short") != std::string::npos));
  CHECK(str(rdmadl_reason()).find("load-failed") != std::string::npos);
  check_nothing_bound();
}

TEST_CASE("fake: a library with the wrong soname is refused") {
  check_refused({"soname libnotverbs.so.7", "expected libibverbs.so.1"});
}

TEST_CASE("fake: IBVERBS_1.0 compat entries are never bound") {
  check_refused({"exports none"});
}

TEST_CASE("fake: a constructor calling a stub during dlopen neither recurses nor deadlocks") {
  // Linked with the shared drop-in library: the fake's call binds to
  // rdmadl's exported stub while rdmadl is still inside dlopen.
  CHECK(str(std::getenv("FAKE_CTOR_CALLEE")).find("librdmadl-verbs.so") != std::string::npos);
  CHECK(str(std::getenv("FAKE_CTOR_RESULT")) == "own-list");
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_LOADED);
}

TEST_CASE("fake: a library whose symbols resolve to rdmadl itself binds none") {
  // Each dlvsym through the fake's handle returns rdmadl's own stub; none may
  // be bound (a stub calling itself would recurse forever).
  check_refused({"exports none"});
}

TEST_CASE("fake: rdmadl's own library at the override path is refused") {
  check_refused({"rdmadl itself"});
}

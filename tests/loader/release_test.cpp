// SPDX-License-Identifier: MIT
// The loader against a real rdma-core release (Debian's libibverbs1 and
// librdmacm1, extracted by ci/fetch-releases.sh) on a host without RDMA
// devices: every symbol the release exports resolves at its node, every
// newer one is reported missing, and the resolved set equals the release's
// real export list (RDMADL_EXPECT_EXPORTS: "name node" lines from readelf).
// Each missing symbol with a fallback (EMU in symbols.def) is reported
// emulated and works without a device where it can.
#include "emu_decisions.hpp"
#include "symbol_counts.h"
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

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

// The EMU entries of symbols.def.

bool exported(const std::set<std::string> &exports, const char *name) {
  for (const std::string &e : exports)
    if (e.compare(0, std::strlen(name) + 1, std::string(name) + "@") == 0)
      return true;
  return false;
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
    CHECK(status == (exported             ? RDMADL_SYMBOL_RESOLVED
                     : emu_in_table(name) ? RDMADL_SYMBOL_EMULATED
                                          : RDMADL_SYMBOL_MISSING));
    resolved += status == 1;
    known += exported;
  }
  // Nothing the release exports is unknown to the table.
  CHECK(known == exports.size());
  CHECK(resolved == exports.size());
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) +
            rdmadl_lib_missing_count(RDMADL_LIB_RDMACM) ==
        RDMADL_TEST_ALL_SYMBOLS - exports.size());
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

TEST_CASE("release: every symbol newer than 33.2 is resolved, emulated or missing as decided") {
  const std::set<std::string> exports = expected_exports();
  REQUIRE(rdmadl_load() == 0);
  size_t newer = 0;
  for (size_t i = 0; const char *name = rdmadl_symbol_name(i, nullptr); i++) {
    const char *node = nullptr;
    int status = rdmadl_symbol_status(name, &node);
    std::string n = node;
    int minor = std::stoi(n.substr(n.find('.') + 1));
    if (minor <= (n.rfind("IBVERBS_", 0) == 0 ? 11 : 3))
      continue;
    newer++;
    CAPTURE(name);
    CHECK(emu_in_table(name) == (emulated_newer.count(name) == 1));
    int want = exported(exports, name)           ? RDMADL_SYMBOL_RESOLVED
               : emulated_newer.count(name) == 1 ? RDMADL_SYMBOL_EMULATED
                                                 : RDMADL_SYMBOL_MISSING;
    CHECK(status == want);
  }
  CHECK(newer == 30); // 24 IBVERBS_1.12..1.18, 6 RDMACM_1.4..1.5 in rdma-core 65.0
}

TEST_CASE("release: fallbacks that need no device work on the real library") {
  const std::set<std::string> exports = expected_exports();
  REQUIRE(rdmadl_load() == 0);
  REQUIRE(!exported(exports, "ibv_alloc_buf"));
  REQUIRE(!exported(exports, "ibv_reg_mr_ex"));
  char pds[2][64] = {};
  auto *pd = reinterpret_cast<ibv_pd *>(pds[0]);
  const long page = sysconf(_SC_PAGESIZE);
  ibv_buf *buf = nullptr;
  auto *mem = static_cast<char *>(ibv_alloc_buf(pd, 2 * page, &buf));
  REQUIRE(mem != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(mem) % page == 0);
  std::memset(mem, 1, 2 * page);
  // Refused before the library is called (no device, so nothing to register).
  errno = 0;
  CHECK(ibv_reg_buf_mr(reinterpret_cast<ibv_pd *>(pds[1]), buf, mem, 1, 0) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_reg_buf_mr(pd, buf, mem + page, page + 1, 0) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_export_buf_dmabuf_fd(buf) == -1);
  CHECK(errno == ENODATA);
  ibv_free_buf(buf);
  // ibv_reg_mr_ex's checks, before any library call.
  ibv_mr_init_attr a{};
  a.length = 8;
  a.addr = mem;
  a.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_FD;
  errno = 0;
  CHECK(ibv_reg_mr_ex(pd, &a) == nullptr);
  CHECK(errno == EINVAL);
  a.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH;
  errno = 0;
  CHECK(ibv_reg_mr_ex(pd, &a) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  if (!exported(exports, "ibv_reg_dmabuf_mr")) {
    a.comp_mask = IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET | IBV_REG_MR_MASK_IOVA;
    a.fd = 0;
    errno = 0;
    CHECK(ibv_reg_mr_ex(pd, &a) == nullptr);
    CHECK(errno == EOPNOTSUPP);
  }
  // The decided-missing ones fail as their man pages say, with EOPNOTSUPP.
  uint64_t speed = 5;
  errno = 0;
  CHECK(ibv_query_port_speed(nullptr, 1, &speed) == EOPNOTSUPP);
  CHECK((errno == EOPNOTSUPP && speed == 5));
  errno = 0;
  CHECK(ibv_alloc_dmah(nullptr, nullptr) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  errno = 0;
  CHECK(ibv_create_comp_cntr(nullptr, nullptr) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  errno = 0;
  CHECK(rdma_write_cm_event(nullptr, RDMA_CM_EVENT_USER, 0, 0) == -1);
  CHECK(errno == EOPNOTSUPP);
  errno = 0;
  CHECK(repoll_create(0) == -1);
  CHECK(errno == EOPNOTSUPP);
}

// SPDX-License-Identifier: MIT
// The loader against a real rdma-core release (Debian's libibverbs1,
// librdmacm1, ibverbs-providers and libibumad3, extracted by
// ci/fetch-releases.sh) on a host without RDMA devices: every symbol the
// release exports resolves at its node, every newer one is reported missing,
// and the resolved set equals the release's real export list
// (RDMADL_EXPECT_EXPORTS: "name node" lines from readelf). Each missing
// symbol with a fallback (EMU in symbols.def) is reported emulated and works
// without a device where it can. The provider libraries and libibumad load
// on first use, from beside the loaded libibverbs, and answer what the same
// library called directly answers.
#include "emu_decisions.hpp"
#include "symbol_counts.h"
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <dlfcn.h>

#include "rdma_api.h"

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

// The highest node with PREFIX among EXPORTS ("MLX5_1.27" above
// "MLX5_1.25.1"), or "" when the release has no such library.
std::string highest(const std::set<std::string> &exports, const std::string &prefix) {
  int best = -1;
  std::string node;
  for (const std::string &e : exports) {
    size_t at = e.find("@" + prefix);
    if (at == std::string::npos)
      continue;
    std::string n = e.substr(at + 1);
    std::string rest = n.substr(prefix.size());
    int slot = std::stoi(rest) * 10;
    if (size_t dot = rest.find('.'); dot != std::string::npos)
      slot += std::stoi(rest.substr(dot + 1));
    if (slot > best) {
      best = slot;
      node = n;
    }
  }
  return node;
}

const char *const prefixes[RDMADL_LIB_COUNT] = {"IBVERBS_1.", "RDMACM_1.", "MLX5_1.",
                                                "EFA_1.",     "MLX4_1.",   "HNS_1.",
                                                "MANA_1.",    "IONIC_1.",  "IBUMAD_1."};

// The highest node of each library in rdma-core 33.2, the oldest release
// tested (-1: 33.2 has no such library); newer nodes need a decision.
const int oldest_top[RDMADL_LIB_COUNT] = {11, 3, 17, 1, 0, -1, -1, -1, 2};

rdmadl_lib lib_of(const std::string &node) {
  for (int l = 0; l < RDMADL_LIB_COUNT; l++)
    if (node.rfind(prefixes[l], 0) == 0)
      return static_cast<rdmadl_lib>(l);
  FAIL("no library has node " << node);
  return RDMADL_LIB_COUNT;
}

// The library file the release ships for LIB, next to its libibverbs.
std::string release_file(rdmadl_lib lib) {
  std::string ibv = std::getenv("RDMADL_IBVERBS_PATH");
  return ibv.substr(0, ibv.rfind('/') + 1) + rdmadl_lib_name(lib);
}

} // namespace

TEST_CASE("release: resolved set equals the release's exports") {
  const std::set<std::string> exports = expected_exports();
  REQUIRE(exports.size() > 100);
  CHECK(rdmadl_load() == 0);
  for (int l = 0; l < RDMADL_LIB_COUNT; l++) {
    auto lib = static_cast<rdmadl_lib>(l);
    CAPTURE(rdmadl_lib_name(lib));
    bool shipped = !highest(exports, prefixes[l]).empty();
    if (l > RDMADL_LIB_RDMACM) {
      // Loaded on first use only; this asks for it.
      CHECK(rdmadl_lib_state(lib) == RDMADL_STATE_NOT_LOADED);
      CHECK(rdmadl_lib_path(lib) == nullptr);
      CHECK(rdmadl_lib_load(lib) == (shipped ? 0 : EOPNOTSUPP));
    }
    rdmadl_state s = rdmadl_lib_state(lib);
    if (shipped) {
      CHECK((s == RDMADL_STATE_LOADED || s == RDMADL_STATE_PARTIAL));
      REQUIRE(rdmadl_lib_path(lib) != nullptr);
      // A provider library comes from beside the loaded libibverbs.
      char *want = realpath(release_file(lib).c_str(), nullptr);
      CHECK(std::string(rdmadl_lib_path(lib)) == (want ? want : "?"));
      std::free(want);
      CHECK(std::string(rdmadl_lib_version_node(lib)) == highest(exports, prefixes[l]));
    } else {
      CHECK(s == RDMADL_STATE_NOT_FOUND);
      CHECK(rdmadl_lib_missing_count(lib) == rdmadl_lib_symbol_count(lib));
    }
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
  size_t missing = 0;
  for (int l = 0; l < RDMADL_LIB_COUNT; l++)
    missing += rdmadl_lib_missing_count(static_cast<rdmadl_lib>(l));
  CHECK(missing == RDMADL_TEST_ALL_SYMBOLS - exports.size());
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
    rdmadl_lib lib = lib_of(n);
    std::string rest = n.substr(std::strlen(prefixes[lib]));
    if (rest.find('.') == std::string::npos && std::stoi(rest) <= oldest_top[lib])
      continue;
    newer++;
    CAPTURE(name);
    CHECK(emu_in_table(name) == (emulated_newer.count(name) == 1));
    int want = exported(exports, name)           ? RDMADL_SYMBOL_RESOLVED
               : emulated_newer.count(name) == 1 ? RDMADL_SYMBOL_EMULATED
                                                 : RDMADL_SYMBOL_MISSING;
    CHECK(status == want);
  }
  // In rdma-core 65.0: 24 IBVERBS_1.12..1.18 and 6 RDMACM_1.4..1.5; 47
  // MLX5_1.18..1.27 (with 1.25.1), 9 EFA_1.2..1.7, 3 HNS_1.0, 3 MANA, 6
  // IONIC_1.0, 3 IBUMAD_1.3..1.4.
  CHECK(newer == 30 + 47 + 9 + 3 + 3 + 6 + 3);
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

TEST_CASE("release: provider libraries and libibumad answer as the library itself does") {
  const std::set<std::string> exports = expected_exports();
  REQUIRE(rdmadl_load() == 0);
  // libibumad, bound: the same answers as the file called directly.
  void *umad = dlopen(release_file(RDMADL_LIB_IBUMAD).c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(umad != nullptr);
  auto direct_init = reinterpret_cast<int (*)()>(dlsym(umad, "umad_init"));
  auto direct_names =
      reinterpret_cast<int (*)(char(*)[UMAD_CA_NAME_LEN], int)>(dlsym(umad, "umad_get_cas_names"));
  auto direct_ca = reinterpret_cast<int (*)(const char *, umad_ca_t *)>(dlsym(umad, "umad_get_ca"));
  REQUIRE((direct_init && direct_names && direct_ca));
  CHECK(umad_init() == direct_init());
  char ours[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN] = {},
       theirs[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN] = {};
  CHECK(umad_get_cas_names(ours, UMAD_MAX_DEVICES) == direct_names(theirs, UMAD_MAX_DEVICES));
  umad_ca_t a{}, b{};
  CHECK(umad_get_ca("rdmadl-no-such-ca", &a) == direct_ca("rdmadl-no-such-ca", &b));
  CHECK(std::string(umad_class_str(UMAD_CLASS_SUBN_ADM)) == "SubnAdm");
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBUMAD) != RDMADL_STATE_NOT_LOADED);
  // A library the release lacks: the stub's documented failure.
  if (!exported(exports, "hnsdv_is_supported")) {
    errno = 0;
    CHECK(!hnsdv_is_supported(nullptr));
    CHECK(errno == EOPNOTSUPP);
  }
  if (!exported(exports, "ionic_dv_ctx_get_udma_count")) {
    errno = 0;
    CHECK(ionic_dv_ctx_get_udma_count(nullptr) == 0);
    CHECK(errno == EOPNOTSUPP);
  }
  // A function newer than the release: as its man page documents failure.
  if (!exported(exports, "mlx5dv_devx_uar_export_dmabuf_fd")) {
    errno = 0;
    CHECK(mlx5dv_devx_uar_export_dmabuf_fd(nullptr) == -1);
    CHECK(errno == EOPNOTSUPP);
  }
  if (!exported(exports, "efadv_get_max_sq_depth")) {
    errno = 0;
    CHECK(efadv_get_max_sq_depth(nullptr, nullptr, 0) == -EOPNOTSUPP);
    CHECK(errno == EOPNOTSUPP);
  }
  // Bound, and called on what needs no device: the library's own answer.
  REQUIRE(exported(exports, "mlx5dv_is_supported"));
  CHECK(rdmadl_symbol_status("mlx5dv_is_supported", nullptr) == RDMADL_SYMBOL_RESOLVED);
  // The old-ABI mlx5dv_init_obj@MLX5_1.0 reaches the release's own entry:
  // asked for nothing (type 0), both answer the same.
  using init_obj = int (*)(mlx5dv_obj *, uint64_t);
  auto old_ours = reinterpret_cast<init_obj>(dlvsym(RTLD_DEFAULT, "mlx5dv_init_obj", "MLX5_1.0"));
  void *mlx5 = dlopen(release_file(RDMADL_LIB_MLX5).c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(mlx5 != nullptr);
  auto old_theirs = reinterpret_cast<init_obj>(dlvsym(mlx5, "mlx5dv_init_obj", "MLX5_1.0"));
  REQUIRE((old_ours && old_theirs));
  mlx5dv_obj obj_ours{}, obj_theirs{};
  errno = 0;
  const int ret_ours = old_ours(&obj_ours, 0), errno_ours = errno;
  errno = 0;
  const int ret_theirs = old_theirs(&obj_theirs, 0), errno_theirs = errno;
  CHECK(ret_ours == ret_theirs);
  CHECK(errno_ours == errno_theirs);
  dlclose(mlx5);
  dlclose(umad);
}

// Run by its own ctest (loader.release.<suite>.other-provider) with
// RDMADL_MLX5_PATH set to another release's libmlx5.so.1 and
// RDMADL_TEST_OTHER_PRIVATE to the IBVERBS_PRIVATE_* node that one needs;
// the other ctests exclude it.
TEST_CASE("release: a provider library from another release is refused with its reason") {
  REQUIRE(std::getenv("RDMADL_TEST_OTHER_PRIVATE") != nullptr);
  REQUIRE(rdmadl_load() == 0);
  errno = 0;
  CHECK(rdmadl_lib_load(RDMADL_LIB_MLX5) == EOPNOTSUPP);
  CHECK(errno == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_MLX5) == RDMADL_STATE_INCOMPATIBLE);
  std::string why = rdmadl_lib_error(RDMADL_LIB_MLX5);
  CAPTURE(why);
  CHECK(why.find("from another rdma-core release") != std::string::npos);
  CHECK(why.find(std::string("needs ") + std::getenv("RDMADL_TEST_OTHER_PRIVATE")) !=
        std::string::npos);
  // Its functions fail as absent, and nothing of it was loaded.
  errno = 0;
  CHECK(!mlx5dv_is_supported(nullptr));
  CHECK(errno == EOPNOTSUPP);
  CHECK(rdmadl_symbol_status("mlx5dv_is_supported", nullptr) == RDMADL_SYMBOL_MISSING);
  CHECK(dlopen(std::getenv("RDMADL_MLX5_PATH"), RTLD_NOW | RTLD_NOLOAD) == nullptr);
}

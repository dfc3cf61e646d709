// SPDX-License-Identifier: MIT
// Absent stack, table-driven: every one of the drop-in stubs, called with
// zeroed arguments, fails the way its man page documents failure and sets
// errno to EOPNOTSUPP (the string functions still return their strings, the
// rate conversions rdma-core's answers).
// ctest runs it with RDMADL_DISABLE=1 and with override paths that do not
// exist; the diagnostics must name that reason.
#include "symbol_counts.h"
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <dlfcn.h>

#include "rdma_api.h"
#include "rdmadl/loader.h"
#include <doctest/doctest.h>

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#include "refused_checks.hpp"

namespace {

enum class fail { NULLPTR, M1, ERRNO, NEGERRNO, ZERO, VOID, STR };

template <class R, class... A> R call_zero(R (*f)(A...)) {
  return f(A{}...);
}
template <class R, class... A> R call_zero(R (*f)(A..., ...)) {
  return f(A{}...);
}

// The string each string function returns for enum value 0 (libibumad's
// read from its 44.0 build).
const char *string_for_zero(const char *name) {
  if (!std::strcmp(name, "umad_class_str") || !std::strcmp(name, "umad_attribute_str"))
    return "<unknown>";
  if (!std::strcmp(name, "umad_method_str"))
    return "<unknown"; // sic: libibumad's own string
  if (!std::strcmp(name, "umad_common_mad_status_str") ||
      !std::strcmp(name, "umad_sa_mad_status_str"))
    return "Success";
  if (!std::strcmp(name, "ibv_wc_status_str"))
    return "success";
  if (!std::strcmp(name, "ibv_event_type_str"))
    return "CQ error";
  if (!std::strcmp(name, "ibv_node_type_str"))
    return "unknown";
  if (!std::strcmp(name, "ibv_port_state_str"))
    return "no state change (NOP)";
  return "RDMA_CM_EVENT_ADDR_RESOLVED";
}

// The pure table lookups of libibverbs: they answer without a library, as
// it does, and leave errno alone. For 0 that answer is the man page's
// failure value (-1, IBV_RATE_MAX), which the table's fail column says.
bool pure(const char *name) {
  for (const char *p :
       {"ibv_rate_to_mult", "mult_to_ibv_rate", "ibv_rate_to_mbps", "mbps_to_ibv_rate"})
    if (!std::strcmp(name, p))
      return true;
  return false;
}

template <fail K, class F> std::string run(const char *name, F *f) {
  if (!f)
    return "not exported";
  using R = decltype(call_zero(f));
  errno = 0;
  if constexpr (std::is_void_v<R>) {
    call_zero(f);
  } else {
    R r = call_zero(f);
    bool ok = true;
    if constexpr (K == fail::NULLPTR)
      ok = r == R{};
    else if constexpr (K == fail::M1)
      ok = r == static_cast<R>(-1);
    else if constexpr (K == fail::ERRNO)
      ok = r == static_cast<R>(EOPNOTSUPP);
    else if constexpr (K == fail::NEGERRNO)
      ok = r == static_cast<R>(-EOPNOTSUPP);
    else if constexpr (K == fail::ZERO)
      ok = r == R{};
    else if constexpr (K == fail::STR) {
      if constexpr (std::is_pointer_v<R>)
        return r && !std::strcmp(r, string_for_zero(name)) ? "" : "wrong string";
    }
    if (!ok)
      return "wrong return value";
  }
  if (pure(name))
    return errno == 0 ? "" : "errno " + std::to_string(errno) + ", expected it untouched";
  if (errno != EOPNOTSUPP)
    return "errno " + std::to_string(errno) + ", expected EOPNOTSUPP";
  return "";
}

#ifdef RDMADL_TEST_DROPIN_SHARED
// Like libibverbs, the shared drop-in has only a non-default
// ibv_register_driver@IBVERBS_1.1, which no program can link by name.
decltype(&::ibv_register_driver) register_driver_v11() {
  return reinterpret_cast<decltype(&::ibv_register_driver)>(
      dlvsym(RTLD_DEFAULT, "ibv_register_driver", "IBVERBS_1.1"));
}
#define ibv_register_driver (*register_driver_v11())
#endif

struct entry {
  const char *name;
  std::string (*check)();
};

const entry entries[] = {
#define RDMADL_SYM(lib, minor, kind, impl, ret, name, params, args)                                \
  {#name, [] { return run<fail::kind>(#name, &name); }},
#include "symbols.def"
#undef RDMADL_SYM
};
#undef ibv_register_driver

bool disabled() {
  const char *v = std::getenv("RDMADL_DISABLE");
  return v && !std::strcmp(v, "1");
}

} // namespace

TEST_CASE("absent: every stub fails as its man page documents, with EOPNOTSUPP") {
  CHECK(sizeof entries / sizeof entries[0] == RDMADL_TEST_ALL_SYMBOLS);
  for (const entry &e : entries) {
    CAPTURE(e.name);
    CHECK(e.check() == "");
  }
}

#ifdef RDMADL_TEST_DROPIN_SHARED
TEST_CASE("absent: libmlx5's old-ABI mlx5dv_init_obj@MLX5_1.0 fails as documented") {
  using init_obj = int (*)(mlx5dv_obj *, uint64_t);
  auto f = reinterpret_cast<init_obj>(dlvsym(RTLD_DEFAULT, "mlx5dv_init_obj", "MLX5_1.0"));
  REQUIRE(f != nullptr);
  CHECK(reinterpret_cast<void *>(f) != dlvsym(RTLD_DEFAULT, "mlx5dv_init_obj", "MLX5_1.2"));
  errno = 0;
  CHECK(f(nullptr, 0) == EOPNOTSUPP);
  CHECK(errno == EOPNOTSUPP);
}

TEST_CASE("absent: ibv_register_driver is only a non-default IBVERBS_1.1 entry, as in libibverbs") {
  CHECK(register_driver_v11() != nullptr);
  CHECK(dlvsym(RTLD_DEFAULT, "ibv_open_device", "IBVERBS_1.1") != nullptr);
  // Unversioned lookups find default versions only.
  CHECK(dlsym(RTLD_DEFAULT, "ibv_open_device") != nullptr);
  CHECK(dlsym(RTLD_DEFAULT, "ibv_register_driver") == nullptr);
}
#endif

TEST_CASE("absent: ibv_get_device_list sets *num_devices to 0") {
  check_device_list_refused(42);
  CHECK(ibv_get_device_list(nullptr) == nullptr);
}

TEST_CASE("absent: string functions keep returning rdma-core's strings") {
  CHECK(std::string(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR)) == "transport retry counter exceeded");
  CHECK(std::string(ibv_wc_status_str(static_cast<ibv_wc_status>(-1))) == "unknown");
  CHECK(std::string(ibv_event_type_str(IBV_EVENT_PORT_ACTIVE)) == "port active");
  CHECK(std::string(ibv_node_type_str(IBV_NODE_CA)) == "InfiniBand channel adapter");
  CHECK(std::string(ibv_port_state_str(IBV_PORT_ACTIVE)) == "active");
  CHECK(std::string(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED)) == "RDMA_CM_EVENT_ESTABLISHED");
  CHECK(std::string(rdma_event_str(static_cast<rdma_cm_event_type>(999))) == "UNKNOWN EVENT");
}

// The C ABI takes any int as an enum ibv_rate, and C callers pass values
// outside the enumerators; in C++ such a value in the enum type is outside
// its range, which clang's UBSan (-fsanitize=enum) reports at each load.
// What is tested is the C ABI, so this loop's loads are exempt from that one
// check (gcc has no such check).
#if defined(__clang__)
#define RDMADL_TEST_NO_SANITIZE_ENUM __attribute__((no_sanitize("enum")))
#else
#define RDMADL_TEST_NO_SANITIZE_ENUM
#endif

using rate_to_int = int (*)(ibv_rate);
using int_to_rate = ibv_rate (*)(int);

// How many of the inputs the real conversions answer otherwise than rdmadl's
// (the first ten are reported).
RDMADL_TEST_NO_SANITIZE_ENUM static int rate_differences(rate_to_int real_to_mult,
                                                         int_to_rate real_from_mult,
                                                         rate_to_int real_to_mbps,
                                                         int_to_rate real_from_mbps) {
  std::vector<int> inputs{INT_MIN, INT_MIN + 1, INT_MAX - 1, INT_MAX};
  for (int i = -1000; i <= 1'300'000; i++)
    inputs.push_back(i);
  int differ = 0;
  for (int i : inputs) {
    auto rate = static_cast<ibv_rate>(i);
    if (ibv_rate_to_mult(rate) != real_to_mult(rate) ||
        ibv_rate_to_mbps(rate) != real_to_mbps(rate) || mult_to_ibv_rate(i) != real_from_mult(i) ||
        mbps_to_ibv_rate(i) != real_from_mbps(i)) {
      if (differ++ < 10)
        FAIL_CHECK("input " << i << ": rdmadl " << ibv_rate_to_mult(rate) << "/"
                            << ibv_rate_to_mbps(rate) << "/" << mult_to_ibv_rate(i) << "/"
                            << mbps_to_ibv_rate(i) << ", libibverbs " << real_to_mult(rate) << "/"
                            << real_to_mbps(rate) << "/" << real_from_mult(i) << "/"
                            << real_from_mbps(i));
    }
  }
  return differ;
}

// Every input of the four rate conversions against the real libibverbs named
// by RDMADL_TEST_REAL_IBVERBS (ctest: rdma-core 44.0's, the first tested
// release with 65.0's whole table; opened privately, so the names this
// program calls stay rdmadl's).
TEST_CASE("absent: the rate conversions answer as libibverbs does, for every input") {
  CHECK(ibv_rate_to_mult(IBV_RATE_5_GBPS) == 2);
  CHECK(ibv_rate_to_mbps(IBV_RATE_25_GBPS) == 25781);
  CHECK(mult_to_ibv_rate(480) == IBV_RATE_1200_GBPS);
  CHECK(mbps_to_ibv_rate(25000) == IBV_RATE_MAX);
  const char *path = std::getenv("RDMADL_TEST_REAL_IBVERBS");
  if (!path)
    return;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(h != nullptr, dlerror());
  auto real_to_mult = reinterpret_cast<rate_to_int>(dlsym(h, "ibv_rate_to_mult"));
  auto real_from_mult = reinterpret_cast<int_to_rate>(dlsym(h, "mult_to_ibv_rate"));
  auto real_to_mbps = reinterpret_cast<rate_to_int>(dlsym(h, "ibv_rate_to_mbps"));
  auto real_from_mbps = reinterpret_cast<int_to_rate>(dlsym(h, "mbps_to_ibv_rate"));
  REQUIRE(real_to_mult);
  REQUIRE(real_from_mult);
  REQUIRE(real_to_mbps);
  REQUIRE(real_from_mbps);
  REQUIRE(real_to_mult != &ibv_rate_to_mult);
  errno = 0;
  CHECK(rate_differences(real_to_mult, real_from_mult, real_to_mbps, real_from_mbps) == 0);
  CHECK(errno == 0);
  dlclose(h);
}

TEST_CASE("absent: a successful call through a stub leaves errno alone") {
  errno = 1234;
  (void)ibv_wc_status_str(IBV_WC_SUCCESS);
  CHECK(errno == 1234);
}

TEST_CASE("absent: diagnostics name the reason") {
  const rdmadl_state expect = disabled() ? RDMADL_STATE_DISABLED : RDMADL_STATE_NOT_FOUND;
  CHECK(rdmadl_load() == EOPNOTSUPP);
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == expect);
  CHECK(rdmadl_lib_state(RDMADL_LIB_RDMACM) ==
        (disabled() ? RDMADL_STATE_DISABLED : RDMADL_STATE_SKIPPED));
  CHECK(rdmadl_lib_path(RDMADL_LIB_IBVERBS) == nullptr);
  CHECK(rdmadl_lib_version_node(RDMADL_LIB_IBVERBS) == nullptr);
  CHECK(rdmadl_lib_symbol_count(RDMADL_LIB_IBVERBS) == RDMADL_TEST_IBV_SYMBOLS);
  CHECK(rdmadl_lib_symbol_count(RDMADL_LIB_RDMACM) == RDMADL_TEST_CM_SYMBOLS);
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) == RDMADL_TEST_IBV_SYMBOLS);
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_RDMACM) == RDMADL_TEST_CM_SYMBOLS);
  CHECK(std::string(rdmadl_lib_missing_symbol(RDMADL_LIB_RDMACM, 0)).rfind("r", 0) == 0);
  CHECK(rdmadl_lib_missing_symbol(RDMADL_LIB_IBVERBS, RDMADL_TEST_IBV_SYMBOLS) == nullptr);
  CHECK(rdmadl_stack_state() == (disabled() ? RDMADL_STACK_DISABLED : RDMADL_STACK_NO_LIBRARY));
  std::string reason = rdmadl_reason();
  CAPTURE(reason);
  if (disabled()) {
    CHECK(reason.find("RDMADL_DISABLE") != std::string::npos);
  } else {
    const char *path = std::getenv("RDMADL_IBVERBS_PATH");
    REQUIRE(path != nullptr);
    CHECK(reason.find(path) != std::string::npos);
    CHECK(reason.find("No such file") != std::string::npos);
    CHECK(std::string(rdmadl_lib_error(RDMADL_LIB_IBVERBS)).find("RDMADL_IBVERBS_PATH") !=
          std::string::npos);
  }
}

TEST_CASE("absent: per-symbol queries") {
  const char *node = nullptr;
  CHECK(rdmadl_symbol_status("ibv_open_device", &node) == 0);
  CHECK(std::string(node) == "IBVERBS_1.1");
  CHECK(rdmadl_symbol_status("ibv_create_comp_channel", &node) == 0);
  CHECK(std::string(node) == "IBVERBS_1.0");
  CHECK(rdmadl_symbol_status("rdma_establish", &node) == 0);
  CHECK(std::string(node) == "RDMACM_1.2");
  CHECK(rdmadl_symbol_status("ibv_no_such_verb", nullptr) == -1);
  CHECK(rdmadl_symbol_status(nullptr, nullptr) == -1);
  rdmadl_lib lib{};
  CHECK(rdmadl_symbol_name(168, &lib) != nullptr);
  CHECK(rdmadl_symbol_name(RDMADL_TEST_ALL_SYMBOLS, &lib) == nullptr);
}

TEST_CASE("absent: no symbol is emulated without a library") {
  // A fallback is built from the library's older calls; with no library every
  // symbol, those with a fallback (EMU) included, is missing.
  size_t n = 0;
  for (size_t i = 0; const char *name = rdmadl_symbol_name(i, nullptr); i++, n++) {
    CAPTURE(name);
    CHECK(rdmadl_symbol_status(name, nullptr) == RDMADL_SYMBOL_MISSING);
  }
  CHECK(n == RDMADL_TEST_ALL_SYMBOLS);
  ibv_buf *buf = nullptr;
  errno = 0;
  CHECK(ibv_alloc_buf(nullptr, 4096, &buf) == nullptr);
  CHECK(buf == nullptr);
  CHECK(errno == EOPNOTSUPP);
  ibv_mr_init_attr a{};
  a.comp_mask = IBV_REG_MR_MASK_ADDR;
  errno = 0;
  CHECK(ibv_reg_mr_ex(nullptr, &a) == nullptr);
  CHECK(errno == EOPNOTSUPP);
}

TEST_CASE("absent: every symbol reported missing fails as documented, also beside a real release") {
  // ctest's loader.missing.release.<suite> runs this case alone with a real,
  // older rdma-core loaded (RDMADL_TEST_RELEASE_LOADED=1): the symbols that
  // release lacks and rdmadl does not emulate fail exactly as without a stack.
  const bool release = std::getenv("RDMADL_TEST_RELEASE_LOADED") != nullptr;
  REQUIRE(rdmadl_load() == (release ? 0 : EOPNOTSUPP));
  size_t missing = 0;
  for (const entry &e : entries) {
    if (rdmadl_symbol_status(e.name, nullptr) != RDMADL_SYMBOL_MISSING)
      continue;
    missing++;
    CAPTURE(e.name);
    CHECK(e.check() == "");
  }
  MESSAGE(missing, " missing symbols called");
  if (release)
    CHECK((missing > 0 && missing < RDMADL_TEST_ALL_SYMBOLS));
  else
    CHECK(missing == RDMADL_TEST_ALL_SYMBOLS);
}

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

#define FAKEPROV_WANT_OPEN
#include "fake_provider.h"

using namespace rdmadl;

TEST_CASE("runtime: status mirrors loader.h") {
  for (library lib : {library::ibverbs, library::rdmacm}) {
    auto l = static_cast<rdmadl_lib>(lib);
    auto s = status(lib);
    // Before rdmadl_symbol_status below, which loads a library not loaded
    // yet (librdmacm: this program calls no rdma_* function).
    CHECK(static_cast<int>(s.state) == static_cast<int>(rdmadl_lib_state(l)));
    CHECK(s.state_name == rdmadl_state_name(rdmadl_lib_state(l)));
    CHECK(s.missing.size() == rdmadl_lib_missing_count(l));
    // Emulated: exactly those missing symbols the loader reports emulated.
    std::size_t emulated = 0;
    for (auto m : s.missing)
      emulated += rdmadl_symbol_status(std::string(m).c_str(), nullptr) == RDMADL_SYMBOL_EMULATED;
    CHECK(s.emulated.size() == emulated);
    for (auto e : s.emulated)
      CHECK(rdmadl_symbol_status(std::string(e).c_str(), nullptr) == RDMADL_SYMBOL_EMULATED);
    CHECK(s.symbol_count == rdmadl_lib_symbol_count(l));
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

// name() is the feature's documented spelling, and "unknown" past the enum.
TEST_CASE("runtime: every feature has its own name") {
  CHECK(name(feature::extended_cq) == "extended-cq");
  CHECK(name(feature::wr_api) == "wr-api");
  CHECK(name(feature::query_gid_ex) == "query-gid-ex");
  CHECK(name(feature::dmabuf_mr) == "dmabuf-mr");
  CHECK(name(feature::reg_mr_iova) == "reg-mr-iova");
  CHECK(name(feature::rdma_cm) == "rdma-cm");
  CHECK(name(feature::srq) == "srq");
  CHECK(name(static_cast<feature>(static_cast<int>(feature::srq) + 1)) == "unknown");
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

namespace {
// The stack this test's environment sets up (RDMADL_EXPECT_STACK, a
// stack_state name), or empty on the machine's own environment.
std::string expected_stack() {
  const char *e = std::getenv("RDMADL_EXPECT_STACK");
  return e ? e : "";
}

// rdmadl-info's "usable: yes|no: SENTENCE" line, run in this environment.
std::string info_usable_line() {
  const char *info = std::getenv("RDMADL_INFO");
  REQUIRE(info != nullptr);
  std::string cmd = std::string("'") + info + "'";
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  pclose(p);
  for (std::size_t at = 0; at < out.size();) {
    std::size_t end = out.find('\n', at);
    std::string line = out.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.rfind("usable: ", 0) == 0)
      return line;
    if (end == std::string::npos)
      break;
    at = end + 1;
  }
  FAIL("rdmadl-info printed no usable: line: " << out);
  return {};
}
} // namespace

TEST_CASE("runtime: diagnose agrees with the loader's verdict and the stack") {
  auto d = diagnose();
  INFO(d.sentence);
  rdmadl_stack st{};
  int usable = -1;
  const char *sentence = rdmadl_verdict_state(&st, &usable);
  CHECK(d.sentence == sentence);
  CHECK(d.sentence == rdmadl_verdict());
  // Interned: the same sentence, the same pointer; it outlives the call.
  CHECK(static_cast<const void *>(rdmadl_verdict()) == static_cast<const void *>(sentence));
  CHECK(static_cast<int>(d.state) == static_cast<int>(st));
  CHECK(d.usable == (usable == 1));
  CHECK(d.state == stack());
  CHECK(d.sentence.find('\n') == std::string_view::npos);
  if (!expected_stack().empty())
    CHECK(name(d.state) == expected_stack());
  switch (d.state) {
  case stack_state::disabled:
    CHECK(d.sentence == "RDMA is disabled by RDMADL_DISABLE");
    CHECK(d.error == std::errc::operation_not_supported);
    CHECK_FALSE(d.usable);
    break;
  case stack_state::no_library:
    CHECK(d.sentence.rfind("no usable libibverbs: ", 0) == 0);
    // The file asked for and why it failed.
    CHECK(d.sentence.find(status(library::ibverbs).requested) != std::string_view::npos);
    CHECK(d.sentence.find(status(library::ibverbs).error) != std::string_view::npos);
    CHECK(d.error == std::errc::operation_not_supported);
    CHECK_FALSE(d.usable);
    break;
  case stack_state::no_kernel_support:
    // Names the file loaded, the kernel, and what to do.
    CHECK(d.sentence.rfind("libibverbs is installed (" +
                               std::string(status(library::ibverbs).path) +
                               ") but the kernel has no RDMA support (ibv_get_device_list: ENOSYS)",
                           0) == 0);
    CHECK(d.sentence.find("load an RDMA driver, or Soft-RoCE: ") != std::string_view::npos);
    CHECK(d.sentence.find("rdma link add") != std::string_view::npos);
    CHECK(d.error == errc::no_kernel_support);
    CHECK(d.error == std::errc::operation_not_supported);
    CHECK_FALSE(d.usable);
    break;
  case stack_state::no_devices:
    CHECK(d.sentence.rfind("the kernel supports RDMA but ", 0) == 0);
    CHECK(d.error == errc::no_devices);
    CHECK_FALSE(d.usable);
    break;
  case stack_state::ready: {
    auto list = device_list::get();
    REQUIRE(list);
    // Every device is named.
    for (auto dev : *list)
      CHECK(d.sentence.find(dev.name()) != std::string_view::npos);
    if (d.usable) {
      CHECK(d.sentence.rfind("RDMA is usable: ", 0) == 0);
      CHECK(d.sentence.find(" port ") != std::string_view::npos);
      CHECK(!d.error);
    } else {
      CHECK(d.sentence.rfind("RDMA devices exist (", 0) == 0);
      CHECK(d.error == errc::no_active_port);
    }
    break;
  }
  }
  // What a call fails with when RDMA cannot work: the same error.
  if (d.state == stack_state::disabled || d.state == stack_state::no_library ||
      d.state == stack_state::no_kernel_support)
    CHECK(context::open().error() == d.error);
}

TEST_CASE("runtime: diagnose says what rdmadl-info says") {
  auto d = diagnose();
  CHECK(info_usable_line() ==
        std::string("usable: ") + (d.usable ? "yes" : "no") + ": " + std::string(d.sentence));
}

// The scripted fake provider (cxx.runtime.fakeprov): the same device seen
// usable, then with its port down, then with a kernel that has no RDMA.
// Skipped elsewhere: cxx.runtime.fakeprov runs it with --no-skip.
TEST_CASE("runtime: diagnose follows the device's state, call by call" * doctest::skip()) {
  REQUIRE(expected_stack() == "ready");
  fakeprov_api fake{};
  REQUIRE(available());
  REQUIRE(fakeprov_open(&fake) == 0);
  auto up = diagnose();
  CHECK(up.usable);
  CHECK(up.sentence == "RDMA is usable: 1 device (fake0), active: fake0 port 1");
  fake.fakeprov_set(FAKEPROV_PORT_STATE, 1); // IBV_PORT_DOWN
  auto down = diagnose();
  CHECK_FALSE(down.usable);
  CHECK(down.state == stack_state::ready);
  CHECK(down.error == errc::no_active_port);
  CHECK(down.sentence.rfind("RDMA devices exist (fake0) but no port is active", 0) == 0);
  // The earlier sentence is still valid (interned), and still the same text.
  CHECK(up.sentence == "RDMA is usable: 1 device (fake0), active: fake0 port 1");
  fake.fakeprov_fail_next(FAKEPROV_OP_GET_DEVICE_LIST, ENOSYS, 1);
  auto nokernel = diagnose();
  CHECK(nokernel.state == stack_state::no_kernel_support);
  CHECK(nokernel.error == errc::no_kernel_support);
  CHECK(nokernel.sentence.find("the kernel has no RDMA support") != std::string_view::npos);
  fake.fakeprov_reset();
  CHECK(diagnose().sentence.data() == up.sentence.data());
}

namespace {
struct cxx_log {
  int calls = 0, debug = 0, nested = 0;
  std::string last;
};
void cxx_record(log_level level, std::string_view line, void *ctx) {
  auto *l = static_cast<cxx_log *>(ctx);
  l->calls++;
  l->debug += level == log_level::debug;
  l->last = std::string(line);
}
void cxx_nested(log_level, std::string_view, void *ctx) {
  auto *l = static_cast<cxx_log *>(ctx);
  l->calls++;
  if (set_log_handler(log_level::debug, nullptr) == std::errc::resource_deadlock_would_occur)
    l->nested++;
}
} // namespace

// Under RDMADL_DISABLE (cxx.runtime.log), where every call into the library
// logs a debug line: the C++ handler gets the level, the line and its context.
TEST_CASE("runtime: set_log_handler routes the lines to a C++ handler" * doctest::skip()) {
  REQUIRE(expected_stack() == "disabled");
  cxx_log a, b;
  REQUIRE_FALSE(set_log_handler(log_level::debug, cxx_record, &a));
  CHECK_FALSE(device_list::get());
  CHECK(a.calls == 1);
  CHECK(a.debug == 1);
  CHECK(a.last == "ibv_get_device_list@IBVERBS_1.1: not in the loaded library (a fallback or "
                  "EOPNOTSUPP)");
  // Another handler: the first is not called again.
  REQUIRE_FALSE(set_log_handler(log_level::debug, cxx_record, &b));
  CHECK_FALSE(device_list::get());
  CHECK(a.calls == 1);
  CHECK(b.calls == 1);
  // Below the debug level: nothing.
  REQUIRE_FALSE(set_log_handler(log_level::info, cxx_record, &b));
  CHECK_FALSE(device_list::get());
  CHECK(b.calls == 1);
  // From inside a handler: refused.
  cxx_log n;
  REQUIRE_FALSE(set_log_handler(log_level::debug, cxx_nested, &n));
  CHECK_FALSE(device_list::get());
  CHECK(n.calls == 1);
  CHECK(n.nested == 1);
  CHECK_FALSE(set_log_handler(log_level::debug, nullptr));
  CHECK_FALSE(device_list::get());
  CHECK(n.calls == 1);
}

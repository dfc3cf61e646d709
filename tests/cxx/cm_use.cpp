// SPDX-License-Identifier: MIT
// librdmacm is loaded for a C++ program only when it uses it. Built twice:
// with CM_USE_CALLS the program makes cm objects (event_channel), without it
// makes none. A shared librdmadl holds every rdma_* stub whatever its
// program uses, so it loads librdmacm on the C++ API's first rdma_* call:
// before it, librdmacm is "not loaded: no rdma_* function in this program"
// in both programs. A static librdmadl.a keeps the drop-in's rule: the
// program that makes cm objects links the librdmacm stubs, and the
// constructor loads librdmacm before main(). The first use, from four
// threads at once, loads it and forwards to it (event_channel::create; the
// static program without cm objects asks rdmadl::load, as it cannot call
// one). Run with a real librdmacm (a release); exits 0 and prints "cm-use:
// ok" when all holds.
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;

namespace {
int failures = 0;

void check(bool ok, const char *what) {
  if (!ok) {
    std::printf("cm-use: FAILED: %s\n", what);
    failures++;
  }
}

bool usable(library_state s) {
  return s == library_state::loaded || s == library_state::partial;
}

#if defined(RDMADL_SHARED) || defined(CM_USE_CALLS)
constexpr bool calls_cm = true;
#else
constexpr bool calls_cm = false;
#endif
#if defined(CM_USE_CALLS) && !defined(RDMADL_SHARED)
constexpr bool loaded_at_start = true; // librdmadl.a: the stubs were linked
#else
constexpr bool loaded_at_start = false;
#endif

// The first use; its result: 0 when it reached librdmacm, else the error.
int first_use() {
  if constexpr (calls_cm) {
    auto ch = event_channel::create();
    // Without an RDMA kernel librdmacm fails and the error is the stack's
    // condition (errc::no_kernel_support, equivalent to
    // operation_not_supported) or its errno; a stub that could not forward
    // gives std::errc::operation_not_supported itself.
    if (ch || ch.error() != std::make_error_code(std::errc::operation_not_supported))
      return 0;
    return ch.error().value();
  } else {
    return load(library::rdmacm) ? 0 : -1;
  }
}
} // namespace

int main() {
  auto list = device_list::get();
  (void)list;
  check(usable(status(library::ibverbs).state), "libibverbs loaded");
  const std::string_view unused = "not loaded: no rdma_* function in this program";
  auto cm = status(library::rdmacm);
  if (loaded_at_start) {
    check(usable(cm.state), "librdmacm loaded by the constructor");
  } else {
    check(cm.state == library_state::not_loaded, "librdmacm not loaded");
    check(cm.error == unused, "its error says why");
    check(cm.path.empty(), "no path");
    check(reason().find(unused) != std::string_view::npos, "the reason says why");
  }
  std::vector<int> got(4, -2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; i++)
    threads.emplace_back([&got, i] { got[static_cast<std::size_t>(i)] = first_use(); });
  for (auto &t : threads)
    t.join();
  for (int g : got)
    check(g == 0, "the first use reaches librdmacm");
  cm = status(library::rdmacm);
  check(usable(cm.state), "librdmacm loaded by its first use");
  check(!cm.path.empty(), "its path");
  check(reason().find(unused) == std::string_view::npos, "the reason describes it");
  check(reason().find("librdmacm.so.1 (") != std::string_view::npos, "the reason names it");
  if (!failures)
    std::printf("cm-use: ok (%s)\n",
                loaded_at_start ? "loaded by the constructor" : "loaded by its first use");
  return failures != 0;
}

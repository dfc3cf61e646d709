// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include "detail.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/runtime.hpp"

#include <cstddef>
#include <iterator>
#include <mutex>

namespace rdmadl {
namespace {
std::string_view sv(const char *s) noexcept {
  return s ? std::string_view(s) : std::string_view();
}
bool resolved(const char *name) noexcept {
  return rdmadl_symbol_status(name, nullptr) == 1;
}
} // namespace

bool available() noexcept {
  return rdmadl_load() == 0;
}

library_status status(library lib) {
  auto l = static_cast<rdmadl_lib>(lib);
  library_status s{};
  s.state = static_cast<library_state>(rdmadl_lib_state(l));
  s.state_name = sv(rdmadl_state_name(rdmadl_lib_state(l)));
  s.requested = sv(rdmadl_lib_requested(l));
  s.path = sv(rdmadl_lib_path(l));
  s.error = sv(rdmadl_lib_error(l));
  s.version_node = sv(rdmadl_lib_version_node(l));
  s.symbol_count = rdmadl_lib_symbol_count(l);
  std::size_t n = rdmadl_lib_missing_count(l);
  s.missing.reserve(n);
  for (std::size_t i = 0; i < n; i++) {
    const char *m = rdmadl_lib_missing_symbol(l, i);
    s.missing.push_back(sv(m));
    // (rdmadl_symbol_status would load a library not loaded yet.)
    if (s.state != library_state::not_loaded &&
        rdmadl_symbol_status(m, nullptr) == RDMADL_SYMBOL_EMULATED)
      s.emulated.push_back(sv(m));
  }
  return s;
}

bool load(library lib) noexcept {
  return rdmadl_lib_load(static_cast<rdmadl_lib>(lib)) == 0;
}

std::string_view soname(library lib) noexcept {
  return sv(rdmadl_lib_name(static_cast<rdmadl_lib>(lib)));
}

stack_state stack() noexcept {
  return static_cast<stack_state>(rdmadl_stack_state());
}

std::string_view name(stack_state s) noexcept {
  return sv(rdmadl_stack_name(static_cast<rdmadl_stack>(s)));
}

std::string_view reason() noexcept {
  return sv(rdmadl_reason());
}

diagnosis diagnose() noexcept {
  rdmadl_stack st = RDMADL_STACK_NO_LIBRARY;
  int ok = 0;
  const char *sentence = rdmadl_verdict_state(&st, &ok);
  diagnosis d{ok != 0, static_cast<stack_state>(st), {}, sv(sentence)};
  if (d.usable)
    return d;
  switch (d.state) {
  case stack_state::disabled:
  case stack_state::no_library:
    d.error = std::make_error_code(std::errc::operation_not_supported);
    break;
  case stack_state::no_kernel_support:
    d.error = make_error_code(errc::no_kernel_support);
    break;
  case stack_state::no_devices:
    d.error = make_error_code(errc::no_devices);
    break;
  case stack_state::ready:
    d.error = make_error_code(errc::no_active_port);
    break;
  }
  return d;
}

namespace {
// The C++ handler rides on the C one, whose context is one of two slots:
// the slot rewritten is never the current handler's, and the one before it
// is not running anymore (the C call that replaced it waited for it).
struct cxx_sink {
  log_fn fn;
  void *ctx;
};
thread_local bool in_handler = false;
void forward(int level, const char *line, void *ctx) {
  auto *s = static_cast<cxx_sink *>(ctx);
  in_handler = true;
  s->fn(static_cast<log_level>(level), line, s->ctx);
  in_handler = false;
}
} // namespace

std::error_code set_log_handler(log_level max_level, log_fn fn, void *ctx) noexcept {
  static cxx_sink slots[2];
  static unsigned next = 0; // guarded by mu
  static std::mutex mu;
  if (in_handler)
    return std::make_error_code(std::errc::resource_deadlock_would_occur);
  std::lock_guard<std::mutex> lock(mu);
  int r;
  if (!fn) {
    r = rdmadl_set_log_handler(0, nullptr, nullptr);
  } else {
    cxx_sink *s = &slots[next & 1];
    *s = {fn, ctx};
    r = rdmadl_set_log_handler(static_cast<int>(max_level), forward, s);
    if (r == 0)
      next++;
  }
  return r ? std::error_code(r, std::generic_category()) : std::error_code();
}

bool supports(feature f) noexcept {
  if (!available())
    return false;
  switch (f) {
  case feature::extended_cq:
    return true; // a provider op: see context::supports()
  case feature::wr_api:
    return resolved("ibv_qp_to_qp_ex");
  case feature::query_gid_ex:
    return resolved("_ibv_query_gid_ex");
  case feature::dmabuf_mr:
    return resolved("ibv_reg_dmabuf_mr");
  case feature::reg_mr_iova:
    return resolved("ibv_reg_mr_iova2");
  case feature::rdma_cm:
    // Loads librdmacm if the program has not used it yet (asking is using).
    return rdmadl_lib_load(RDMADL_LIB_RDMACM) == 0;
  case feature::srq:
    return resolved("ibv_create_srq");
  }
  return false;
}

std::string_view name(feature f) noexcept {
  // In the enum's order; srq is its last value.
  static constexpr std::string_view names[] = {
      "extended-cq", "wr-api", "query-gid-ex", "dmabuf-mr", "reg-mr-iova", "rdma-cm", "srq"};
  static_assert(std::size(names) == static_cast<std::size_t>(feature::srq) + 1);
  return detail::pick(names, f);
}

} // namespace rdmadl

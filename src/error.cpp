// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"
#include "refusal.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "detail.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/qp.hpp"

namespace rdmadl {
namespace {

class rdmadl_category final : public std::error_category {
public:
  const char *name() const noexcept override { return "rdmadl"; }
  std::string message(int v) const override {
    switch (static_cast<errc>(v)) {
#define RDMADL_ERRC_MESSAGE(name, cond, msg)                                                       \
  case errc::name:                                                                                 \
    return msg;
      RDMADL_ERRC_TABLE(RDMADL_ERRC_MESSAGE)
#undef RDMADL_ERRC_MESSAGE
    default:
      break;
    }
    return "unknown rdmadl error " + std::to_string(v);
  }
  std::error_condition default_error_condition(int v) const noexcept override {
    switch (static_cast<errc>(v)) {
#define RDMADL_ERRC_CONDITION(name, cond, msg)                                                     \
  case errc::name:                                                                                 \
    return std::errc::cond;
      RDMADL_ERRC_TABLE(RDMADL_ERRC_CONDITION)
#undef RDMADL_ERRC_CONDITION
    default:
      break;
    }
    return {v, *this};
  }
  // "No device" also means "RDMA cannot work here".
  bool equivalent(int v, const std::error_condition &cond) const noexcept override {
    if (v == static_cast<int>(errc::no_devices) && cond == std::errc::operation_not_supported)
      return true;
    return default_error_condition(v) == cond;
  }
};

class wc_category_impl final : public std::error_category {
public:
  const char *name() const noexcept override { return "rdmadl.wc"; }
  std::string message(int v) const override {
    return ibv_wc_status_str(static_cast<ibv_wc_status>(v));
  }
  std::error_condition default_error_condition(int v) const noexcept override {
    switch (v) {
    case IBV_WC_WR_FLUSH_ERR:
      return std::errc::operation_canceled;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return std::errc::timed_out;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
      return std::errc::permission_denied;
    default:
      return {v, *this};
    }
  }
};

} // namespace

const std::error_category &error_category() noexcept {
  static const rdmadl_category c;
  return c;
}

const std::error_category &wc_category() noexcept {
  static const wc_category_impl c;
  return c;
}

namespace {
// The detail of this thread's last failed call (see last_error_detail()).
thread_local std::string error_detail;
} // namespace

std::string_view last_error_detail() noexcept {
  return error_detail;
}

namespace detail {
void clear_error_detail() noexcept {
  error_detail.clear();
}
void set_error_detail(std::string text) noexcept {
  error_detail = std::move(text);
}
status_code fail(status_code s, std::string text) noexcept {
  error_detail = std::move(text);
  return s;
}

std::string format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list again;
  va_copy(again, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0)
    std::vsnprintf(out.data(), out.size() + 1, fmt, again);
  va_end(again);
  return out;
}

void bad_result_access(int value, const std::error_category *cat, const char *file,
                       const char *function, unsigned line) noexcept {
  std::error_code ec = cat ? std::error_code(value, *cat) : std::error_code();
  std::fprintf(stderr, "rdmadl: %s:%u: in %s: value() of a result holding an error: %s: %s\n", file,
               line, function, ec.category().name(), ec.message().c_str());
  if (!error_detail.empty())
    std::fprintf(stderr, "rdmadl: this thread's last error detail: %s\n", error_detail.c_str());
  std::abort();
}
const std::error_category *generic() noexcept {
  return &std::generic_category();
}
const std::error_category *own() noexcept {
  return &error_category();
}
status_code empty_status() noexcept {
  return rdma_error(make_error_code(errc::empty_object));
}

namespace {
// The condition of a stack that cannot work, or {} when it can (or may).
std::error_code stack_condition(rdmadl_stack st) noexcept {
  switch (st) {
  case RDMADL_STACK_READY:
    return {};
  case RDMADL_STACK_NO_DEVICES:
    return make_error_code(errc::no_devices);
  case RDMADL_STACK_NO_KERNEL_SUPPORT:
    return make_error_code(errc::no_kernel_support);
  default:
    return std::make_error_code(std::errc::operation_not_supported);
  }
}

// "ibv_reg_dmabuf_mr (IBVERBS_1.12) is not in the loaded libibverbs.so.1,
// whose newest version node is IBVERBS_1.11".
std::string lacks_detail(unsigned idx) {
  rdmadl_lib lib = RDMADL_LIB_IBVERBS;
  const char *name = rdmadl_symbol_name(idx, &lib);
  const char *node = nullptr;
  if (!name || rdmadl_symbol_status(name, &node) == RDMADL_SYMBOL_UNKNOWN)
    return {};
  const char *have = rdmadl_lib_version_node(lib);
  return format("%s (%s) is not in the loaded %s, whose newest version node is %s: a newer "
                "rdma-core has it",
                name, node ? node : "?", rdmadl_lib_name(lib), have ? have : "unknown");
}
} // namespace

std::error_code rdma_error(int e) noexcept {
  if (e < 0)
    e = -e;
  unsigned idx = 0;
  switch (rdmadl_refusal_take(&idx)) {
  case RDMADL_REFUSED_LACKS:
    if (e == 0 || e == EOPNOTSUPP) {
      set_error_detail(lacks_detail(idx));
      return make_error_code(errc::library_lacks);
    }
    break;
  case RDMADL_REFUSED_ABSENT:
  case RDMADL_REFUSED_DISABLED:
    if (e == 0 || e == EOPNOTSUPP)
      return std::make_error_code(std::errc::operation_not_supported);
    break;
  case RDMADL_REFUSED_NONE:
    break;
  }
  if (auto st = stack_condition(rdmadl_stack_seen()))
    return st;
  return errno_code(e ? e : EOPNOTSUPP);
}

std::error_code rdma_error(std::error_code ec) noexcept {
  if (!available())
    return std::make_error_code(std::errc::operation_not_supported);
  if (auto st = stack_condition(rdmadl_stack_seen()))
    return st;
  return ec;
}

// What EAGAIN from creating a device object (a QP, CQ, PD, MR...) means: the
// kernel's rdma cgroup refused to charge it (its rdma.max hca_object, or
// hca_handle for a context, is reached). Ends in "; ".
constexpr const char *cgroup_note =
    "the rdma cgroup's limit of device objects (rdma.max hca_object) is reached; ";

std::error_code resource_error(const char *call, const char *what, const char *limit_name,
                               long limit, int e) noexcept {
  if (e < 0)
    e = -e;
  std::error_code ec = rdma_error(e);
  if (e && ec == errno_code(e))
    set_error_detail(format("%s: no %s could be created: %s (errno %d; %sthe device allows %s %ld "
                            "in all)",
                            call, what, std::strerror(e), e, e == EAGAIN ? cgroup_note : "",
                            limit_name, limit));
  return ec;
}

void forget_refusal() noexcept {
  rdmadl_refusal_take(nullptr);
}
} // namespace detail

} // namespace rdmadl

// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "rdmadl/error.hpp"

namespace rdmadl {
namespace {

class rdmadl_category final : public std::error_category {
public:
  const char *name() const noexcept override { return "rdmadl"; }
  std::string message(int v) const override {
    switch (static_cast<errc>(v)) {
    case errc::no_devices:
      return "no RDMA device found";
    case errc::no_kernel_support:
      return "libibverbs is installed but the kernel has no RDMA support";
    case errc::empty_object:
      return "operation on an empty (moved-from or default-constructed) object";
    case errc::empty_span:
      return "empty buffer: at least one element is needed";
    case errc::out_of_range:
      return "offset or length outside the registered region";
    case errc::bad_size:
      return "serialised blob has the wrong size";
    case errc::bad_magic:
      return "serialised blob is not of the expected kind (bad magic)";
    case errc::newer_format:
      return "serialised blob uses a newer format version than this build reads";
    case errc::no_such_gid:
      return "no GID of the wanted type or address on this port";
    case errc::no_active_port:
      return "the device has no active port";
    case errc::memlock_limit:
      return "cannot register memory: locked-memory limit reached (raise it with `ulimit -l`)";
    case errc::memlock_denied:
      return "cannot register memory: not permitted, check the locked-memory limit (`ulimit -l`)";
    case errc::timed_out:
      return "timed out";
    case errc::batch_full:
      return "too many work requests in one batch";
    case errc::unexpected_event:
      return "rdma_cm delivered an unexpected event";
    case errc::rejected:
      return "the peer rejected the connection";
    case errc::wrong_qp_type:
      return "operation not available for this queue pair type";
    }
    return "unknown rdmadl error " + std::to_string(v);
  }
  std::error_condition default_error_condition(int v) const noexcept override {
    switch (static_cast<errc>(v)) {
    case errc::no_devices:
      return std::errc::no_such_device;
    case errc::no_kernel_support:
      return std::errc::operation_not_supported;
    case errc::no_such_gid:
      return std::errc::no_such_device_or_address;
    case errc::no_active_port:
      return std::errc::network_down;
    case errc::memlock_limit:
      return std::errc::not_enough_memory;
    case errc::memlock_denied:
      return std::errc::operation_not_permitted;
    case errc::timed_out:
      return std::errc::timed_out;
    case errc::unexpected_event:
      return std::errc::protocol_error;
    case errc::rejected:
      return std::errc::connection_refused;
    case errc::empty_object:
    case errc::empty_span:
    case errc::out_of_range:
    case errc::bad_size:
    case errc::bad_magic:
    case errc::newer_format:
    case errc::batch_full:
    case errc::wrong_qp_type:
      return std::errc::invalid_argument;
    }
    return {v, *this};
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

namespace detail {
void bad_result_access(const std::error_code &ec) noexcept {
  std::fprintf(stderr, "rdmadl: value() of a result holding an error: %s: %s\n",
               ec.category().name(), ec.message().c_str());
  std::abort();
}
} // namespace detail

} // namespace rdmadl

// SPDX-License-Identifier: MIT
// rdmadl/error.hpp - result<T> and rdmadl's error categories.
//
// Every rdmadl call that can fail returns result<T>: a T or a std::error_code,
// never both, never an exception (the library builds with -fno-exceptions).
//   - errno values from rdma-core use std::generic_category(), so
//     `r.error() == std::errc::connection_refused` works as expected;
//   - with no RDMA stack (library absent, RDMADL_DISABLE=1, kernel without
//     RDMA) every call fails with an error equal to
//     std::errc::operation_not_supported;
//   - rdmadl's own conditions use rdmadl::errc (error_category()), each of
//     which also compares equal to the closest std::errc;
//   - failed work completions use wc_category(), whose values are
//     enum ibv_wc_status (message: ibv_wc_status_str()).
#ifndef RDMADL_ERROR_HPP
#define RDMADL_ERROR_HPP

#include <cstdlib>
#include <memory>
#include <new>
#include <system_error>
#include <type_traits>
#include <utility>

namespace rdmadl {

// rdmadl's own error values. Each one is equivalent to the std::errc noted.
enum class errc : int {
  no_devices = 1,    // no RDMA device present (std::errc::no_such_device)
  no_kernel_support, // libibverbs loaded, kernel has no RDMA (operation_not_supported)
  empty_object,      // the object was moved from or default-constructed (invalid_argument)
  empty_span,        // an empty span was passed where data is needed (invalid_argument)
  out_of_range,      // offset/length outside the region (invalid_argument)
  bad_size,          // serialised blob has the wrong size (invalid_argument)
  bad_magic,         // serialised blob is not of the expected kind (invalid_argument)
  newer_format,      // serialised blob from a newer format version (invalid_argument)
  no_such_gid,       // no GID of the wanted type/address on the port (no_such_device_or_address)
  no_active_port,    // the device has no active port (network_down)
  memlock_limit,     // ibv_reg_mr: ENOMEM, usually RLIMIT_MEMLOCK (not_enough_memory)
  memlock_denied,    // ibv_reg_mr: EPERM, usually RLIMIT_MEMLOCK (operation_not_permitted)
  timed_out,         // a wait ran out of time (std::errc::timed_out)
  batch_full,        // too many work requests in one batch (invalid_argument)
  unexpected_event,  // rdma_cm delivered another event than the one awaited (protocol_error)
  rejected,          // the peer rejected the connection (connection_refused)
  wrong_qp_type,     // the operation does not exist for this QP type (invalid_argument)
};

// The category of rdmadl::errc values; name() is "rdmadl".
const std::error_category &error_category() noexcept;
// The category of work-completion statuses (enum ibv_wc_status); name() is "rdmadl.wc".
const std::error_category &wc_category() noexcept;

// An error_code for an rdmadl::errc value.
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// An error_code for an errno value (generic category).
inline std::error_code errno_code(int e) noexcept {
  return {e, std::generic_category()};
}

} // namespace rdmadl

template <> struct std::is_error_code_enum<rdmadl::errc> : std::true_type {};

namespace rdmadl {

namespace detail {
[[noreturn]] void bad_result_access(const std::error_code &ec) noexcept;
}

// A value of type T or an error. Accessing the value of an error result
// aborts the process (there are no exceptions) after printing the error.
template <class T> class [[nodiscard]] result {
  static_assert(!std::is_reference_v<T>, "result<T&> is not supported");

public:
  using value_type = T;

  // A result holding a value.
  result(const T &v) requires std::is_copy_constructible_v<T> : has_(true) {
    ::new (std::addressof(value_)) T(v);
  }
  result(T &&v) : has_(true) { ::new (std::addressof(value_)) T(std::move(v)); }
  // A result holding an error. ec must not be 0.
  result(std::error_code ec) noexcept : error_(ec), has_(false) {}
  result(errc e) noexcept : error_(make_error_code(e)), has_(false) {}
  result(std::errc e) noexcept : error_(std::make_error_code(e)), has_(false) {}

  result(const result &o) requires std::is_copy_constructible_v<T> : error_(o.error_),
                                                                     has_(o.has_) {
    if (has_)
      ::new (std::addressof(value_)) T(o.value_);
  }
  result(result &&o) noexcept(std::is_nothrow_move_constructible_v<T>)
      : error_(o.error_), has_(o.has_) {
    if (has_)
      ::new (std::addressof(value_)) T(std::move(o.value_));
  }
  result &operator=(result o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) {
      reset();
      error_ = o.error_;
      if (o.has_)
        ::new (std::addressof(value_)) T(std::move(o.value_));
      has_ = o.has_;
    }
    return *this;
  }
  ~result() { reset(); }

  bool has_value() const noexcept { return has_; }
  explicit operator bool() const noexcept { return has_; }

  // The value; aborts if this holds an error.
  T &value() & {
    check();
    return value_;
  }
  const T &value() const & {
    check();
    return value_;
  }
  T &&value() && {
    check();
    return std::move(value_);
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T &&operator*() && { return std::move(*this).value(); }
  T *operator->() { return std::addressof(value()); }
  const T *operator->() const { return std::addressof(value()); }

  // The value, or fallback when this holds an error.
  template <class U> T value_or(U &&fallback) const & {
    return has_ ? value_ : static_cast<T>(std::forward<U>(fallback));
  }
  template <class U> T value_or(U &&fallback) && {
    return has_ ? std::move(value_) : static_cast<T>(std::forward<U>(fallback));
  }

  // The error; a default (0, "success") error_code when this holds a value.
  std::error_code error() const noexcept { return has_ ? std::error_code() : error_; }

private:
  void check() const {
    if (!has_)
      detail::bad_result_access(error_);
  }
  void reset() noexcept {
    if (has_)
      value_.~T();
    has_ = false;
  }
  union {
    T value_;
  };
  std::error_code error_;
  bool has_;
};

// Success or an error.
template <> class [[nodiscard]] result<void> {
public:
  using value_type = void;
  // Success.
  result() noexcept = default;
  // An error. ec must not be 0.
  result(std::error_code ec) noexcept : error_(ec) {}
  result(errc e) noexcept : error_(make_error_code(e)) {}
  result(std::errc e) noexcept : error_(std::make_error_code(e)) {}

  bool has_value() const noexcept { return !error_; }
  explicit operator bool() const noexcept { return !error_; }
  // Aborts if this holds an error.
  void value() const {
    if (error_)
      detail::bad_result_access(error_);
  }
  std::error_code error() const noexcept { return error_; }

private:
  std::error_code error_;
};

} // namespace rdmadl

#endif // RDMADL_ERROR_HPP

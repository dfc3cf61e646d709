// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/error.hpp - result<T> and rdmadl's error categories.
///
/// Every rdmadl call that can fail returns result<T>: a T or an error, never
/// both, never an exception (the library builds with -fno-exceptions).
///   - errno values from rdma-core use std::generic_category(), so
///     `r.error() == std::errc::connection_refused` works as expected;
///   - whenever RDMA cannot work on this host (no library, RDMADL_DISABLE=1,
///     a library but no kernel support, kernel support but no device) every
///     call that needs it fails with an error equal to
///     std::errc::operation_not_supported (the code itself may be more
///     specific: errc::no_kernel_support, errc::no_devices);
///   - rdmadl's own conditions use rdmadl::errc (error_category()), each of
///     which also compares equal to the closest std::errc;
///   - failed work completions use wc_category(), whose values are
///     enum ibv_wc_status (message: ibv_wc_status_str()).
///
/// A result stores its error as (value, category pointer): a successful
/// result is a null pointer, so creating, testing and returning one calls
/// nothing in the standard library (std::error_code's default constructor
/// calls std::system_category()). error() builds the std::error_code.
///
/// Calls whose failures have more to say than a code (which field of a peer's
/// endpoint is wrong, which host and port timed out) also leave a sentence
/// for the calling thread in last_error_detail().
#ifndef RDMADL_ERROR_HPP
#define RDMADL_ERROR_HPP

#include <memory>
#include <new>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "rdmadl/export.hpp"

/// The one table of rdmadl::errc: X(name, equivalent std::errc, message).
/// The first entry has the value 1; the rest follow in order.
#define RDMADL_ERRC_TABLE(X)                                                                       \
  X(no_devices, no_such_device, "no RDMA device found")                                            \
  X(no_kernel_support, operation_not_supported,                                                    \
    "libibverbs is installed but the kernel has no RDMA support")                                  \
  X(empty_object, invalid_argument,                                                                \
    "operation on an empty (moved-from or default-constructed) object")                            \
  X(empty_span, invalid_argument, "empty buffer: at least one element is needed")                  \
  X(out_of_range, invalid_argument, "offset or length outside the registered region")              \
  X(bad_size, invalid_argument, "serialised blob has the wrong size")                              \
  X(bad_magic, invalid_argument, "serialised blob is not of the expected kind (bad magic)")        \
  X(newer_format, invalid_argument,                                                                \
    "serialised blob uses a newer format version than this build reads")                           \
  X(no_such_gid, no_such_device_or_address, "no GID of the wanted type or address on this port")   \
  X(no_active_port, network_down, "the device has no active port")                                 \
  X(memlock_limit, not_enough_memory,                                                              \
    "cannot register memory: locked-memory limit reached (raise it with `ulimit -l`)")             \
  X(memlock_denied, operation_not_permitted,                                                       \
    "cannot register memory: not permitted, check the locked-memory limit (`ulimit -l`)")          \
  X(timed_out, timed_out, "timed out")                                                             \
  X(batch_full, invalid_argument, "too many work requests in one batch")                           \
  X(unexpected_event, protocol_error, "rdma_cm delivered an unexpected event")                     \
  X(rejected, connection_refused, "the peer rejected the connection")                              \
  X(wrong_qp_type, invalid_argument, "operation not available for this queue pair type")           \
  X(batch_busy, device_or_resource_busy, "another send batch is open on this queue pair")          \
  X(bad_blob, invalid_argument,                                                                    \
    "serialised blob has a field serialize() never writes (reserved bytes, range)")                \
  X(not_honoured, invalid_argument, "an option that this kind of object cannot honour was set")    \
  X(rank_refused, connection_refused,                                                              \
    "rdma_cm peer refused: its rank was malformed, outside the accepted range or already taken")   \
  X(wrong_device, no_such_device,                                                                  \
    "an rdma_cm peer is on another device than the channel's first peer")                          \
  X(library_lacks, operation_not_supported,                                                        \
    "the loaded libibverbs release lacks this call (a newer rdma-core has it)")                    \
  X(no_such_peer, invalid_argument, "the channel has no peer of that index")                       \
  X(short_results, invalid_argument, "the results span is shorter than the list of parts")         \
  X(channel_busy, device_or_resource_busy,                                                         \
    "another polling scope or blocking call is running on this channel")                           \
  X(peer_failed, not_connected,                                                                    \
    "the peer's queue pair is in the error state after a failed or timed-out request")             \
  X(too_many_peers, invalid_argument,                                                              \
    "more peers than the device allows (max_qp queue pairs, or max_cqe CQ entries at 2 per peer)") \
  X(gid_mismatch, network_unreachable,                                                             \
    "the peer's GID cannot be reached from ours (address family, scope or subnet differ, or one "  \
    "side has no GID; rdmadl::last_error_detail() says which)")                                    \
  X(no_lid, network_unreachable,                                                                   \
    "an InfiniBand port has LID 0 (no subnet manager has configured it)")                          \
  X(bad_peer_qpn, invalid_argument,                                                                \
    "the peer's endpoint has no usable QP number (0, 1 or above 24 bits)")                         \
  X(bad_peer_mtu, invalid_argument,                                                                \
    "the peer's endpoint has an MTU that is not 256, 512, 1024, 2048 or 4096 bytes")               \
  X(peer_closed, connection_reset, "the peer closed the out-of-band connection")                   \
  X(no_listener, invalid_argument,                                                                 \
    "rdma_cm connections are to be accepted but no listener was given")                            \
  X(no_peers, invalid_argument, "a channel needs at least one peer")                               \
  X(endpoint_count, invalid_argument,                                                              \
    "the number of endpoints given is not the channel's number of peers")                          \
  X(unknown_handle, invalid_argument, "the work handle was not posted in this polling scope")      \
  X(slice_too_long, invalid_argument,                                                              \
    "a local slice is at most 4 GiB - 1 bytes (a scatter/gather element's length is 32 bits)")     \
  X(over_limit, invalid_argument,                                                                  \
    "an out-of-band blob is larger than the size limit (oob::max_blob, or the connection's)")      \
  X(bad_rank, invalid_argument,                                                                    \
    "a rank outside the group (rank not below the number of nodes, or first_rank + accept past "   \
    "2^32)")                                                                                       \
  X(one_peer_only, invalid_argument,                                                               \
    "a channel has exactly one peer (use multi_channel for more)")                                 \
  X(no_common_transport, protocol_not_supported,                                                   \
    "the peer and this side allow no common transport (RDMA on both sides, or TCP on both)")

namespace rdmadl {

/// rdmadl's own error values, one per RDMADL_ERRC_TABLE row, in its order
/// (the first is 1). Each one is equivalent to the std::errc of its row (so
/// `r.error() == std::errc::invalid_argument` holds for errc::bad_size);
/// no_devices is also equal to operation_not_supported (RDMA cannot work
/// here). message() is the row's text; the category is error_category().
enum class errc : int {
  rdmadl_errc_first_ = 0, ///< not an error value: a placeholder so the first row is 1
// One enumerator per RDMADL_ERRC_TABLE row (docs/Doxyfile documents them).
#define RDMADL_ERRC_ENUM(name, cond, msg) name,
  RDMADL_ERRC_TABLE(RDMADL_ERRC_ENUM)
#undef RDMADL_ERRC_ENUM
};

/// The category of rdmadl::errc values; name() is "rdmadl".
RDMADL_CXX_API const std::error_category &error_category() noexcept;
/// The category of work-completion statuses (enum ibv_wc_status); name() is "rdmadl.wc".
RDMADL_CXX_API const std::error_category &wc_category() noexcept;

/// An error_code for an rdmadl::errc value.
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// An error_code for an errno value (generic category).
inline std::error_code errno_code(int e) noexcept {
  return {e, std::generic_category()};
}

} // namespace rdmadl

/// @cond INTERNAL
/// Lets an rdmadl::errc convert to, and compare with, std::error_code.
template <> struct std::is_error_code_enum<rdmadl::errc> : std::true_type {};
/// @endcond

namespace rdmadl {

/// What the calling thread's last failed call had to say beyond its error
/// code: which field of a peer's endpoint is wrong and what to set instead,
/// or which host, port and side of an out-of-band exchange failed.
///
/// Set by queue_pair::connect() (and so multi_channel::handshake()),
/// oob::exchange(), the oob::connection calls, rdmadl::connect() and
/// listener::bind(): each clears it when it
/// starts and sets it when it fails with a detail, so after a success it is
/// empty. Other calls leave it alone. Per thread; the view stays valid until
/// the next of those calls on this thread.
/// @return the sentence, or an empty view when there is none.
RDMADL_CXX_API std::string_view last_error_detail() noexcept;

/// Where a call is written: the default argument of result<T>::value() takes
/// its caller's file, function and line. (std::source_location would do, but
/// clang before 15 cannot provide it with libstdc++; these builtins are what
/// it is made of in GCC and clang alike.)
struct call_site {
  const char *file = "";     ///< the source file (__FILE__ of the caller)
  const char *function = ""; ///< the enclosing function's name
  unsigned line = 0;         ///< the line in file
  /// The call site of the expression this is the default argument of.
  static constexpr call_site current(const char *f = __builtin_FILE(),
                                     const char *fn = __builtin_FUNCTION(),
                                     unsigned l = __builtin_LINE()) noexcept {
    return {f, fn, l};
  }
};

namespace detail {
[[noreturn]] RDMADL_CXX_API void bad_result_access(int value, const std::error_category *cat,
                                                   const char *file, const char *function,
                                                   unsigned line) noexcept;
/// The generic category, taken once per call site only on error paths.
RDMADL_CXX_API const std::error_category *generic() noexcept;
RDMADL_CXX_API const std::error_category *own() noexcept;
} // namespace detail

/// An error kept as (value, category); the category is null for success.
/// Converts to std::error_code on demand. Trivially copyable.
class status_code {
public:
  /// Success.
  constexpr status_code() noexcept = default;
  /// ec as it is; a 0 (success) code of any category is success.
  status_code(std::error_code ec) noexcept : v_(ec.value()), cat_(ec ? &ec.category() : nullptr) {}
  /// An rdmadl error (error_category()).
  status_code(errc e) noexcept : v_(static_cast<int>(e)), cat_(detail::own()) {}
  /// A std::errc value (generic category).
  status_code(std::errc e) noexcept : v_(static_cast<int>(e)), cat_(detail::generic()) {}
  /// An errno value (generic category); 0 is success.
  static status_code from_errno(int e) noexcept {
    status_code s;
    if (e) {
      s.v_ = e;
      s.cat_ = detail::generic();
    }
    return s;
  }
  /// A provider's return value: 0, an errno value, or (some providers) a
  /// negated one.
  static status_code from_rc(int rc) noexcept { return from_errno(rc < 0 ? -rc : rc); }
  /// True for success.
  constexpr bool ok() const noexcept { return cat_ == nullptr; }
  /// True for an error (the opposite of ok(), and of result's operator bool).
  constexpr explicit operator bool() const noexcept { return cat_ != nullptr; }
  /// The std::error_code; a default (0, system category) one for success.
  std::error_code code() const noexcept {
    return cat_ ? std::error_code(v_, *cat_) : std::error_code();
  }
  /// The error value (errno, errc or ibv_wc_status, by category); 0 for success.
  int value() const noexcept { return v_; }
  /// The category; null for success.
  const std::error_category *category() const noexcept { return cat_; }

private:
  int v_ = 0;
  const std::error_category *cat_ = nullptr;
};

/// A value of type T or an error. Accessing the value of an error result
/// aborts the process (there are no exceptions) after printing the error.
template <class T> class [[nodiscard]] result {
  static_assert(!std::is_reference_v<T>, "result<T&> is not supported");

public:
  using value_type = T; ///< the type held on success

  /// A result holding a copy of v.
  result(const T &v) requires std::is_copy_constructible_v<T> {
    ::new (std::addressof(value_)) T(v);
  }
  /// A result holding v, moved in.
  result(T &&v) noexcept(std::is_nothrow_move_constructible_v<T>) {
    ::new (std::addressof(value_)) T(std::move(v));
  }
  /// A result holding an error. The error must not be 0 (success); a 0 code
  /// is stored as errc::empty_object so that the result is never both.
  [[gnu::always_inline]] result(status_code s) noexcept
      : err_(s.ok() ? status_code(errc::empty_object) : s) {}
  /// A result holding ec (a 0 code is stored as errc::empty_object).
  result(std::error_code ec) noexcept : result(status_code(ec)) {}
  /// A result holding the rdmadl error e.
  result(errc e) noexcept : err_(e) {}
  /// A result holding the generic-category error e.
  result(std::errc e) noexcept : err_(e) {}

  /// Copies o's value or error (only when T is copyable).
  result(const result &o) requires std::is_copy_constructible_v<T> : err_(o.err_) {
    if (o.has_value())
      ::new (std::addressof(value_)) T(o.value_);
  }
  /// Moves o's value (o keeps a moved-from T) or copies its error.
  result(result &&o) noexcept(std::is_nothrow_move_constructible_v<T>) : err_(o.err_) {
    if (o.has_value())
      ::new (std::addressof(value_)) T(std::move(o.value_));
  }
  /// Destroys the current value, if any, and takes o's value or error.
  result &operator=(result o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    destroy();
    err_ = o.err_;
    if (o.has_value())
      ::new (std::addressof(value_)) T(std::move(o.value_));
    return *this;
  }
  /// Destroys the value, if any.
  ~result() { destroy(); }

  /// True when this holds a value.
  bool has_value() const noexcept { return err_.ok(); }
  /// True when this holds a value (false: error() says why).
  explicit operator bool() const noexcept { return err_.ok(); }

  /// The value. If this holds an error, prints the error, this thread's
  /// last_error_detail() and the caller's file:line and function to stderr
  /// and aborts: test the result first. (`*r` and `r->` abort the same way
  /// but name this header, not their caller.)
  [[gnu::always_inline]] T &value(call_site where = call_site::current()) & {
    check(where);
    return value_;
  }
  /// The value; aborts naming the caller if this holds an error (see above).
  [[gnu::always_inline]] const T &value(call_site where = call_site::current()) const & {
    check(where);
    return value_;
  }
  /// The value, moved out; aborts naming the caller if this holds an error.
  [[gnu::always_inline]] T &&value(call_site where = call_site::current()) && {
    check(where);
    return std::move(value_);
  }
  /**@{*/
  /// Access to the value, as value(): aborts if this holds an error.
  [[gnu::always_inline]] T &operator*() & { return value(); }
  [[gnu::always_inline]] const T &operator*() const & { return value(); }
  [[gnu::always_inline]] T &&operator*() && { return std::move(*this).value(); }
  [[gnu::always_inline]] T *operator->() { return std::addressof(value()); }
  [[gnu::always_inline]] const T *operator->() const { return std::addressof(value()); }
  /**@}*/

  /// The value, or fallback when this holds an error.
  template <class U> T value_or(U &&fallback) const & {
    return has_value() ? value_ : static_cast<T>(std::forward<U>(fallback));
  }
  /// The value moved out, or fallback when this holds an error.
  template <class U> T value_or(U &&fallback) && {
    return has_value() ? std::move(value_) : static_cast<T>(std::forward<U>(fallback));
  }

  /// The error; a default (0, "success") error_code when this holds a value.
  std::error_code error() const noexcept { return err_.code(); }

private:
  // Always inlined, with the call site in registers, so that the success
  // path stays a test and a branch (checked with bench/cxx/run-host.sh).
  [[gnu::always_inline]] void check(call_site where) const {
    if (!err_.ok()) [[unlikely]]
      detail::bad_result_access(err_.value(), err_.category(), where.file, where.function,
                                where.line);
  }
  void destroy() noexcept {
    if (has_value())
      value_.~T();
  }
  union {
    T value_;
  };
  status_code err_;
};

/// Success or an error.
template <> class [[nodiscard]] result<void> {
public:
  using value_type = void; ///< no value: success is all a result<void> holds
  /// Success.
  constexpr result() noexcept = default;
  /// An error; a 0 code is success.
  result(status_code s) noexcept : err_(s) {}
  /// ec; a 0 code is success.
  result(std::error_code ec) noexcept : err_(ec) {}
  /// The rdmadl error e.
  result(errc e) noexcept : err_(e) {}
  /// The generic-category error e.
  result(std::errc e) noexcept : err_(e) {}

  /// True on success.
  bool has_value() const noexcept { return err_.ok(); }
  /// True on success (false: error() says why).
  explicit operator bool() const noexcept { return err_.ok(); }
  /// Aborts if this holds an error, naming the caller as result<T>::value() does.
  [[gnu::always_inline]] void value(call_site where = call_site::current()) const {
    if (!err_.ok()) [[unlikely]]
      detail::bad_result_access(err_.value(), err_.category(), where.file, where.function,
                                where.line);
  }
  /// The error; a default (0, "success") error_code on success.
  std::error_code error() const noexcept { return err_.code(); }

private:
  status_code err_;
};

} // namespace rdmadl

#endif // RDMADL_ERROR_HPP

// SPDX-License-Identifier: MIT
// Internal helpers shared by the implementation files. Include after
// "rdmadl_verbs.h".
#ifndef RDMADL_SRC_DETAIL_HPP
#define RDMADL_SRC_DETAIL_HPP

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "rdmadl/error.hpp"
#include "rdmadl/runtime.hpp"

namespace rdmadl {
class context;
}

namespace rdmadl::detail {

// A context that does not own c; owner (if any) is kept alive with it.
context borrow_context(ibv_context *c, std::shared_ptr<void> owner) noexcept;

// names[v], or "unknown" for a value outside the table.
template <std::size_t N, class E>
std::string_view pick(const std::string_view (&names)[N], E v) noexcept {
  auto i = static_cast<long long>(v);
  return i >= 0 && i < static_cast<long long>(N) ? names[i] : std::string_view("unknown");
}

// v clamped to [1, max], where max <= 0 means "no limit reported".
inline std::uint32_t clamp_to(std::uint32_t v, int max) noexcept {
  std::uint32_t hi = max > 0 ? static_cast<std::uint32_t>(max) : UINT32_MAX;
  return std::clamp<std::uint32_t>(v, 1, hi);
}
inline int clamp_to(int v, int max) noexcept {
  return std::clamp(v, 1, max > 0 ? max : INT_MAX);
}

// now + timeout, saturating: milliseconds::max() (or any timeout past the
// clock's range) never expires; a negative timeout has expired already.
inline std::chrono::steady_clock::time_point deadline(std::chrono::milliseconds t) noexcept {
  using clock = std::chrono::steady_clock;
  auto now = clock::now();
  if (t.count() <= 0)
    return now;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(clock::time_point::max() - now);
  if (t >= left)
    return clock::time_point::max();
  return now + t;
}
// Milliseconds left until d, for poll(2): -1 (no limit) at time_point::max().
inline int poll_timeout(std::chrono::steady_clock::time_point d) noexcept {
  using clock = std::chrono::steady_clock;
  if (d == clock::time_point::max())
    return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - clock::now()).count();
  if (left <= 0)
    return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left + 1);
}
// Whether d has passed; time_point::max() never does (and costs no clock read).
inline bool expired(std::chrono::steady_clock::time_point d) noexcept {
  return d != std::chrono::steady_clock::time_point::max() && std::chrono::steady_clock::now() >= d;
}

// The one error translator: every failure of a call into rdma-core becomes a
// std::error_code here, and nowhere else.
//
// rdma_error(e): the error of a call that failed with errno e, or that
// returned e or -e (0 counts as EOPNOTSUPP). When the loader's stub refused
// the call, it recorded why (loader/refusal.h): the loaded release lacks the
// symbol -> errc::library_lacks (last_error_detail() names the symbol and
// the release); no library, or RDMADL_DISABLE -> operation_not_supported.
// Otherwise, when the stack was last seen unable to work at all (no kernel
// support, no device), the stack's condition (equal to
// operation_not_supported); else e. It never lists devices, except once per
// process when nothing has listed them yet (loader/refusal.h).
std::error_code rdma_error(int e = errno) noexcept;
// rdma_error(ec): an error the caller made itself (errc::empty_object for
// an empty object, or what a failed rdma_cm sequence gave): ec, unless RDMA
// cannot work here at all, when no object could have been made: then the
// stack's condition, as above.
std::error_code rdma_error(std::error_code ec) noexcept;
template <class T> result<T> rdma_error(result<T> r) {
  if (r)
    return r;
  return rdma_error(r.error());
}
// resource_error(call, what, limit_name, limit, e): a device object that
// could not be made (call failed with errno e): rdma_error(e), and when that
// is e itself, last_error_detail() names the call, the object, the errno and
// the device's limit: "ibv_create_qp: no queue pair could be created: Cannot
// allocate memory (errno 12; the device allows max_qp 64 in all)".
// With EAGAIN it names the rdma cgroup (cgroup_note): "ibv_create_qp: no
// queue pair could be created: Resource temporarily unavailable (errno 11;
// the rdma cgroup's limit of device objects (rdma.max hca_object) is
// reached; the device allows max_qp 65536 in all)".
std::error_code resource_error(const char *call, const char *what, const char *limit_name,
                               long limit, int e) noexcept;
// Forgets a refusal the caller handled itself (it fell back to another
// call), so that a later failure is not read as that refusal.
void forget_refusal() noexcept;
// last_error_detail(): emptied by the calls that document it when they start;
// fail() sets it and returns s, for `return fail(errc::x, "...")`.
void clear_error_detail() noexcept;
void set_error_detail(std::string text) noexcept;
status_code fail(status_code s, std::string text) noexcept;
// printf into a std::string, for those sentences.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// IBV_MTU_* <-> bytes.
inline std::uint32_t mtu_bytes(int mtu_enum) noexcept {
  return mtu_enum >= 1 && mtu_enum <= 5 ? 128u << mtu_enum : 0;
}
inline ibv_mtu mtu_enum(std::uint32_t bytes) noexcept {
  if (bytes >= 4096)
    return IBV_MTU_4096;
  if (bytes >= 2048)
    return IBV_MTU_2048;
  if (bytes >= 1024)
    return IBV_MTU_1024;
  if (bytes >= 512)
    return IBV_MTU_512;
  return IBV_MTU_256;
}

// The completion fields rdmadl reads from an extended CQ. completion_queue
// and the context::supports(extended_cq) probe ask for the same set.
inline constexpr std::uint64_t cq_ex_wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
                                                IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
                                                IBV_WC_EX_WITH_SLID;
// The ibv_wr_* operations a queue pair of type t is created with; the
// context::supports(wr_api) probe asks for the RC set.
inline std::uint64_t qp_ex_send_ops(ibv_qp_type t) noexcept {
  std::uint64_t f = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
  if (t != IBV_QPT_UD)
    f |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  if (t == IBV_QPT_RC)
    f |= IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
         IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
  return f;
}
// Whether a failed ibv_create_cq_ex / ibv_create_qp_ex means "this provider or
// kernel does not offer it" (fall back to the plain call) rather than a real
// error. Providers and kernels answer EOPNOTSUPP, ENOSYS or EINVAL (rdma-core
// 33's rxe on Linux 5.10: EOPNOTSUPP although the provider op is set).
inline bool not_offered(int e) noexcept {
  return e == EOPNOTSUPP || e == ENOSYS || e == EINVAL || e == 0;
}

} // namespace rdmadl::detail

#endif // RDMADL_SRC_DETAIL_HPP

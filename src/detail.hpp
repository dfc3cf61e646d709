// SPDX-License-Identifier: MIT
// Internal helpers shared by the implementation files. Include after
// "rdmadl_verbs.h".
#ifndef RDMADL_SRC_DETAIL_HPP
#define RDMADL_SRC_DETAIL_HPP

#include <cerrno>
#include <cstdint>
#include <system_error>

#include "rdmadl/error.hpp"
#include "rdmadl/runtime.hpp"

namespace rdmadl::detail {

// The error for a failed call that set errno (EOPNOTSUPP when errno is 0).
inline std::error_code last_error() noexcept {
  return errno_code(errno ? errno : EOPNOTSUPP);
}
// The error for a returned errno value.
inline std::error_code rc_error(int rc) noexcept {
  return errno_code(rc > 0 ? rc : (rc < 0 ? -rc : EIO));
}
// The error of an operation on an empty object: there is no stack at all, or
// the object was moved from.
inline std::error_code empty_error() noexcept {
  return available() ? make_error_code(errc::empty_object)
                     : std::make_error_code(std::errc::operation_not_supported);
}
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

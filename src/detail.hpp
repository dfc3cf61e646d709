// SPDX-License-Identifier: MIT
// Internal helpers shared by the implementation files. Include after
// "rdmadl_verbs.h".
#ifndef RDMADL_SRC_DETAIL_HPP
#define RDMADL_SRC_DETAIL_HPP

#include <cerrno>
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

} // namespace rdmadl::detail

#endif // RDMADL_SRC_DETAIL_HPP

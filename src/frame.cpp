// SPDX-License-Identifier: MIT
#include "frame.hpp"

#include <utility>

namespace rdmadl::detail {

std::array<std::byte, 4> frame_header(std::uint32_t n) noexcept {
  std::array<std::byte, 4> h;
  for (int i = 0; i < 4; i++)
    h[static_cast<std::size_t>(i)] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  return h;
}

std::span<std::byte> frame_reader::room() noexcept {
  if (bad_)
    return {};
  if (!have_len_)
    return std::span<std::byte>(len_).subspan(got_);
  return std::span<std::byte>(blob_).subspan(got_);
}

status_code frame_reader::advance(std::size_t k) {
  if (bad_)
    return errc::over_limit;
  got_ += k;
  if (have_len_ || got_ < len_.size())
    return {};
  std::uint32_t n = 0;
  for (int i = 0; i < 4; i++)
    n |= static_cast<std::uint32_t>(len_[static_cast<std::size_t>(i)]) << (8 * i);
  announced_ = n;
  if (n > limit_) {
    bad_ = true;
    return errc::over_limit;
  }
  have_len_ = true;
  blob_.assign(n, std::byte{0});
  got_ = 0;
  return {};
}

std::vector<std::byte> frame_reader::take() {
  std::vector<std::byte> out = std::move(blob_);
  blob_ = {};
  have_len_ = false;
  got_ = 0;
  announced_ = 0;
  return out;
}

} // namespace rdmadl::detail

// SPDX-License-Identifier: MIT
// The out-of-band framing: each blob travels as a 4-byte little-endian length
// and its bytes. frame_reader parses a byte stream into blobs incrementally
// (a read may stop anywhere), so a timeout keeps what has arrived.
#ifndef RDMADL_SRC_FRAME_HPP
#define RDMADL_SRC_FRAME_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rdmadl/error.hpp"

namespace rdmadl::detail {

// The length prefix of a blob of n bytes.
std::array<std::byte, 4> frame_header(std::uint32_t n) noexcept;

class frame_reader {
public:
  explicit frame_reader(std::size_t limit) noexcept : limit_(limit) {}
  // Where the next bytes of the stream go: the rest of the length prefix, or
  // of the blob. Empty only when done().
  std::span<std::byte> room() noexcept;
  // k bytes (at most room().size()) were written into room(). Errors:
  // errc::over_limit when the length prefix announces more than the limit
  // (the stream cannot be resynchronised: the reader stays in that error).
  status_code advance(std::size_t k);
  // A whole blob is ready for take().
  bool done() const noexcept { return have_len_ && got_ == blob_.size(); }
  // The blob; the reader starts on the next frame.
  std::vector<std::byte> take();
  // Some bytes of a frame arrived (a close now cuts a blob).
  bool mid_frame() const noexcept { return have_len_ || got_ > 0; }
  // The length the current frame announced (0 before the prefix is whole)
  // and how many of its bytes arrived.
  std::uint32_t announced() const noexcept { return announced_; }
  std::size_t received() const noexcept { return have_len_ ? got_ : 0; }
  std::size_t limit() const noexcept { return limit_; }

private:
  std::size_t limit_;
  std::array<std::byte, 4> len_{};
  std::size_t got_ = 0; // bytes of len_, then of blob_
  bool have_len_ = false;
  bool bad_ = false;
  std::uint32_t announced_ = 0;
  std::vector<std::byte> blob_;
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_FRAME_HPP

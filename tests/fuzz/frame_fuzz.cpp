// SPDX-License-Identifier: MIT
// libFuzzer target: the out-of-band frame parser (src/frame.cpp). The input
// is a limit, a read size and a byte stream fed in reads of that size; every
// blob the parser gives must re-encode to exactly the bytes it consumed, a
// refusal must be a length prefix over the limit, and the parser never asks
// for more room than a frame needs. Any other outcome aborts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "frame.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Seeds: limit 64, reads of 3 bytes; two blobs (5 and 0 bytes), then one
  // over the limit.
  std::vector<std::uint8_t> s = {64,  3, 5, 0, 0, 0,   'h', 'e', 'l', 'l',
                                 'o', 0, 0, 0, 0, 200, 0,   0,   0};
  rdmadl_fuzz::write_seed("frame-0", s.data(), s.size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  if (size < 2)
    return 0;
  const std::size_t limit = static_cast<std::size_t>(data[0]) * 4;
  const std::size_t step = data[1] ? data[1] : 1;
  const auto *in = reinterpret_cast<const std::byte *>(data + 2);
  const std::size_t n = size - 2;
  rdmadl::detail::frame_reader r(limit);
  std::size_t fed = 0, frame_start = 0;
  while (fed < n) {
    auto room = r.room();
    if (room.empty())
      rdmadl_fuzz::fail("no room while no blob is ready");
    std::size_t k = std::min({room.size(), step, n - fed});
    std::memcpy(room.data(), in + fed, k);
    fed += k;
    if (auto st = r.advance(k); !st.ok()) {
      if (st.code() != rdmadl::errc::over_limit || fed - frame_start != 4 || r.announced() <= limit)
        rdmadl_fuzz::fail("refused something other than an oversized length prefix");
      if (!r.room().empty() || r.advance(0).ok())
        rdmadl_fuzz::fail("went on after refusing a length");
      return 0;
    }
    if (r.done()) {
      auto blob = r.take();
      if (blob.size() > limit)
        rdmadl_fuzz::fail("a blob over the limit");
      auto h = rdmadl::detail::frame_header(static_cast<std::uint32_t>(blob.size()));
      if (fed - frame_start != 4 + blob.size() || std::memcmp(in + frame_start, h.data(), 4) != 0 ||
          (!blob.empty() && std::memcmp(in + frame_start + 4, blob.data(), blob.size()) != 0))
        rdmadl_fuzz::fail("a blob that does not re-encode to the bytes consumed");
      frame_start = fed;
      if (r.mid_frame())
        rdmadl_fuzz::fail("mid-frame right after a take()");
    }
  }
  if (r.mid_frame() != (fed > frame_start))
    rdmadl_fuzz::fail("mid_frame() disagrees with the bytes of the unfinished frame");
  return 0;
}

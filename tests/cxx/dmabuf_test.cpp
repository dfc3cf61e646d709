// SPDX-License-Identifier: MIT
// protection_domain::register_dmabuf: which layer refused. ctest runs this
// with RDMADL_DMABUF_EXPECT saying what the loaded libibverbs is:
//   absent     no stack (RDMADL_DISABLE, a missing path)
//   library    tests/fakes' IBVERBS_1.11 fake (like 33.2): no ibv_reg_dmabuf_mr
//   forwarded  the IBVERBS_1.14 fake (like 44.0): the call reaches the
//              library's ibv_reg_dmabuf_mr, whose MR records its arguments
// (The device layer's refusal is in channel_provider_test, on the scripted
// fake device; a real dma-buf on rxe is the Soft-RoCE check cxx-dmabuf.)
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

#include "rdmadl/native.hpp" // struct ibv_mr fields of the fake's record
#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;

namespace {
std::string expected() {
  const char *e = std::getenv("RDMADL_DMABUF_EXPECT");
  return e ? e : "";
}
// Any non-negative descriptor: the fakes never look at it.
struct memfd {
  int fd = ::memfd_create("rdmadl-dmabuf-test", MFD_CLOEXEC);
  ~memfd() {
    if (fd >= 0)
      ::close(fd);
  }
};
} // namespace

TEST_CASE("dmabuf: register_dmabuf: bad input is refused before any call") {
  protection_domain none;
  memfd m;
  REQUIRE(m.fd >= 0);
  CHECK(none.register_dmabuf(m.fd, 0, 0, 0).error() == errc::empty_span);
  CHECK(none.register_dmabuf(-1, 0, 4096, 0).error() == std::errc::bad_file_descriptor);
  CHECK(none.register_dmabuf(m.fd, UINT64_MAX - 10, 4096, 0).error() == errc::out_of_range);
  CHECK(none.register_dmabuf(m.fd, 0, 4096, UINT64_MAX - 10).error() == errc::out_of_range);
}

TEST_CASE("dmabuf: register_dmabuf: the layer that refuses is named") {
  const std::string want = expected();
  REQUIRE_MESSAGE((want == "absent" || want == "library" || want == "forwarded"),
                  "RDMADL_DMABUF_EXPECT must be absent, library or forwarded");
  memfd m;
  REQUIRE(m.fd >= 0);
  if (want == "absent") {
    CHECK_FALSE(supports(feature::dmabuf_mr));
    protection_domain none;
    auto r = none.register_dmabuf(m.fd, 0, 4096, 0x10000);
    CHECK(r.error() == std::errc::operation_not_supported);
    CHECK(r.error() != errc::library_lacks); // no library at all, not an old one
    return;
  }
  // The fakes have no devices: a PD borrowed from a dummy pointer is enough,
  // since register_dmabuf hands it to the library's call and nothing else.
  alignas(64) static unsigned char dummy_pd[256];
  auto pd = protection_domain::borrow(reinterpret_cast<::ibv_pd *>(dummy_pd));
  REQUIRE(pd);
  auto r = pd.register_dmabuf(m.fd, 8192, 4096, 0x7f0000001000,
                              access::remote_write | access::remote_read);
  if (want == "library") {
    CHECK_FALSE(supports(feature::dmabuf_mr));
    REQUIRE_FALSE(r);
    CHECK(r.error() == errc::library_lacks);
    CHECK(r.error() == std::errc::operation_not_supported);
    CHECK(r.error().message().find("lacks") != std::string::npos);
    return;
  }
  CHECK(supports(feature::dmabuf_mr));
  REQUIRE_MESSAGE(r, r.error().message());
  const ::ibv_mr *mr = r->native_handle();
  REQUIRE(mr);
  CHECK(mr->handle == 3); // fake_ibverbs.c: FAKE_MR_DMABUF, ibv_reg_dmabuf_mr ran
  CHECK(mr->pd == pd.native_handle());
  CHECK(reinterpret_cast<std::uintptr_t>(mr->addr) == 8192); // offset
  CHECK(mr->length == 4096);
  CHECK(reinterpret_cast<std::uintptr_t>(mr->context) == 0x7f0000001000); // iova
  CHECK(mr->rkey == static_cast<std::uint32_t>(m.fd));
  CHECK(mr->lkey == (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
  // Work requests and peers address the region by its IOVA.
  auto s = r->slice(16, 32);
  REQUIRE(s);
  CHECK(s->addr == 0x7f0000001000 + 16);
  auto rr = r->remote();
  REQUIRE(rr);
  CHECK(rr->addr == 0x7f0000001000);
  CHECK(rr->length == 4096);
  // ibv_dereg_mr of the fake's record when r goes: it answers 0.
}

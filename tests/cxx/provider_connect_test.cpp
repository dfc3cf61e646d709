// SPDX-License-Identifier: MIT
// The C++ layer against the scripted fake provider (tests/fakes/fake_provider.c),
// its checks before any modify: connect() naming what is wrong with a peer's
// endpoint, a region's slices, and register_dmabuf's layers on the fake
// device. The rest of the fake-provider suite is provider_test.cpp; ctest
// points RDMADL_IBVERBS_PATH at the fake. Each case checks at its end that
// nothing is live any more.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <sys/mman.h>

#include "rdmadl/native.hpp" // IBV_* values and native fields only; no ibv_* call

#include "fake_provider_case.hpp"
#include "test_ok.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {
gid address(std::initializer_list<std::uint8_t> head, std::initializer_list<std::uint8_t> tail) {
  gid g;
  std::copy(head.begin(), head.end(), g.raw.begin());
  std::copy(tail.begin(), tail.end(), g.raw.end() - static_cast<std::ptrdiff_t>(tail.size()));
  return g;
}
bool says(std::string_view what) {
  return last_error_detail().find(what) != std::string_view::npos;
}
} // namespace

TEST_CASE("provider: connect() names what is wrong with a peer's endpoint before any modify") {
  start();
  {
    auto ctx = ok(context::open());
    auto pd = ok(protection_domain::create(ctx));
    auto cq = ok(completion_queue::create(ctx));
    qp_options v4; // the default: RoCE v2, ::ffff:192.0.2.1 (index 1)
    qp_options link_local_v2;
    link_local_v2.gid_index = 2; // fe80::202:c9ff:fe12:3456, RoCE v2
    qp_options v1;
    v1.gid_index = 0; // fe80::202:c9ff:fe12:3456, RoCE v1
    auto fresh = [&](const qp_options &o) { return ok(queue_pair::create(ctx, pd, cq, cq, o)); };
    auto modifies = [&](const queue_pair &q) {
      return fp().fakeprov_modify_log(q.qp_num(), nullptr, 0);
    };
    const endpoint good = ok(fresh(v4).local_endpoint());
    INFO(last_error_detail());

    SUBCASE("QPN 0, 1 or over 24 bits") {
      for (std::uint32_t qpn : {0u, 1u, 0x1000000u}) {
        auto q = fresh(v4);
        endpoint e = good;
        e.qpn = qpn;
        auto r = q.connect(e);
        CHECK(r.error() == errc::bad_peer_qpn);
        CHECK(r.error() == std::errc::invalid_argument);
        CHECK(says("peer's QPN is 0x"));
        CHECK(modifies(q) == 0);
      }
    }
    SUBCASE("an MTU no port has") {
      auto q = fresh(v4);
      endpoint e = good;
      e.mtu = 1500;
      CHECK(q.connect(e).error() == errc::bad_peer_mtu);
      CHECK(says("peer's MTU is 1500 bytes"));
      CHECK(modifies(q) == 0);
    }
    SUBCASE("RoCE: the peer has no GID") {
      auto q = fresh(v4);
      endpoint e = good;
      e.gid_value = gid{};
      e.lid = 7;
      CHECK(q.connect(e).error() == errc::gid_mismatch);
      CHECK(says("peer's GID is zero (its LID 7)"));
      CHECK(says("our port 1 is Ethernet"));
      CHECK(modifies(q) == 0);
    }
    SUBCASE("RoCE: IPv4 GID against IPv6, both ways") {
      auto q = fresh(v4);
      endpoint e = good;
      e.gid_value = address({0xfe, 0x80}, {0x12, 0x34});
      CHECK(q.connect(e).error() == errc::gid_mismatch);
      CHECK(says("peer's GID is fe80::1234 (IPv6), ours ::ffff:192.0.2.1 (GID index 1, RoCE v2, "
                 "port 1) (IPv4)"));
      CHECK(says("qp_options::gid"));
      CHECK(modifies(q) == 0);
      auto q6 = fresh(link_local_v2);
      CHECK(q6.connect(good).error() == errc::gid_mismatch);
      CHECK(says("peer's GID is ::ffff:192.0.2.1 (IPv4), ours fe80::202:c9ff:fe12:3456 (GID "
                 "index 2, RoCE v2, port 1) (IPv6)"));
    }
    SUBCASE("RoCE: a link-local GID against a global one") {
      auto q = fresh(link_local_v2);
      endpoint e = good;
      e.gid_value = address({0x20, 0x01, 0x0d, 0xb8}, {0x01});
      CHECK(q.connect(e).error() == errc::gid_mismatch);
      CHECK(says("peer's GID is 2001:db8::1 (global)"));
      CHECK(says("(link-local)"));
      CHECK(modifies(q) == 0);
    }
    SUBCASE("RoCE v1 is not routed: another /64 is refused, RoCE v2 lets it through") {
      endpoint e = good;
      e.gid_value = address({0xfe, 0x80, 0, 0, 0, 0, 0, 1}, {0x01});
      e.gid_kind = gid_type::roce_v1;
      auto q = fresh(v1);
      CHECK(q.connect(e).error() == errc::gid_mismatch);
      CHECK(says("another /64 subnet"));
      CHECK(says("RoCE v1"));
      CHECK(modifies(q) == 0);
      auto q2 = fresh(link_local_v2);
      e.gid_kind = gid_type::roce_v2;
      ok(q2.connect(e));
      CHECK(last_error_detail().empty());
    }
    SUBCASE("InfiniBand: LID 0, ours or the peer's") {
      fp().fakeprov_set(FAKEPROV_PORT_LINK_LAYER, IBV_LINK_LAYER_INFINIBAND);
      auto q = fresh(v4); // LID 0: no subnet manager
      endpoint e = good;
      e.lid = 5;
      e.gid_kind = gid_type::ib;
      CHECK(q.connect(e).error() == errc::no_lid);
      CHECK(says("our port 1 is InfiniBand with LID 0"));
      CHECK(modifies(q) == 0);
      fp().fakeprov_set(FAKEPROV_PORT_LID, 0x2a);
      auto q2 = fresh(v4);
      e.lid = 0;
      CHECK(q2.connect(e).error() == errc::no_lid);
      CHECK(says("peer's LID is 0 but our port 1 is InfiniBand"));
      CHECK(says("::ffff:192.0.2.1"));
      CHECK(modifies(q2) == 0);
      e.lid = 0x2b;
      ok(q2.connect(e));
    }
    SUBCASE("RoCE v1 against RoCE v2: the blob says the type") {
      auto peer_v1 = fresh(v1);
      auto ev1 = ok(peer_v1.local_endpoint());
      REQUIRE(ev1.gid_kind == gid_type::roce_v1);
      auto back = ok(endpoint::parse(ev1.serialize()));
      CHECK(back.gid_kind == gid_type::roce_v1);
      auto q = fresh(link_local_v2); // the same address, RoCE v2
      CHECK(q.connect(back).error() == errc::gid_mismatch);
      CHECK(says("peer's GID is RoCE v1 (fe80::202:c9ff:fe12:3456), ours "
                 "fe80::202:c9ff:fe12:3456 (GID index 2, RoCE v2, port 1): both sides need the "
                 "same RoCE version; set qp_options::gid.type"));
      CHECK(modifies(q) == 0);
      // A blob that does not say the type (an older build's) is let through.
      back.gid_kind.reset();
      ok(q.connect(back));
    }
    SUBCASE("InfiniBand against RoCE, both ways") {
      auto q = fresh(v4);
      endpoint e = good;
      e.gid_kind = gid_type::ib;
      CHECK(q.connect(e).error() == errc::gid_mismatch);
      CHECK(says("is an InfiniBand one: the peer is on InfiniBand, but our port 1 is Ethernet"));
      fp().fakeprov_set(FAKEPROV_PORT_LINK_LAYER, IBV_LINK_LAYER_INFINIBAND);
      fp().fakeprov_set(FAKEPROV_PORT_LID, 0x2a);
      auto qi = fresh(v4);
      CHECK(ok(qi.local_endpoint()).gid_kind == gid_type::ib);
      e = good; // RoCE v2
      e.lid = 0x2b;
      CHECK(qi.connect(e).error() == errc::gid_mismatch);
      CHECK(says("peer's GID ::ffff:192.0.2.1 is RoCE v2: the peer is on Ethernet (RoCE), but our "
                 "port 1 is InfiniBand"));
      CHECK(modifies(q) == 0);
      CHECK(modifies(qi) == 0);
    }
    SUBCASE("transport_options reach RTR and RTS: the defaults, and retries clamped to 7") {
      auto q = fresh(v4);
      ok(q.connect(good));
      std::array<fakeprov_modify_record, 4> m{};
      REQUIRE(fp().fakeprov_modify_log(q.qp_num(), m.data(), m.size()) == 3);
      CHECK(m[1].min_rnr_timer == 12);
      CHECK(m[2].timeout == 14);
      CHECK(m[2].retry_cnt == 6);
      CHECK(m[2].rnr_retry == 7);
      auto q2 = fresh(v4);
      connect_options co;
      co.transport.ack_timeout = 18;
      co.transport.retry_count = 9;
      co.transport.rnr_retry = 200;
      co.transport.min_rnr_timer = 3;
      ok(q2.connect(good, co));
      REQUIRE(fp().fakeprov_modify_log(q2.qp_num(), m.data(), m.size()) == 3);
      CHECK(m[1].min_rnr_timer == 3);
      CHECK(m[2].timeout == 18);
      CHECK(m[2].retry_cnt == 7);
      CHECK(m[2].rnr_retry == 7);
    }
    SUBCASE("the path MTU is the smaller of both ports' and the option") {
      struct {
        std::uint32_t peer, option;
        int want;
      } cases[] = {{512, 0, IBV_MTU_512},
                   {4096, 0, IBV_MTU_1024},
                   {0, 0, IBV_MTU_1024},
                   {4096, 256, IBV_MTU_256},
                   {2048, 4096, IBV_MTU_1024}};
      for (auto c : cases) {
        auto q = fresh(v4);
        endpoint e = good;
        e.mtu = c.peer;
        connect_options co;
        co.transport.mtu = c.option;
        ok(q.connect(e, co));
        std::array<fakeprov_modify_record, 4> m{};
        REQUIRE(fp().fakeprov_modify_log(q.qp_num(), m.data(), m.size()) == 3);
        CHECK(m[1].path_mtu == c.want);
      }
    }
    SUBCASE("a refused modify names the step and every path field") {
      auto q = fresh(v4);
      endpoint e = good;
      e.mtu = 512;
      fp().fakeprov_fail_next(FAKEPROV_OP_MODIFY_QP, EINVAL, 1);
      CHECK(q.connect(e).error() == std::errc::invalid_argument);
      CHECK(says("ibv_modify_qp to INIT failed (Invalid argument); path MTU 512 bytes (our port "
                 "1: 1024, peer: 512, connect_options::transport.mtu: 0)"));
      CHECK(says("GID ::ffff:192.0.2.1, ours ::ffff:192.0.2.1 (GID index 1, RoCE v2, port 1)"));
      // The next call starts with no detail.
      ok(fresh(v4).connect(good));
      CHECK(last_error_detail().empty());
    }
  }
  finish();
}

TEST_CASE("provider: a region's slices say whether they are empty, outside or too long") {
  start();
  {
    auto ctx = ok(context::open());
    auto pd = ok(protection_domain::create(ctx));
    alignas(64) std::array<std::byte, 4096> buf{};
    auto mr = ok(pd.register_memory(buf, access::remote_read));
    CHECK(mr.slice(0, 0).error() == errc::empty_span);
    CHECK(mr.slice(4000, 97).error() == errc::out_of_range);
    CHECK(mr.slice(4097, 1).error() == errc::out_of_range);
    CHECK(ok(mr.slice(4000, 96)).length == 96);
    CHECK(mr.remote(4090, 16).error() == errc::out_of_range);
    CHECK(mr.remote(4096).error() == errc::empty_span); // from the end: nothing left
    CHECK(ok(mr.remote(4000)).length == 96);
    // A region over 4 GiB (address space only: the fake never touches it):
    // one scatter/gather element cannot hold it whole.
    const std::size_t big = (std::size_t{1} << 32) + 4096;
    void *p = mmap(nullptr, big, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(p != MAP_FAILED);
    {
      auto huge = ok(pd.register_memory({static_cast<std::byte *>(p), big}));
      CHECK(huge.all().error() == errc::slice_too_long);
      CHECK(huge.slice(1, std::size_t{UINT32_MAX} + 1).error() == errc::slice_too_long);
      CHECK(ok(huge.slice(1, UINT32_MAX)).length == UINT32_MAX);
      CHECK(huge.slice(4096, big).error() == errc::out_of_range);
    }
    munmap(p, big);
  }
  finish();
}

TEST_CASE("provider: register_dmabuf: a library that has the call, a device that refuses it") {
  start();
  {
    auto ctx = ok(context::open());
    auto pd = ok(protection_domain::create(ctx));
    // fake0's provider has no reg_dmabuf_mr: the library's call fails EOPNOTSUPP
    CHECK(supports(feature::dmabuf_mr));
    auto r = pd.register_dmabuf(0, 0, 4096, 0x10000);
    REQUIRE_FALSE(r);
    CHECK(r.error() == std::errc::operation_not_supported);
    CHECK(r.error().category() == std::generic_category()); // the provider's errno
    CHECK(r.error() != errc::library_lacks);
  }
  finish();
}

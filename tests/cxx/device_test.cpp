// SPDX-License-Identifier: MIT
// rdmadl-cxx-device-test: the C++ API against a real device (the Soft-RoCE
// VM tier). Every check moves real data and compares it byte for byte, and
// prints "RDMADL-CHECK cxx-<name> PASS|FAIL". Exit status 1 if any failed.
//
//   rdmadl-cxx-device-test            all checks on $RDMADL_TEST_DEVICE
//   rdmadl-cxx-device-test --absent   no stack: every entry point fails cleanly
//
// Environment: RDMADL_TEST_DEVICE (default: first device), RDMADL_TEST_IP
// (the rxe netdev's IPv4 address, for GID selection and rdma_cm),
// RDMADL_TEST_GID_INDEX (the index the VM found for it).
#include <arpa/inet.h>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <linux/udmabuf.h>
#include <poll.h>
#include <string>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "rdmadl/native.hpp" // rdma_cm types for the half-open client (called via dlsym)
#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {

int failures = 0;
bool plain_cqs = false; // make_loop: ibv_create_cq even where extended CQs work
std::string dev_name;
std::uint32_t test_ip = 0;

#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "  %s:%d: expected %s\n", __FILE__, __LINE__, #cond);                   \
      return false;                                                                                \
    }                                                                                              \
  } while (0)
// Evaluates r once (a failed commit() must not be committed again).
#define EXPECT_OK(r)                                                                               \
  do {                                                                                             \
    const auto &expect_ok_r_ = (r);                                                                \
    if (!expect_ok_r_) {                                                                           \
      std::fprintf(stderr, "  %s:%d: %s failed: %s\n", __FILE__, __LINE__, #r,                     \
                   expect_ok_r_.error().message().c_str());                                        \
      return false;                                                                                \
    }                                                                                              \
  } while (0)
#define TRY(var, expr)                                                                             \
  auto var = (expr);                                                                               \
  EXPECT_OK(var)

void report(const char *name, bool ok) {
  std::printf("RDMADL-CHECK cxx-%s %s\n", name, ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  if (!ok)
    failures++;
}

void fill(std::span<std::byte> b, unsigned seed) {
  for (std::size_t i = 0; i < b.size(); i++)
    b[i] = static_cast<std::byte>((i * 131 + seed * 7 + 3) & 0xff);
}
bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// Waits for one completion and checks it succeeded.
result<completion> one(completion_queue &cq, std::chrono::milliseconds t = 5000ms) {
  std::array<completion, 1> c;
  auto r = cq.poll_wait(c, t);
  if (!r)
    return r.error();
  if (!c[0].ok()) {
    std::fprintf(stderr, "  completion wr_id %llu: %s (vendor_err %u)\n",
                 static_cast<unsigned long long>(c[0].wr_id), c[0].error().message().c_str(),
                 c[0].vendor_err);
    return c[0].error();
  }
  return c[0];
}

// Two queue pairs of one type on the test device, connected to each other.
struct loop {
  context ctx;
  protection_domain pd;
  completion_queue cq_a, cq_b;
  queue_pair a, b;
};

result<loop> make_loop(qp_type type = qp_type::rc, qp_options base = {},
                       const completion_channel *ch = nullptr,
                       const shared_receive_queue *srq_b = nullptr, loop *reuse = nullptr) {
  loop l;
  if (reuse) {
    l.ctx = std::move(reuse->ctx);
    l.pd = std::move(reuse->pd);
  } else {
    auto ctx = context::open(dev_name);
    if (!ctx)
      return ctx.error();
    l.ctx = std::move(*ctx);
    auto pd = protection_domain::create(l.ctx);
    if (!pd)
      return pd.error();
    l.pd = std::move(*pd);
  }
  cq_options co;
  co.depth = 64;
  co.extended = !plain_cqs;
  auto ca = completion_queue::create(l.ctx, co);
  co.channel = ch;
  auto cb = completion_queue::create(l.ctx, co);
  if (!ca)
    return ca.error();
  if (!cb)
    return cb.error();
  l.cq_a = std::move(*ca);
  l.cq_b = std::move(*cb);
  base.type = type;
  base.gid.ipv4 = test_ip;
  auto qa = queue_pair::create(l.ctx, l.pd, l.cq_a, l.cq_a, base);
  base.srq = srq_b;
  auto qb = queue_pair::create(l.ctx, l.pd, l.cq_b, l.cq_b, base);
  if (!qa)
    return qa.error();
  if (!qb)
    return qb.error();
  l.a = std::move(*qa);
  l.b = std::move(*qb);
  // Exchange endpoints through their serialised form, as peers would.
  auto ea = l.a.local_endpoint(), eb = l.b.local_endpoint();
  if (!ea || !eb)
    return errc::empty_object;
  auto pa = endpoint::parse(ea->serialize()), pb = endpoint::parse(eb->serialize());
  if (!pa || !pb)
    return errc::bad_size;
  if (auto r = l.a.connect(*pb); !r)
    return r.error();
  if (auto r = l.b.connect(*pa); !r)
    return r.error();
  return l;
}

// A loop whose cq_b reports to a completion channel of the same context.
struct channel_loop {
  completion_channel ch;
  loop l;
};
result<channel_loop> make_channel_loop() {
  auto ctx = context::open(dev_name);
  if (!ctx)
    return ctx.error();
  auto ch = completion_channel::create(*ctx);
  if (!ch)
    return ch.error();
  auto pd = protection_domain::create(*ctx);
  if (!pd)
    return pd.error();
  loop seed{std::move(*ctx), std::move(*pd), {}, {}, {}, {}};
  auto l = make_loop(qp_type::rc, {}, &*ch, nullptr, &seed);
  if (!l)
    return l.error();
  return channel_loop{std::move(*ch), std::move(*l)};
}

// ---- checks ----

bool check_probe() {
  // The release is in the real file name: libibverbs.so.1.<abi>.<major>.<minor>.
  auto st = status(library::ibverbs);
  std::string path(st.path);
  auto pos = path.rfind(".so.1.");
  EXPECT(pos != std::string::npos);
  unsigned abi = 0, major = 0, minor = 0;
  EXPECT(std::sscanf(path.c_str() + pos + 6, "%u.%u.%u", &abi, &major, &minor) == 3);
  std::fprintf(stderr, "  libibverbs %s: rdma-core %u.%u, %.*s\n", path.c_str(), major, minor,
               int(st.version_node.size()), st.version_node.data());
  // First rdma-core release with each symbol (IBVERBS_1.6, 1.8, 1.11, 1.12).
  EXPECT(supports(feature::wr_api) == (major >= 24));
  EXPECT(supports(feature::reg_mr_iova) == (major >= 26));
  EXPECT(supports(feature::query_gid_ex) == (major >= 32));
  EXPECT(supports(feature::dmabuf_mr) == (major >= 34));
  EXPECT(supports(feature::rdma_cm));
  EXPECT(available());
  EXPECT(stack() == stack_state::ready);
  TRY(ctx, context::open(dev_name));
  for (auto f : all_features)
    std::fprintf(stderr, "  %.*s: library %d device %d\n", int(name(f).size()), name(f).data(),
                 supports(f), ctx->supports(f));
  // Soft-RoCE's provider gained the extended CQ and the WR API in rdma-core 34
  // (33.2's exports both, but the calls answer EOPNOTSUPP; ci/releases.txt).
  // The device-level answer comes from a probe, so it must say so exactly.
  if (ctx->device_name().substr(0, 3) == "rxe") {
    EXPECT(ctx->supports(feature::extended_cq) == (major >= 34));
    EXPECT(ctx->supports(feature::wr_api) == (major >= 34));
  }
  return true;
}

bool check_device() {
  TRY(list, device_list::get());
  EXPECT(list->size() >= 1);
  TRY(d, list->find(dev_name));
  EXPECT(d->name() == dev_name);
  EXPECT(d->transport_type() == transport::ib);
  TRY(ctx, context::open(*d));
  TRY(attr, ctx->query_device());
  EXPECT(attr->max_qp > 0 && attr->max_cqe > 0 && attr->phys_port_cnt >= 1);
  TRY(port, ctx->first_active_port());
  TRY(pa, ctx->query_port(*port));
  EXPECT(pa->state == port_state::active);
  EXPECT(pa->link == link_layer::ethernet);
  EXPECT(pa->active_mtu >= 256);
  EXPECT(ctx->query_port(200).error());
  return true;
}

bool check_gid_select() {
  TRY(ctx, context::open(dev_name));
  TRY(port, ctx->first_active_port());
  TRY(table, ctx->gid_table(*port));
  EXPECT(!table->empty());
  TRY(g, ctx->select_gid(*port, {gid_type::roce_v2, test_ip}));
  EXPECT(g->type == gid_type::roce_v2);
  if (test_ip) {
    EXPECT(g->value.is_ipv4_mapped());
    EXPECT(g->value.ipv4() == test_ip);
  }
  if (const char *idx = std::getenv("RDMADL_TEST_GID_INDEX"))
    EXPECT(g->index == static_cast<std::uint32_t>(std::atoi(idx)));
  // Without an address: still RoCE v2 (an IPv4-mapped one first), never a blind index 0.
  TRY(any, ctx->select_gid(*port));
  EXPECT(any->type == gid_type::roce_v2);
  return true;
}

bool check_memory_bounds() {
  TRY(ctx, context::open(dev_name));
  TRY(pd, protection_domain::create(*ctx));
  std::vector<std::byte> buf(4096);
  EXPECT(pd->register_memory({}).error() == errc::empty_span);
  TRY(mr, pd->register_memory(buf));
  EXPECT(mr->rights() == access::local);
  EXPECT(mr->remote().error() == std::errc::operation_not_permitted);
  TRY(s, mr->slice(100, 200));
  EXPECT(s->addr == reinterpret_cast<std::uint64_t>(buf.data() + 100) && s->length == 200);
  EXPECT(s->lkey == mr->lkey());
  EXPECT(mr->slice(4000, 97).error() == errc::out_of_range);
  EXPECT(mr->slice(4097, 1).error() == errc::out_of_range);
  EXPECT(mr->slice(0, 0).error() == errc::out_of_range);
  TRY(rmr, pd->register_memory(buf, access::remote_read));
  TRY(rr, rmr->remote(8, 16));
  EXPECT(rr->rkey == rmr->rkey() && rr->length == 16);
  EXPECT(rmr->remote(4090, 16).error() == errc::out_of_range);
  return true;
}

bool check_send_recv(qp_type type) {
  TRY(l, make_loop(type));
  std::vector<std::byte> src(4096), dst(4096);
  fill(src, 1);
  TRY(ms, l->pd.register_memory(src));
  TRY(md, l->pd.register_memory(dst));
  TRY(rs, md->all());
  EXPECT_OK(l->b.post_recv(*rs, 7));
  TRY(ss, ms->all());
  EXPECT_OK(l->a.post_send(*ss, 8));
  TRY(cs, one(l->cq_a));
  EXPECT(cs->wr_id == 8 && cs->opcode == wc_opcode::send);
  TRY(cr, one(l->cq_b));
  EXPECT(cr->wr_id == 7 && cr->opcode == wc_opcode::recv && cr->byte_len == 4096);
  EXPECT(same(src, dst));
  return true;
}

bool check_imm(bool write) {
  TRY(l, make_loop());
  std::vector<std::byte> src(1024), dst(1024);
  fill(src, 2);
  TRY(ms, l->pd.register_memory(src));
  TRY(md, l->pd.register_memory(dst, access::remote_write));
  TRY(rs, md->all());
  TRY(ss, ms->all());
  EXPECT_OK(l->b.post_recv(*rs, 1));
  if (write) {
    TRY(rr, md->remote());
    EXPECT_OK(l->a.post_write_imm(*ss, *rr, 0xc0ffee, 2));
  } else {
    EXPECT_OK(l->a.post_send_imm(*ss, 0xc0ffee, 2));
  }
  TRY(cs, one(l->cq_a));
  TRY(cr, one(l->cq_b));
  EXPECT(cr->has_imm() && cr->imm() == 0xc0ffee);
  EXPECT(cr->opcode == (write ? wc_opcode::recv_rdma_with_imm : wc_opcode::recv));
  EXPECT(same(src, dst));
  return true;
}

bool check_write_read() {
  TRY(l, make_loop());
  std::vector<std::byte> local(8192), remote(8192), back(8192);
  fill(local, 3);
  TRY(ml, l->pd.register_memory(local));
  TRY(mb, l->pd.register_memory(back));
  TRY(mr, l->pd.register_memory(remote, access::remote_write | access::remote_read));
  // The descriptor travels as bytes, as it would between peers.
  TRY(desc, mr->remote());
  TRY(rr, remote_region::parse(desc->serialize()));
  TRY(ls, ml->all());
  EXPECT_OK(l->a.post_write(*ls, *rr, 1));
  TRY(c1, one(l->cq_a));
  EXPECT(c1->opcode == wc_opcode::rdma_write);
  EXPECT(same(local, remote));
  // Read back only the second half, into the second half.
  TRY(half, rr->slice(4096, 4096));
  TRY(bs, mb->slice(4096, 4096));
  EXPECT_OK(l->a.post_read(*bs, *half, 2));
  TRY(c2, one(l->cq_a));
  EXPECT(c2->opcode == wc_opcode::rdma_read);
  EXPECT(same(std::span(back).subspan(4096), std::span(local).subspan(4096)));
  for (std::size_t i = 0; i < 4096; i++)
    EXPECT(back[i] == std::byte{0});
  // A region without remote write: the write fails with a remote access error.
  std::vector<std::byte> ro(64);
  TRY(mro, l->pd.register_memory(ro, access::remote_read));
  TRY(rro, mro->remote());
  TRY(s64, ml->slice(0, 64));
  EXPECT_OK(l->a.post_write(*s64, *rro, 3));
  std::array<completion, 1> c;
  TRY(n, l->cq_a.poll_wait(c, 5000ms));
  EXPECT(*n == 1 && !c[0].ok());
  EXPECT(c[0].error().category() == wc_category());
  std::fprintf(stderr, "  write to a read-only region: %s (vendor_err %u)\n",
               c[0].error().message().c_str(), c[0].vendor_err);
  return true;
}

// dma-buf registration (protection_domain::register_dmabuf). A real dma-buf
// is made when the kernel can (udmabuf: a sealed memfd handed to
// /dev/udmabuf; Debian's 6.1 kernel has no CONFIG_UDMABUF, 6.12 and later
// build it in). Prints "RDMADL-CHECK feature.cxx_dmabuf PASS" when rxe
// registered it and data moved through it byte for byte (both directions,
// RDMA write into it and read out of it), else "UNSUPPORTED" with
// "RDMADL-WHY feature.cxx_dmabuf library|device": ci/releases.txt says which
// each release must show. The check itself fails when the refusal does not
// match the layer (library: supports() false and errc::library_lacks;
// device: supports() true and the provider's errno).
bool check_dmabuf() {
  TRY(l, make_loop());
  constexpr std::size_t size = 2 * 4096;
  int buf = -1, memfd = -1;
  const char *no_exporter = nullptr;
  memfd = ::memfd_create("rdmadl-dmabuf", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  EXPECT(memfd >= 0);
  EXPECT(::ftruncate(memfd, size) == 0);
  EXPECT(::fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  int dev = ::open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
  if (dev < 0) {
    no_exporter = "no /dev/udmabuf (kernel without CONFIG_UDMABUF)";
  } else {
    udmabuf_create c{};
    c.memfd = static_cast<std::uint32_t>(memfd);
    c.flags = UDMABUF_FLAGS_CLOEXEC;
    c.offset = 0;
    c.size = size;
    buf = ::ioctl(dev, UDMABUF_CREATE, &c);
    ::close(dev);
    EXPECT(buf >= 0);
  }
  std::fprintf(stderr, "  dma-buf: %s\n", no_exporter ? no_exporter : "udmabuf of a sealed memfd");
  // Without an exporter the memfd stands in: the layers are told apart
  // before any device looks at the descriptor (the library check is the
  // library's; rxe's provider refuses without reading the fd).
  const int fd = buf >= 0 ? buf : memfd;
  constexpr std::uint64_t iova = 0x10000;
  auto mr = l->pd.register_dmabuf(fd, 0, size, iova, access::remote_write | access::remote_read);
  auto unsupported = [&](const char *layer) {
    std::printf("RDMADL-CHECK feature.cxx_dmabuf UNSUPPORTED\nRDMADL-WHY feature.cxx_dmabuf %s\n",
                layer);
    std::fprintf(stderr, "  register_dmabuf refused (%s): %s\n", layer,
                 mr.error().message().c_str());
  };
  if (!mr) {
    if (!supports(feature::dmabuf_mr)) {
      EXPECT(mr.error() == errc::library_lacks);
      unsupported("library");
    } else {
      EXPECT(mr.error() != errc::library_lacks);
      EXPECT(mr.error().category() == std::generic_category());
      unsupported("device");
    }
    if (buf >= 0)
      ::close(buf);
    ::close(memfd);
    return true;
  }
  // rxe accepted: write into the dma-buf, read it back out, compare through
  // the memfd's own mapping.
  EXPECT(buf >= 0); // accepted a plain memfd as a dma-buf: that would be a bug
  void *map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  EXPECT(map != MAP_FAILED);
  std::span<std::byte> mem(static_cast<std::byte *>(map), size);
  std::vector<std::byte> src(size), back(size);
  fill(src, 9);
  TRY(ms, l->pd.register_memory(src));
  TRY(mb, l->pd.register_memory(back));
  TRY(rr, mr->remote());
  EXPECT(rr->addr == iova && rr->length == size);
  EXPECT_OK(l->a.post_write(*ms->all(), *rr, 1));
  TRY(c1, one(l->cq_a));
  EXPECT(c1->ok());
  EXPECT(same(mem, src));
  fill(mem, 10);
  EXPECT_OK(l->a.post_read(*mb->all(), *rr, 2));
  TRY(c2, one(l->cq_a));
  EXPECT(c2->ok());
  EXPECT(same(back, mem));
  ::munmap(map, size);
  ::close(buf);
  ::close(memfd);
  std::printf("RDMADL-CHECK feature.cxx_dmabuf PASS\n");
  return true;
}

bool check_atomics() {
  TRY(l, make_loop());
  alignas(8) std::array<std::byte, 8> target{}, old{};
  std::uint64_t init = 40;
  std::memcpy(target.data(), &init, 8);
  TRY(mt, l->pd.register_memory(target, access::remote_atomic));
  TRY(mo, l->pd.register_memory(old));
  TRY(rt, mt->remote());
  TRY(so, mo->all());
  EXPECT_OK(l->a.post_fetch_add(*so, *rt, 2, 1));
  TRY(c1, one(l->cq_a));
  EXPECT(c1->opcode == wc_opcode::fetch_add);
  std::uint64_t v;
  std::memcpy(&v, old.data(), 8);
  EXPECT(v == 40);
  std::memcpy(&v, target.data(), 8);
  EXPECT(v == 42);
  EXPECT_OK(l->a.post_compare_swap(*so, *rt, 42, 0x1122334455667788ull, 2));
  TRY(c2, one(l->cq_a));
  EXPECT(c2->opcode == wc_opcode::comp_swap);
  std::memcpy(&v, old.data(), 8);
  EXPECT(v == 42);
  std::memcpy(&v, target.data(), 8);
  EXPECT(v == 0x1122334455667788ull);
  // A failing compare leaves the target alone.
  EXPECT_OK(l->a.post_compare_swap(*so, *rt, 1, 2, 3));
  TRY(c3, one(l->cq_a));
  std::memcpy(&v, target.data(), 8);
  EXPECT(v == 0x1122334455667788ull);
  // Atomics need 8 aligned bytes.
  TRY(odd, mo->slice(0, 4));
  EXPECT(l->a.post_fetch_add(*odd, *rt, 1, 4).error() == std::errc::invalid_argument);
  return true;
}

bool check_ud() {
  TRY(l, make_loop(qp_type::ud));
  TRY(eb, l->b.local_endpoint());
  TRY(ah, address_handle::create(l->pd, l->a, *eb));
  std::vector<std::byte> src(512), dst(40 + 512);
  fill(src, 4);
  TRY(ms, l->pd.register_memory(src));
  TRY(md, l->pd.register_memory(dst));
  TRY(rs, md->all());
  EXPECT_OK(l->b.post_recv(*rs, 1));
  TRY(ss, ms->all());
  EXPECT_OK(l->a.post_send_ud(*ss, *ah, *eb, 2));
  TRY(cs, one(l->cq_a));
  TRY(cr, one(l->cq_b));
  EXPECT(cr->byte_len == 40 + 512);
  EXPECT(cr->src_qp == l->a.qp_num());
  EXPECT(same(src, std::span(dst).subspan(40)));
  // One-sided operations do not exist on UD.
  remote_region r{0x1000, 1, 8};
  // Refused before the provider sees it (rxe would read wr.ud.ah from it).
  EXPECT(l->a.post_write(*ss, r, 3).error() == errc::wrong_qp_type);
  EXPECT(l->a.post_send(*ss, 4).error() == errc::wrong_qp_type); // UD needs an address
  return true;
}

bool check_srq() {
  TRY(ctx, context::open(dev_name));
  EXPECT(ctx->supports(feature::srq));
  TRY(pd, protection_domain::create(*ctx));
  TRY(srq, shared_receive_queue::create(*pd, 16));
  loop seed{std::move(*ctx), std::move(*pd), {}, {}, {}, {}};
  TRY(l, make_loop(qp_type::rc, {}, nullptr, &*srq, &seed));
  std::vector<std::byte> src(256 * 4), dst(256 * 4);
  fill(src, 5);
  TRY(ms, l->pd.register_memory(src));
  TRY(md, l->pd.register_memory(dst));
  for (int i = 0; i < 4; i++) {
    TRY(rs, md->slice(static_cast<std::size_t>(i) * 256, 256));
    EXPECT_OK(srq->post_recv(*rs, 100 + static_cast<std::uint64_t>(i)));
  }
  for (int i = 0; i < 4; i++) {
    TRY(ss, ms->slice(static_cast<std::size_t>(i) * 256, 256));
    EXPECT_OK(l->a.post_send(*ss, static_cast<std::uint64_t>(i)));
  }
  std::array<completion, 4> c;
  std::size_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (got < 4 && std::chrono::steady_clock::now() < deadline) {
    auto n = l->cq_b.poll(std::span(c).subspan(got));
    EXPECT_OK(n);
    got += *n;
  }
  EXPECT(got == 4);
  for (auto &x : c)
    EXPECT(x.ok() && x.wr_id >= 100 && x.wr_id < 104);
  EXPECT(same(src, dst));
  return true;
}

bool check_batch_poll() {
  TRY(l, make_loop());
  constexpr int n = 16;
  std::vector<std::byte> src(64 * n), dst(64 * n);
  fill(src, 6);
  TRY(ms, l->pd.register_memory(src));
  TRY(md, l->pd.register_memory(dst));
  for (int i = 0; i < n; i++) {
    TRY(r, md->slice(static_cast<std::size_t>(i) * 64, 64));
    EXPECT_OK(l->b.post_recv(*r, static_cast<std::uint64_t>(i)));
  }
  for (int i = 0; i < n; i++) {
    TRY(s, ms->slice(static_cast<std::size_t>(i) * 64, 64));
    EXPECT_OK(l->a.post_send(*s, static_cast<std::uint64_t>(i)));
  }
  std::array<completion, n> c;
  TRY(got, l->cq_b.poll_wait(c, 5000ms));
  EXPECT(*got == n);
  for (int i = 0; i < n; i++)
    EXPECT(c[static_cast<std::size_t>(i)].ok() &&
           c[static_cast<std::size_t>(i)].wr_id == static_cast<std::uint64_t>(i));
  TRY(gota, l->cq_a.poll_wait(c, 5000ms));
  EXPECT(*gota == n);
  EXPECT(same(src, dst));
  std::fprintf(stderr, "  extended cq: %d\n", l->cq_b.extended());
  EXPECT(l->cq_b.extended() == l->ctx.supports(feature::extended_cq));
  EXPECT(l->cq_b.poll({}).error() == errc::empty_span);
  return true;
}

bool check_comp_channel() {
  TRY(cl, make_channel_loop());
  completion_channel *ch = &cl->ch;
  loop *l = &cl->l;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  EXPECT(ep >= 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  EXPECT(epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd(), &ev) == 0);
  // Nothing armed yet: a short wait times out cleanly.
  EXPECT(ch->wait(50ms).error() == errc::timed_out);
  EXPECT_OK(l->cq_b.request_notify());
  std::vector<std::byte> src(128), dst(128);
  fill(src, 7);
  TRY(ms, l->pd.register_memory(src));
  TRY(md, l->pd.register_memory(dst));
  TRY(rs, md->all());
  TRY(ss, ms->all());
  EXPECT_OK(l->b.post_recv(*rs, 1));
  EXPECT_OK(l->a.post_send(*ss, 2));
  epoll_event out{};
  int nready = epoll_wait(ep, &out, 1, 5000);
  close(ep);
  EXPECT(nready == 1);
  TRY(cq, ch->wait(5000ms));
  EXPECT(*cq == l->cq_b.native_handle());
  TRY(c, one(l->cq_b));
  EXPECT(c->wr_id == 1);
  TRY(ca, one(l->cq_a));
  EXPECT(same(src, dst));
  // Armed again and never fired: destruction must not hang.
  EXPECT_OK(l->cq_b.request_notify());
  return true;
}

bool check_send_batch(bool wr_api) {
  qp_options o;
  o.wr_api = wr_api;
  TRY(l, make_loop(qp_type::rc, o));
  TRY(ctx, context::open(dev_name));
  bool expect_api = wr_api && ctx->supports(feature::wr_api);
  std::fprintf(stderr, "  wr api requested %d, probe %d, used %d\n", wr_api,
               ctx->supports(feature::wr_api), l->a.uses_wr_api());
  EXPECT(l->a.uses_wr_api() == expect_api);
  std::vector<std::byte> src(3 * 512), remote(2 * 512), dst(512), back(512);
  fill(src, 8);
  TRY(ms, l->pd.register_memory(src));
  TRY(mr, l->pd.register_memory(remote, access::remote_write | access::remote_read));
  TRY(md, l->pd.register_memory(dst));
  TRY(mb, l->pd.register_memory(back));
  TRY(rd, md->all());
  EXPECT_OK(l->b.post_recv(*rd, 9));
  TRY(rr, mr->remote());
  TRY(r0, rr->slice(0, 512));
  TRY(r1, rr->slice(512, 512));
  TRY(s0, ms->slice(0, 512));
  TRY(s1, ms->slice(512, 512));
  TRY(s2, ms->slice(1024, 512));
  TRY(sb, mb->all());
  {
    auto b = l->a.batch();
    b.write(*s0, *r0, 1, send_flags::none).write(*s1, *r1, 2, send_flags::none).send(*s2, 3);
    EXPECT(b.size() == 3);
    EXPECT_OK(b.commit());
  }
  TRY(c, one(l->cq_a));
  EXPECT(c->wr_id == 3);
  TRY(cr, one(l->cq_b));
  EXPECT(same(std::span(src).first(1024), remote));
  EXPECT(same(std::span(src).subspan(1024), dst));
  {
    auto b = l->a.batch();
    b.read(*sb, *r1, 4);
    EXPECT_OK(b.commit());
  }
  TRY(c2, one(l->cq_a));
  EXPECT(same(back, std::span(src).subspan(512, 512)));
  // Over-full batches fail as a whole and post nothing.
  {
    auto b = l->a.batch();
    for (std::size_t i = 0; i <= send_batch::max_size; i++)
      b.write(*s0, *r0, 100, send_flags::none);
    EXPECT(b.commit().error() == errc::batch_full);
  }
  std::array<completion, 1> none;
  TRY(n, l->cq_a.poll(none));
  EXPECT(*n == 0);
  return true;
}

bool check_endpoint_errors() {
  TRY(l, make_loop());
  TRY(e, l->a.local_endpoint());
  EXPECT(!e->gid_value.is_zero());
  EXPECT(e->qpn == l->a.qp_num());
  auto blob = e->serialize();
  EXPECT(endpoint::parse(std::span(blob).first(20)).error() == errc::bad_size);
  blob[4] = std::byte{9};
  EXPECT(endpoint::parse(blob).error() == errc::newer_format);
  return true;
}

// A real mismatch: a QP on the IPv4 RoCE v2 GID connecting to a peer QP on
// an IPv6 (link-local) RoCE v2 GID of the same port. connect() refuses it
// before any modify and the detail names both GIDs; so are a RoCE v1 peer on
// the same address (when the port lists v1 GIDs) and a peer endpoint with
// QPN 0. The same QPs then connect on matching GIDs.
bool check_peer_mismatch() {
  TRY(ctx, context::open(dev_name));
  TRY(port, ctx->first_active_port());
  TRY(table, ctx->gid_table(*port));
  const gid_entry *v6 = nullptr;
  for (auto &e : *table)
    if (!e.value.is_ipv4_mapped() && e.type == gid_type::roce_v2) {
      v6 = &e;
      break;
    }
  EXPECT(v6 != nullptr); // rxe has a link-local GID of each type
  TRY(pd, protection_domain::create(*ctx));
  TRY(cq, completion_queue::create(*ctx));
  qp_options o4;
  o4.gid.ipv4 = test_ip;
  qp_options o6;
  o6.gid_index = static_cast<int>(v6->index);
  TRY(a, queue_pair::create(*ctx, *pd, *cq, *cq, o4));
  TRY(b, queue_pair::create(*ctx, *pd, *cq, *cq, o6));
  TRY(ea, a->local_endpoint());
  TRY(eb, b->local_endpoint());
  EXPECT(ea->gid_value.is_ipv4_mapped());
  auto r = a->connect(*eb);
  std::string said(last_error_detail());
  std::fprintf(stderr, "  detail: %s\n", said.c_str());
  EXPECT(r.error() == errc::gid_mismatch);
  EXPECT(said.find("(IPv6), ours ::ffff:") != std::string::npos);
  EXPECT(said.find("RoCE v2, port " + std::to_string(*port)) != std::string::npos);
  endpoint zero = *ea;
  zero.qpn = 0;
  EXPECT(b->connect(zero).error() == errc::bad_peer_qpn);
  EXPECT(last_error_detail().find("peer's QPN is 0x0") != std::string_view::npos);
  // RoCE v1 against v2 on one address, where the port lists a v1 GID.
  const gid_entry *v1 = nullptr;
  for (auto &e : *table)
    if (e.type == gid_type::roce_v1 && e.value == v6->value)
      v1 = &e;
  if (v1) {
    qp_options o1;
    o1.gid_index = static_cast<int>(v1->index);
    TRY(d, queue_pair::create(*ctx, *pd, *cq, *cq, o1));
    TRY(ed, d->local_endpoint());
    EXPECT(ed->gid_kind == gid_type::roce_v1);
    TRY(parsed, endpoint::parse(ed->serialize()));
    EXPECT(b->connect(*parsed).error() == errc::gid_mismatch);
    std::fprintf(stderr, "  detail: %s\n", std::string(last_error_detail()).c_str());
    EXPECT(last_error_detail().find("peer's GID is RoCE v1") != std::string_view::npos);
  } else {
    std::fprintf(stderr, "  no RoCE v1 GID on this port: v1 against v2 not tried\n");
  }
  // Refused before any modify: both QPs are still in RESET and connect on
  // GIDs of one family.
  TRY(c, queue_pair::create(*ctx, *pd, *cq, *cq, o6));
  TRY(ec, c->local_endpoint());
  EXPECT_OK(b->connect(*ec));
  EXPECT_OK(c->connect(*eb));
  EXPECT(last_error_detail().empty());
  return true;
}

// Parents die before children: each handle keeps what it uses alive, so the
// queue pairs, regions and queue still work after the context and PD handles
// are gone, and a context handle can be re-assigned under its PD.
bool check_lifetimes() {
  std::vector<std::byte> src(256), dst(256);
  fill(src, 3);
  queue_pair a, b;
  completion_queue cq;
  memory_region ms, md;
  {
    TRY(ctx, context::open(dev_name));
    TRY(pd, protection_domain::create(*ctx));
    TRY(c, completion_queue::create(*ctx));
    qp_options o;
    o.gid.ipv4 = test_ip;
    TRY(qa, queue_pair::create(*ctx, *pd, *c, *c, o));
    TRY(qb, queue_pair::create(*ctx, *pd, *c, *c, o));
    TRY(m1, pd->register_memory(src));
    TRY(m2, pd->register_memory(dst, access::remote_write));
    a = std::move(*qa);
    b = std::move(*qb);
    cq = std::move(*c);
    ms = std::move(*m1);
    md = std::move(*m2);
    *ctx = context(); // the context handle first, while everything uses it
  }
  TRY(ea, a.local_endpoint());
  TRY(eb, b.local_endpoint());
  EXPECT_OK(a.connect(*eb));
  EXPECT_OK(b.connect(*ea));
  TRY(s, ms.all());
  TRY(r, md.remote());
  EXPECT_OK(a.post_write(*s, *r, 1));
  TRY(c1, one(cq));
  EXPECT(same(src, dst));
  ms = memory_region(); // regions before the QPs that used them
  md = memory_region();
  cq = completion_queue(); // the CQ handle before its QPs
  a = queue_pair();
  b = queue_pair();

  // Re-assigning a context keeps the old device open for its PD.
  TRY(ctx2, context::open(dev_name));
  TRY(pd2, protection_domain::create(*ctx2));
  *ctx2 = context::open(dev_name).value();
  std::vector<std::byte> more(64);
  TRY(m3, pd2->register_memory(more));
  EXPECT(m3->lkey() != 0 || m3->rkey() != 0 || m3->native_handle() != nullptr);
  return true;
}

// One open batch per QP; a batch keeps its QP alive.
bool check_batch_guard() {
  TRY(l, make_loop());
  std::vector<std::byte> src(64), dst(64);
  fill(src, 5);
  TRY(ms, l->pd.register_memory(src));
  TRY(md, l->pd.register_memory(dst, access::remote_write));
  TRY(s, ms->all());
  TRY(r, md->remote());
  {
    auto b1 = l->a.batch();
    auto b2 = l->a.batch();
    b2.write(*s, *r, 1);
    EXPECT(b2.commit().error() == errc::batch_busy);
    b1.write(*s, *r, 2);
    EXPECT_OK(b1.commit());
    TRY(c, one(l->cq_a));
    EXPECT(c->wr_id == 2);
    // Committed, the batch can be filled again.
    b1.write(*s, *r, 3);
    EXPECT_OK(b1.commit());
    TRY(c3, one(l->cq_a));
    EXPECT(c3->wr_id == 3);
  }
  {
    auto b = l->a.batch(); // free again once the first batch is gone
    l->a = queue_pair();   // the QP handle dies; the batch still holds the QP
    b.write(*s, *r, 4);
    EXPECT_OK(b.commit());
    // Polled while the batch (the QP's last owner) lives: destroying a QP
    // drops what it has not completed.
    TRY(c4, one(l->cq_a));
    EXPECT(c4->wr_id == 4);
  }
  EXPECT(same(src, dst));
  return true;
}

// A send_request built once and posted again; a chain of receives in one post.
bool check_prepared() {
  TRY(l, make_loop());
  constexpr std::size_t n = 4, len = 256;
  std::vector<std::byte> src(n * len), dst(n * len);
  fill(src, 6);
  TRY(ms, l->pd.register_memory(src));
  TRY(md, l->pd.register_memory(dst));
  std::array<local_slice, n> rs{};
  std::array<recv_request, n> rr{};
  for (std::size_t i = 0; i < n; i++) {
    TRY(slice, md->slice(i * len, len));
    rs[i] = *slice;
    rr[i] = recv_request{100 + i, i + 1 < n ? &rr[i + 1] : nullptr, &rs[i], 1};
  }
  EXPECT_OK(l->b.post(rr[0]));
  TRY(first, ms->slice(0, len));
  local_slice s = *first;
  auto w = send_request::send(s, 0);
  for (std::size_t i = 0; i < n; i++) {
    s.addr = first->addr + i * len; // the request points at s: patch it in place
    w.wr_id = i;
    EXPECT_OK(l->a.post(w));
    TRY(c, one(l->cq_a));
    EXPECT(c->wr_id == i);
    TRY(cr, one(l->cq_b));
    EXPECT(cr->wr_id == 100 + i && cr->byte_len == len && cr->opcode == wc_opcode::recv);
  }
  EXPECT(same(src, dst));
  return true;
}

// Poll sessions read the same completions as poll(), on extended and plain CQs.
bool check_poll_session() {
  for (bool plain : {false, true}) {
    plain_cqs = plain;
    auto made = make_loop();
    plain_cqs = false;
    TRY(l, std::move(made));
    EXPECT(l->cq_a.extended() == (!plain && l->ctx.supports(feature::extended_cq)));
    std::vector<std::byte> src(96), dst(96);
    fill(src, 7);
    TRY(ms, l->pd.register_memory(src));
    TRY(md, l->pd.register_memory(dst, access::remote_write));
    TRY(r, md->remote());
    for (std::uint64_t i = 0; i < 3; i++) {
      TRY(s, ms->slice(i * 32, 32));
      TRY(ri, r->slice(i * 32, 32));
      EXPECT_OK(l->a.post_write(*s, *ri, 10 + i));
    }
    std::uint64_t seen = 0;
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (seen < 3 && std::chrono::steady_clock::now() < deadline) {
      TRY(ps, l->cq_a.start_poll());
      for (bool more = static_cast<bool>(*ps); more;) {
        EXPECT(ps->status() == 0 && !ps->error());
        EXPECT(ps->wr_id() == 10 + seen);
        EXPECT(ps->opcode() == wc_opcode::rdma_write);
        EXPECT(ps->qp_num() == l->a.qp_num());
        EXPECT(!ps->has_imm() && ps->imm() == 0);
        seen++;
        TRY(next, ps->next());
        more = *next;
      }
    }
    EXPECT(seen == 3);
    EXPECT(same(src, dst));
  }
  return true;
}

// milliseconds::max() means "no limit", not "already expired".
bool check_waits_saturate() {
  TRY(cl, make_channel_loop());
  completion_channel *ch = &cl->ch;
  loop *l = &cl->l;
  std::vector<std::byte> buf(64);
  TRY(m, l->pd.register_memory(buf));
  TRY(s, m->all());
  EXPECT_OK(l->cq_b.request_notify());
  EXPECT_OK(l->b.post_recv(*s, 1));
  EXPECT_OK(l->a.post_send(*s, 2));
  std::array<completion, 1> c;
  TRY(n, l->cq_a.poll_wait(c, std::chrono::milliseconds::max()));
  EXPECT(*n == 1 && c[0].ok() && c[0].wr_id == 2);
  TRY(which, ch->wait(std::chrono::milliseconds::max()));
  EXPECT(*which == l->cq_b.native_handle());
  TRY(n2, l->cq_b.poll_wait(c, std::chrono::milliseconds::max()));
  EXPECT(*n2 == 1 && c[0].wr_id == 1);
  return true;
}

// A hub multi_channel with three peers, each a channel on the same device:
// every operation, byte for byte, and scopes that end early.
bool check_multi_channel() {
  constexpr std::size_t n = 3, len = 256;
  TRY(ctx, context::open(dev_name));
  channel_options o;
  o.peers = n;
  o.gid.ipv4 = test_ip;
  o.scope_limit = 2000ms;
  TRY(hub, multi_channel::create(*ctx, o));
  std::vector<channel> leaf;
  for (std::size_t i = 0; i < n; i++) {
    TRY(c, channel::create(*ctx, o));
    leaf.push_back(std::move(*c));
  }
  // The exchange goes through the serialised endpoint lists, as peers would.
  TRY(hub_eps, parse_endpoints(serialize_endpoints(hub->local_endpoints())));
  std::vector<endpoint> leaf_eps;
  for (auto &c : leaf) {
    TRY(e, c.local_endpoint());
    leaf_eps.push_back(*e);
  }
  TRY(leaf_list, parse_endpoints(serialize_endpoints(leaf_eps)));
  EXPECT(hub->handshake(std::span(*leaf_list).first(2)).error() == errc::bad_size);
  EXPECT_OK(hub->handshake(*leaf_list));
  for (std::size_t i = 0; i < n; i++)
    EXPECT_OK(leaf[i].handshake((*hub_eps)[i]));
  EXPECT(hub->connected() && leaf[0].connected());

  std::vector<std::byte> hb(n * len), lb[n];
  TRY(hm, hub->pd().register_memory(hb, access::remote_write | access::remote_read));
  std::vector<memory_region> lm;
  for (std::size_t i = 0; i < n; i++) {
    lb[i].resize(len);
    TRY(m, leaf[i].pd().register_memory(lb[i], access::remote_write | access::remote_read));
    lm.push_back(std::move(*m));
  }
  auto hslice = [&](std::size_t i) { return hm->slice(i * len, len).value(); };
  auto expect = [&](unsigned seed) {
    std::vector<std::byte> v(len);
    fill(v, seed);
    return v;
  };

  // multicast: one buffer to every leaf.
  fill(std::span(hb).first(len), 11);
  {
    auto s0 = leaf[0].scope(), s1 = leaf[1].scope(), s2 = leaf[2].scope();
    polling_scope *sc[n] = {&s0, &s1, &s2};
    work_handle h[n];
    for (std::size_t i = 0; i < n; i++) {
      TRY(r, sc[i]->post_recv(0, *lm[i].all()));
      h[i] = *r;
    }
    std::size_t all[] = {0, 1, 2};
    EXPECT_OK(hub->multicast_send(all, hslice(0), 5s));
    for (std::size_t i = 0; i < n; i++) {
      TRY(w, sc[i]->wait(h[i], 5s));
      EXPECT(w->ok() && w->byte_len == len && w->peer == 0);
      EXPECT(same(lb[i], expect(11)));
    }
  }
  // scatter_send: a different slice to each leaf.
  for (std::size_t i = 0; i < n; i++)
    fill(std::span(hb).subspan(i * len, len), 20 + static_cast<unsigned>(i));
  {
    auto s0 = leaf[0].scope(), s1 = leaf[1].scope(), s2 = leaf[2].scope();
    polling_scope *sc[n] = {&s0, &s1, &s2};
    for (std::size_t i = 0; i < n; i++)
      EXPECT_OK(sc[i]->post_recv(0, *lm[i].all()));
    std::vector<multi_channel::part> parts;
    for (std::size_t i = 0; i < n; i++)
      parts.push_back({i, hslice(i), {}});
    EXPECT_OK(hub->scatter_send(parts, 5s));
    for (std::size_t i = 0; i < n; i++) {
      TRY(all, sc[i]->wait_all(5s));
      EXPECT(all->size() == 1 && all->front().ok());
      EXPECT(same(lb[i], expect(20 + static_cast<unsigned>(i))));
    }
  }
  // gather_receive: every leaf sends (from another thread), the hub collects.
  for (std::size_t i = 0; i < n; i++)
    fill(lb[i], 30 + static_cast<unsigned>(i));
  {
    std::atomic<int> sent{0};
    std::thread senders([&] {
      for (std::size_t i = 0; i < n; i++)
        if (leaf[i].send(*lm[i].all(), 10s))
          sent++;
    });
    std::vector<multi_channel::part> parts;
    for (std::size_t i = 0; i < n; i++)
      parts.push_back({i, hslice(i), {}});
    std::array<work_result, n> got_parts{};
    auto got = hub->gather_receive(parts, 10s, got_parts);
    senders.join();
    EXPECT(sent.load() == static_cast<int>(n));
    EXPECT_OK(got);
    for (std::size_t i = 0; i < n; i++)
      EXPECT(got_parts[i].ok() && got_parts[i].peer == i && got_parts[i].byte_len == len);
    for (std::size_t i = 0; i < n; i++)
      EXPECT(same(std::span(hb).subspan(i * len, len), expect(30 + static_cast<unsigned>(i))));
  }
  // scatter_write and gather_read: one-sided, to and from each leaf's region.
  for (std::size_t i = 0; i < n; i++)
    fill(std::span(hb).subspan(i * len, len), 40 + static_cast<unsigned>(i));
  {
    std::vector<multi_channel::part> parts;
    for (std::size_t i = 0; i < n; i++)
      parts.push_back({i, hslice(i), lm[i].remote().value()});
    EXPECT_OK(hub->scatter_write(parts, 5s));
    for (std::size_t i = 0; i < n; i++)
      EXPECT(same(lb[i], expect(40 + static_cast<unsigned>(i))));
    for (std::size_t i = 0; i < n; i++)
      fill(lb[i], 50 + static_cast<unsigned>(i));
    EXPECT_OK(hub->gather_read(parts, 5s));
    for (std::size_t i = 0; i < n; i++)
      EXPECT(same(std::span(hb).subspan(i * len, len), expect(50 + static_cast<unsigned>(i))));
  }
  // A scope left early still completes its write before it ends; after that
  // the NIC never reads the source again, so changing it changes nothing.
  fill(std::span(hb).first(len), 60);
  [&] {
    auto s = hub->scope();
    (void)s.post_write(1, hslice(0), lm[1].remote().value());
    return; // early, without waiting
  }();
  EXPECT(same(lb[1], expect(60)));
  fill(std::span(hb).first(len), 61);
  std::this_thread::sleep_for(100ms);
  EXPECT(same(lb[1], expect(60)));
  // A per-peer error: peer 1's rkey is wrong, so its write fails with a
  // remote access error; the others land. (It leaves the hub's QP 1 in error.)
  for (std::size_t i = 0; i < n; i++)
    fill(std::span(hb).subspan(i * len, len), 70 + static_cast<unsigned>(i));
  {
    std::vector<multi_channel::part> parts;
    for (std::size_t i = 0; i < n; i++)
      parts.push_back({i, hslice(i), lm[i].remote().value()});
    parts[1].remote.rkey ^= 0x80u;
    std::array<work_result, n> res{};
    auto r = hub->scatter_write(parts, 5s, res);
    EXPECT(!r);
    EXPECT(res[1].peer == 1 && res[1].status == 10); // IBV_WC_REM_ACCESS_ERR
    EXPECT(!r && r.error() == res[1].error());
    EXPECT(res[0].ok() && res[2].ok());
    EXPECT(same(lb[0], expect(70)) && same(lb[2], expect(72)));
  }
  // A scope whose receive never gets a message ends after scope_limit with
  // the request flushed, not hanging.
  auto t0 = std::chrono::steady_clock::now();
  {
    auto s = leaf[2].scope();
    EXPECT_OK(s.post_recv(0, *lm[2].all()));
    EXPECT(s.pending() == 1);
    EXPECT(s.wait_all(50ms).error() == errc::timed_out);
  }
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT(took >= 2000ms && took < 10s);
  {
    auto s = leaf[2].scope(); // the channel works again for a new scope
    EXPECT(s.pending() == 0);
    // but its flushed peer is failed for good: RC needs a new connection
    EXPECT(s.post_recv(0, *lm[2].all()).error() == errc::peer_failed);
  }
  EXPECT(!leaf[2].connected());
  // A blocking receive that times out: its queue pair is flushed, the
  // channel says it is no longer connected, later calls fail at once.
  EXPECT(leaf[1].connected());
  EXPECT(leaf[1].receive(*lm[1].all(), 50ms).error() == errc::timed_out);
  EXPECT(!leaf[1].connected());
  EXPECT(leaf[1].receive(*lm[1].all(), 5s).error() == errc::peer_failed);
  EXPECT(leaf[1].send(*lm[1].all(), 5s).error() == errc::peer_failed);
  EXPECT(leaf[0].connected()); // the other channels are untouched
  return true;
}

// Asynchronous events: taking the netdev under the device down and up gives
// a port error, then port active.
bool check_async_events() {
  TRY(ctx, context::open(dev_name));
  EXPECT(ctx->async_fd() >= 0);
  while (ctx->next_event(50ms)) {
  } // whatever the set-up left behind
  EXPECT(ctx->next_event(50ms).error() == errc::timed_out);
  const char *gi = std::getenv("RDMADL_TEST_GID_INDEX");
  std::ifstream f("/sys/class/infiniband/" + dev_name + "/ports/1/gid_attrs/ndevs/" +
                  (gi ? gi : "1"));
  std::string netdev;
  EXPECT(std::getline(f, netdev) && !netdev.empty());
  std::string ip = ::access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : "/usr/bin/ip";
  auto wait_for = [&](async_event_type want) -> bool {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto e = ctx->next_event(1s);
      if (e && e->type == want) {
        std::fprintf(stderr, "  event: %.*s on port %u\n", int(name(e->type).size()),
                     name(e->type).data(), e->port);
        return e->port == 1;
      }
    }
    return false;
  };
  EXPECT(std::system((ip + " link set " + netdev + " down").c_str()) == 0);
  bool down = wait_for(async_event_type::port_err);
  EXPECT(std::system((ip + " link set " + netdev + " up").c_str()) == 0);
  bool up = wait_for(async_event_type::port_active);
  EXPECT(down && up);
  for (int i = 0; i < 100; i++) { // later checks need the port back
    auto pa = ctx->query_port(1);
    if (pa && pa->state == port_state::active)
      return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// Single posts (ibv_post_send) and batches (the WR API where the QP has it)
// on one queue pair, in both orders.
bool check_mixed_posts() {
  TRY(l, make_loop());
  std::vector<std::byte> src(4 * 64), dst(4 * 64);
  fill(src, 70);
  TRY(ms, l->pd.register_memory(src));
  TRY(md, l->pd.register_memory(dst, access::remote_write));
  TRY(r, md->remote());
  for (std::uint64_t i = 0; i < 4; i++) {
    TRY(s, ms->slice(i * 64, 64));
    TRY(ri, r->slice(i * 64, 64));
    if (i % 2 == 0) {
      EXPECT_OK(l->a.post_write(*s, *ri, i));
    } else {
      auto b = l->a.batch();
      b.write(*s, *ri, i);
      EXPECT_OK(b.commit());
    }
    TRY(c, one(l->cq_a));
    EXPECT(c->wr_id == i);
  }
  EXPECT(same(src, dst));
  return true;
}

bool check_cm() {
  TRY(lst, listener::bind(test_ip ? inet_ntoa(in_addr{test_ip}) : "0.0.0.0", 0));
  std::uint16_t port = lst->port();
  EXPECT(port != 0);
  const char hello[] = "hello from client";
  const char welcome[] = "welcome, client";
  std::atomic<bool> server_ok{false};
  std::vector<std::byte> srv_buf(4096);
  std::thread server([&] {
    auto req = lst->get_request(10s);
    if (!req) {
      std::fprintf(stderr, "  server: %s\n", req.error().message().c_str());
      return;
    }
    if (req->peer_data().size() < sizeof hello ||
        std::memcmp(req->peer_data().data(), hello, sizeof hello) != 0) {
      std::fprintf(stderr, "  server: wrong private data\n");
      return;
    }
    cm_options o;
    o.private_data = std::as_bytes(std::span(welcome));
    auto conn = req->accept(o);
    if (!conn) {
      std::fprintf(stderr, "  server accept: %s\n", conn.error().message().c_str());
      return;
    }
    auto mr = conn->pd().register_memory(srv_buf);
    if (!mr)
      return;
    auto s = mr->all();
    if (!s || !conn->qp().post_recv(*s, 1))
      return;
    auto c = one(conn->cq(), 10s);
    if (!c)
      return;
    // Echo it back, then wait for the client to disconnect.
    if (!conn->qp().post_send(*s, 2))
      return;
    if (!one(conn->cq(), 10s))
      return;
    auto d = conn->wait_disconnect(10s);
    if (!d) {
      std::fprintf(stderr, "  server wait_disconnect: %s\n", d.error().message().c_str());
      return;
    }
    server_ok = true;
  });
  bool ok = [&] {
    cm_options o;
    o.private_data = std::as_bytes(std::span(hello));
    auto host = std::string(test_ip ? inet_ntoa(in_addr{test_ip}) : "127.0.0.1");
    // rdma_cm picks the port and GID itself: asking for one is refused, not ignored.
    cm_options pinned = o;
    pinned.qp.port = 1;
    EXPECT(connect(host, port, pinned).error() == errc::not_honoured);
    TRY(conn, connect(host, port, o));
    // The QP rdma_cm made knows its path: port, GID, QPN as the device has them.
    TRY(ep, conn->qp().local_endpoint());
    EXPECT(!ep->gid_value.is_zero());
    EXPECT(ep->qpn == conn->qp().qp_num());
    EXPECT(conn->qp().port() == 1);
    EXPECT(conn->qp().uses_wr_api() == conn->ctx().supports(feature::wr_api));
    EXPECT(conn->peer_data().size() >= sizeof welcome);
    EXPECT(std::memcmp(conn->peer_data().data(), welcome, sizeof welcome) == 0);
    std::vector<std::byte> out(4096), in(4096);
    fill(out, 9);
    TRY(mo, conn->pd().register_memory(out));
    TRY(mi, conn->pd().register_memory(in));
    TRY(si, mi->all());
    EXPECT_OK(conn->qp().post_recv(*si, 10));
    TRY(so, mo->all());
    {
      auto b = conn->qp().batch(); // the WR API on an rdma_cm QP where offered
      b.send(*so, 11);
      EXPECT_OK(b.commit());
    }
    std::array<completion, 2> c;
    std::size_t got = 0;
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (got < 2 && std::chrono::steady_clock::now() < deadline) {
      TRY(n, conn->cq().poll(std::span(c).subspan(got)));
      got += *n;
    }
    EXPECT(got == 2 && c[0].ok() && c[1].ok());
    EXPECT(same(out, in));
    EXPECT_OK(conn->disconnect(10s));
    return true;
  }();
  server.join();
  EXPECT(ok);
  EXPECT(server_ok.load());
  EXPECT(same(srv_buf, [] {
    std::vector<std::byte> v(4096);
    fill(v, 9);
    return v;
  }()));
  return true;
}

// cm_options.ack_timeout reaches the queue pair: once the server's QP is in
// the error state it answers nothing, and a send of the client fails with
// RETRY_EXC_ERR after 7 tries of about 1 ms each. With rdma_cm's own choice
// (ack_timeout 0) the same 7 tries took 16 s on Soft-RoCE (bookworm), and
// with retry_count 7 rxe retries for ever, so 2 s tell them apart.
bool check_cm_ack_timeout() {
  const std::string host = test_ip ? inet_ntoa(in_addr{test_ip}) : "127.0.0.1";
  TRY(lst, listener::bind(host, 0));
  std::atomic<int> stage{0}; // 1: server QP in error; 2: client done
  std::thread server([&] {
    auto req = lst->get_request(10s);
    auto conn = req ? req->accept() : result<connection>(errc::empty_object);
    if (!conn || !conn->qp().to_error()) {
      stage = -1;
      return;
    }
    stage = 1;
    for (int i = 0; i < 3000 && stage.load() != 2; i++)
      std::this_thread::sleep_for(10ms);
  });
  bool ok = [&] {
    cm_options o;
    o.ack_timeout = 8; // 4.096 us * 2^8: about 1 ms; retry_count stays 6
    TRY(conn, connect(host, lst->port(), o));
    for (int i = 0; i < 1000 && stage.load() == 0; i++)
      std::this_thread::sleep_for(10ms);
    EXPECT(stage.load() == 1);
    std::vector<std::byte> buf(256);
    TRY(mr, conn->pd().register_memory(buf));
    TRY(s, mr->all());
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_OK(conn->qp().post_send(*s, 1));
    std::array<completion, 1> c;
    std::size_t got = 0;
    while (got == 0 && std::chrono::steady_clock::now() - t0 < 20s) {
      TRY(n, conn->cq().poll(c));
      got = *n;
    }
    auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT(got == 1);
    std::fprintf(stderr, "  send to a silent peer: %s after %.3f s\n",
                 c[0].error().message().c_str(), secs);
    EXPECT(c[0].status == 12); // IBV_WC_RETRY_EXC_ERR
    EXPECT(secs < 2.0);
    return true;
  }();
  stage = 2;
  server.join();
  return ok;
}

bool check_cm_reject() {
  TRY(lst, listener::bind(test_ip ? inet_ntoa(in_addr{test_ip}) : "0.0.0.0", 0));
  std::uint16_t port = lst->port();
  std::thread server([&] {
    auto req = lst->get_request(10s);
    if (req) {
      const char no[] = "go away";
      (void)req->reject(std::as_bytes(std::span(no)));
    }
  });
  cm_options o;
  o.timeout = 10s;
  auto conn = connect(test_ip ? inet_ntoa(in_addr{test_ip}) : "127.0.0.1", port, o);
  server.join();
  EXPECT(!conn);
  EXPECT(conn.error() == errc::rejected);
  EXPECT(conn.error() == std::errc::connection_refused);
  // Nobody listening: an error, within the timeout.
  o.timeout = 3s;
  auto t0 = std::chrono::steady_clock::now();
  auto none = connect(test_ip ? inet_ntoa(in_addr{test_ip}) : "127.0.0.1", port, o);
  EXPECT(!none);
  EXPECT(std::chrono::steady_clock::now() - t0 < 20s);
  std::fprintf(stderr, "  connect with no listener: %s\n", none.error().message().c_str());
  return true;
}

// The peer is another process that exits after connecting: the parent's
// sends complete with an error status within the timeout, and nothing hangs.
bool check_peer_exit() {
  int to_child[2], to_parent[2];
  EXPECT(pipe(to_child) == 0 && pipe(to_parent) == 0);
  pid_t pid = fork();
  EXPECT(pid >= 0);
  if (pid == 0) {
    close(to_child[1]);
    close(to_parent[0]);
    auto ctx = context::open(dev_name);
    if (!ctx)
      _exit(2);
    auto pd = protection_domain::create(*ctx);
    auto cq = completion_queue::create(*ctx);
    if (!pd || !cq)
      _exit(2);
    qp_options o;
    o.gid.ipv4 = test_ip;
    auto qp = queue_pair::create(*ctx, *pd, *cq, *cq, o);
    if (!qp)
      _exit(2);
    auto me = qp->local_endpoint()->serialize();
    std::array<std::byte, endpoint::serialized_size> peer;
    if (write(to_parent[1], me.data(), me.size()) != static_cast<ssize_t>(me.size()) ||
        read(to_child[0], peer.data(), peer.size()) != static_cast<ssize_t>(peer.size()))
      _exit(3);
    auto pe = endpoint::parse(peer);
    if (!pe || !qp->connect(*pe))
      _exit(4);
    char go = 1;
    if (write(to_parent[1], &go, 1) != 1)
      _exit(5);
    _exit(0); // no cleanup: the kernel tears the QP down
  }
  close(to_child[0]);
  close(to_parent[1]);
  bool ok = [&] {
    TRY(ctx, context::open(dev_name));
    TRY(pd, protection_domain::create(*ctx));
    TRY(cq, completion_queue::create(*ctx));
    qp_options o;
    o.gid.ipv4 = test_ip;
    TRY(qp, queue_pair::create(*ctx, *pd, *cq, *cq, o));
    std::array<std::byte, endpoint::serialized_size> peer;
    EXPECT(read(to_parent[0], peer.data(), peer.size()) == static_cast<ssize_t>(peer.size()));
    auto me = qp->local_endpoint()->serialize();
    EXPECT(write(to_child[1], me.data(), me.size()) == static_cast<ssize_t>(me.size()));
    TRY(pe, endpoint::parse(peer));
    connect_options co;
    co.timeout = 10; // ~4 ms per try
    co.retry_cnt = 2;
    co.rnr_retry = 2;
    EXPECT_OK(qp->connect(*pe, co));
    char go = 0;
    EXPECT(read(to_parent[0], &go, 1) == 1);
    int st = 0;
    EXPECT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    std::vector<std::byte> buf(64 * 1024);
    TRY(mr, pd->register_memory(buf));
    TRY(s, mr->all());
    for (int i = 0; i < 4; i++)
      EXPECT_OK(qp->post_send(*s, static_cast<std::uint64_t>(i)));
    auto t0 = std::chrono::steady_clock::now();
    std::array<completion, 4> c;
    std::size_t got = 0;
    while (got < 4 && std::chrono::steady_clock::now() - t0 < 60s) {
      TRY(n, cq->poll(std::span(c).subspan(got)));
      got += *n;
    }
    auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "  %zu completions in %.2f s; first: %s\n", got, secs,
                 got ? c[0].error().message().c_str() : "-");
    EXPECT(got == 4);
    EXPECT(!c[0].ok());
    for (std::size_t i = 1; i < got; i++)
      EXPECT(!c[i].ok());
    return true;
  }();
  close(to_child[1]);
  close(to_parent[0]);
  if (!ok) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  return ok;
}

// ---- multi_channel over rdma_cm ----

std::string cm_host() {
  return test_ip ? inet_ntoa(in_addr{test_ip}) : "127.0.0.1";
}

// Every operation between a hub and its leaves (leaf i is the hub's peer i),
// byte for byte: multicast, scatter_send, gather_receive, scatter_write,
// gather_read, and the single blocking forms.
bool exercise_hub(multi_channel &hub, std::vector<channel> &leaf) {
  const std::size_t n = 3, len = 256;
  EXPECT(leaf.size() == n && hub.peers() == n && hub.connected());
  std::vector<std::byte> hb(n * len);
  std::vector<std::vector<std::byte>> lb(n, std::vector<std::byte>(len));
  TRY(hm, hub.pd().register_memory(hb, access::remote_write | access::remote_read));
  std::vector<memory_region> lm;
  for (std::size_t i = 0; i < n; i++) {
    TRY(m, leaf[i].pd().register_memory(lb[i], access::remote_write | access::remote_read));
    lm.push_back(std::move(*m));
  }
  auto hslice = [&](std::size_t i) { return hm->slice(i * len, len).value(); };
  auto hpart = [&](std::size_t i) { return std::span(hb).subspan(i * len, len); };
  auto expect = [&](unsigned seed) {
    std::vector<std::byte> v(len);
    fill(v, seed);
    return v;
  };
  // multicast: one buffer to every leaf; scatter_send: a slice to each.
  for (int round = 0; round < 2; round++) {
    for (std::size_t i = 0; i < n; i++)
      fill(hpart(i), 100 + static_cast<unsigned>(round * 10 + (round ? i : 0)));
    auto s0 = leaf[0].scope(), s1 = leaf[1].scope(), s2 = leaf[2].scope();
    polling_scope *sc[] = {&s0, &s1, &s2};
    std::vector<work_handle> h;
    for (std::size_t i = 0; i < n; i++) {
      TRY(r, sc[i]->post_recv(0, *lm[i].all()));
      h.push_back(*r);
    }
    if (round == 0) {
      std::vector<std::size_t> all;
      for (std::size_t i = 0; i < n; i++)
        all.push_back(i);
      EXPECT_OK(hub.multicast_send(all, hslice(0), 5s));
    } else {
      std::vector<multi_channel::part> parts;
      for (std::size_t i = 0; i < n; i++)
        parts.push_back({i, hslice(i), {}});
      EXPECT_OK(hub.scatter_send(parts, 5s));
    }
    for (std::size_t i = 0; i < n; i++) {
      TRY(w, sc[i]->wait(h[i], 5s));
      EXPECT(w->ok() && w->byte_len == len);
      EXPECT(same(lb[i], expect(100 + static_cast<unsigned>(round * 10 + (round ? i : 0)))));
    }
  }
  // gather_receive: every leaf sends (from another thread), the hub collects.
  for (std::size_t i = 0; i < n; i++)
    fill(lb[i], 130 + static_cast<unsigned>(i));
  {
    std::atomic<int> sent{0};
    std::thread senders([&] {
      for (std::size_t i = 0; i < n; i++)
        if (leaf[i].send(*lm[i].all(), 10s))
          sent++;
    });
    std::vector<multi_channel::part> parts;
    for (std::size_t i = 0; i < n; i++)
      parts.push_back({i, hslice(i), {}});
    std::array<work_result, n> got_parts;
    auto got = hub.gather_receive(parts, 10s, got_parts);
    senders.join();
    EXPECT(sent.load() == static_cast<int>(n));
    EXPECT_OK(got);
    for (std::size_t i = 0; i < n; i++)
      EXPECT(got_parts[i].ok() && got_parts[i].peer == i);
    for (std::size_t i = 0; i < n; i++)
      EXPECT(same(hpart(i), expect(130 + static_cast<unsigned>(i))));
  }
  // scatter_write and gather_read: one-sided, to and from each leaf's region.
  {
    for (std::size_t i = 0; i < n; i++)
      fill(hpart(i), 140 + static_cast<unsigned>(i));
    std::vector<multi_channel::part> parts;
    for (std::size_t i = 0; i < n; i++)
      parts.push_back({i, hslice(i), lm[i].remote().value()});
    EXPECT_OK(hub.scatter_write(parts, 5s));
    for (std::size_t i = 0; i < n; i++)
      EXPECT(same(lb[i], expect(140 + static_cast<unsigned>(i))));
    for (std::size_t i = 0; i < n; i++)
      fill(lb[i], 150 + static_cast<unsigned>(i));
    EXPECT_OK(hub.gather_read(parts, 5s));
    for (std::size_t i = 0; i < n; i++)
      EXPECT(same(hpart(i), expect(150 + static_cast<unsigned>(i))));
  }
  // The single forms, peer by peer, both directions: a leaf writes into the
  // hub's region too (its QP was accepted or connected by rdma_cm).
  TRY(hub_region, hm->remote());
  for (std::size_t i = 0; i < n; i++) {
    fill(hpart(i), 160 + static_cast<unsigned>(i));
    result<std::uint32_t> got = errc::timed_out;
    std::thread rx([&] { got = leaf[i].receive(*lm[i].all(), 10s); });
    auto sent = hub.send(i, hslice(i), 10s);
    rx.join();
    EXPECT_OK(sent);
    EXPECT_OK(got);
    EXPECT(*got == len && same(lb[i], expect(160 + static_cast<unsigned>(i))));
    fill(hpart(i), 170 + static_cast<unsigned>(i));
    EXPECT_OK(hub.write(i, hslice(i), lm[i].remote().value(), 5s));
    EXPECT(same(lb[i], expect(170 + static_cast<unsigned>(i))));
    fill(lb[i], 180 + static_cast<unsigned>(i));
    EXPECT_OK(hub.read(i, hslice(i), lm[i].remote().value(), 5s));
    EXPECT(same(hpart(i), expect(180 + static_cast<unsigned>(i))));
    fill(lb[i], 190 + static_cast<unsigned>(i));
    TRY(dst, hub_region->slice(i * len, len));
    EXPECT_OK(leaf[i].write(*lm[i].all(), *dst, 5s));
    EXPECT(same(hpart(i), expect(190 + static_cast<unsigned>(i))));
  }
  return true;
}

// A hub accepting three peers through one listener, each a channel
// connecting from this process: stray ranks refused, peer index from the
// rank (not the order of arrival), every operation, and a peer that
// disconnects mid-life seen as its event.
bool check_cm_multi_channel() {
  constexpr std::size_t n = 3;
  const std::string host = cm_host();
  TRY(lst, listener::bind(host, 0));
  cm_channel_options ho;
  ho.accept = n;
  ho.first_rank = 10; // clients send 10, 11, 12: peers 0, 1, 2
  ho.timeout = 15s;
  ho.channel.scope_limit = 2000ms;
  ho.channel.send_depth = 32;
  ho.channel.recv_depth = 16;
  result<multi_channel> hub = errc::timed_out;
  std::thread server([&] { hub = multi_channel::create_cm(&*lst, ho); });
  auto client = [&](std::uint32_t rank) {
    cm_channel_options co;
    co.connect = {{host, lst->port()}};
    co.rank = rank;
    co.timeout = 15s;
    auto t = std::chrono::steady_clock::now();
    auto c = channel::create_cm(nullptr, co);
    std::fprintf(stderr, "  client rank %u: %s (%.2f s)\n", rank,
                 c ? "connected" : c.error().message().c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
    return c;
  };
  auto stray = client(13); // outside [10, 13)
  auto c2 = client(12);    // arrives first, is still peer 2
  auto dup = client(12);   // taken
  auto c0 = client(10);
  auto low = client(9);
  auto c1 = client(11);
  server.join();
  EXPECT_OK(hub);
  EXPECT(stray.error() == errc::rank_refused);
  EXPECT(dup.error() == errc::rank_refused);
  EXPECT(low.error() == errc::rank_refused);
  EXPECT(dup.error() == std::errc::connection_refused);
  EXPECT_OK(c0);
  EXPECT_OK(c1);
  EXPECT_OK(c2);
  std::vector<channel> leaf;
  leaf.push_back(std::move(*c0));
  leaf.push_back(std::move(*c1));
  leaf.push_back(std::move(*c2));
  for (std::size_t i = 0; i < n; i++) {
    EXPECT(hub->cm_connected(i));
    TRY(ep, hub->local_endpoint(i)); // the path rdma_cm chose is known
    EXPECT(!ep->gid_value.is_zero() && ep->qpn == hub->qp(i).qp_num());
  }
  // One PD for every peer: hub->pd() registered memory works with each.
  if (!exercise_hub(*hub, leaf))
    return false;

  // The event loop's view: nothing yet; then leaf 1 goes away (its
  // destructor disconnects) and the fd becomes readable with its event.
  EXPECT(hub->cm_fd() >= 0);
  EXPECT(hub->next_cm_event().error() == errc::timed_out);
  auto t0 = std::chrono::steady_clock::now();
  std::thread gone([&] { leaf[1] = channel(); });
  pollfd pf{hub->cm_fd(), POLLIN, 0};
  int ready = ::poll(&pf, 1, 10000);
  auto ev = hub->next_cm_event(5s);
  gone.join();
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT(ready == 1);
  EXPECT_OK(ev);
  std::fprintf(stderr, "  event: peer %zu kind %d (rdma_cm %d, status %d)\n", ev->peer,
               static_cast<int>(ev->kind), ev->event, ev->status);
  EXPECT(ev->peer == 1 && ev->kind == cm_event_kind::disconnected);
  EXPECT(took < 10s); // the leaf's destructor is bounded
  EXPECT(!hub->cm_connected(1) && hub->cm_connected(0) && hub->cm_connected(2));
  // Peer 1's queue pair is flushed; the others still work.
  std::vector<std::byte> b(64);
  TRY(bm, hub->pd().register_memory(b));
  auto dead = hub->send(1, *bm->all(), 5s);
  EXPECT(!dead);
  // The event made peer 1 failed: refused at once, the others connected.
  EXPECT(dead.error() == errc::peer_failed);
  EXPECT(!hub->connected(1) && !hub->connected() && hub->connected(0) && hub->connected(2));
  std::fprintf(stderr, "  send to the gone peer: %s\n", dead.error().message().c_str());
  for (std::size_t i : {std::size_t{0}, std::size_t{2}}) {
    std::vector<std::byte> lbuf(64);
    TRY(lmr, leaf[i].pd().register_memory(lbuf, access::remote_write));
    fill(b, 200 + static_cast<unsigned>(i));
    EXPECT_OK(hub->write(i, *bm->all(), lmr->remote().value(), 5s));
    EXPECT(same(lbuf, b));
  }
  // The hub's own end disconnects the two left, within its bound.
  t0 = std::chrono::steady_clock::now();
  *hub = multi_channel();
  EXPECT(std::chrono::steady_clock::now() - t0 < 5s);
  return true;
}

// A client that stops midway: it sends a connection request with the hello
// of rank, then reads none of its events, so librdmacm never answers the
// acceptor's reply (no RTU: the acceptor's connection is never
// established); after hold it destroys its id, which rejects the reply.
// Raw rdma_cm from the system's librdmacm (dlopen): rdmadl has no call
// that stops there. False when a step fails.
bool half_open_client(const std::string &host, std::uint16_t port, std::uint32_t rank,
                      std::chrono::milliseconds hold) {
  void *lib = dlopen("librdmacm.so.1", RTLD_NOW);
  if (!lib)
    return false;
#define CM_FN(name) auto name##_ = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name))
  CM_FN(rdma_create_event_channel);
  CM_FN(rdma_destroy_event_channel);
  CM_FN(rdma_create_id);
  CM_FN(rdma_destroy_id);
  CM_FN(rdma_resolve_addr);
  CM_FN(rdma_resolve_route);
  CM_FN(rdma_get_cm_event);
  CM_FN(rdma_ack_cm_event);
  CM_FN(rdma_connect);
#undef CM_FN
  bool ok = false;
  rdma_event_channel *ch = rdma_create_event_channel_ ? rdma_create_event_channel_() : nullptr;
  rdma_cm_id *id = nullptr;
  auto step = [&](rdma_cm_event_type want) {
    rdma_cm_event *ev = nullptr;
    if (rdma_get_cm_event_(ch, &ev))
      return false;
    bool got = ev->event == want;
    rdma_ack_cm_event_(ev);
    return got;
  };
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(port);
  if (ch && inet_pton(AF_INET, host.c_str(), &dst.sin_addr) == 1 &&
      rdma_create_id_(ch, &id, nullptr, RDMA_PS_TCP) == 0 &&
      rdma_resolve_addr_(id, nullptr, reinterpret_cast<sockaddr *>(&dst), 2000) == 0 &&
      step(RDMA_CM_EVENT_ADDR_RESOLVED) && rdma_resolve_route_(id, 2000) == 0 &&
      step(RDMA_CM_EVENT_ROUTE_RESOLVED)) {
    // "RDMC", version 1, 3 zero bytes, the rank little-endian
    std::uint8_t hello[12] = {'R', 'D', 'M', 'C', 1, 0, 0, 0};
    for (int i = 0; i < 4; i++)
      hello[8 + i] = static_cast<std::uint8_t>(rank >> (8 * i));
    rdma_conn_param p{};
    p.private_data = hello;
    p.private_data_len = sizeof hello;
    p.responder_resources = p.initiator_depth = 1;
    p.retry_count = 6;
    p.rnr_retry_count = 7;
    p.qp_num = 0x1234; // no QP: the reply waits for this side, which never answers
    ok = rdma_connect_(id, &p) == 0;
    if (ok)
      std::this_thread::sleep_for(hold);
  }
  if (id)
    rdma_destroy_id_(id);
  if (ch)
    rdma_destroy_event_channel_(ch);
  dlclose(lib);
  return ok;
}

// create_cm's accepting has one deadline that no client restarts, and a
// client that stops midway holds up no other and frees its rank when its
// connection fails.
bool check_cm_accept_deadline() {
  const std::string host = cm_host();
  {
    // A refused client every 100 ms for up to 8 s: the accepting still ends
    // at its 2 s deadline (the first version waited for the stream's end).
    TRY(lst, listener::bind(host, 0));
    cm_channel_options ho;
    ho.accept = 1;
    ho.timeout = 2s;
    std::atomic<bool> stop{false};
    std::thread stream([&] {
      auto end = std::chrono::steady_clock::now() + 8s;
      while (!stop && std::chrono::steady_clock::now() < end) {
        cm_channel_options co;
        co.connect = {{host, lst->port()}};
        co.rank = 5; // outside [0, 1)
        co.timeout = 1s;
        (void)channel::create_cm(nullptr, co);
        std::this_thread::sleep_for(100ms);
      }
    });
    auto t0 = std::chrono::steady_clock::now();
    auto hub = multi_channel::create_cm(&*lst, ho);
    auto took = std::chrono::steady_clock::now() - t0;
    stop = true;
    stream.join();
    std::fprintf(stderr, "  refused stream: %s after %.2f s\n",
                 hub ? "connected" : hub.error().message().c_str(),
                 std::chrono::duration<double>(took).count());
    EXPECT(hub.error() == errc::rank_refused);
    EXPECT(took >= 1900ms && took < 4s);
  }
  {
    // Rank 0 stops midway, rank 1 connects, rank 0 tries again: the channel
    // is made (the first version failed as soon as the stuck client's
    // connection did).
    TRY(lst, listener::bind(host, 0));
    cm_channel_options ho;
    ho.accept = 2;
    ho.timeout = 20s;
    result<multi_channel> hub = errc::timed_out;
    std::thread server([&] { hub = multi_channel::create_cm(&*lst, ho); });
    EXPECT(half_open_client(host, lst->port(), 0, 1500ms));
    auto connect = [&](std::uint32_t rank) {
      cm_channel_options co;
      co.connect = {{host, lst->port()}};
      co.rank = rank;
      co.timeout = 5s;
      auto c = channel::create_cm(nullptr, co);
      // The stuck client's rank is free once the acceptor has seen its
      // connection fail; until then it is taken.
      for (int i = 0; i < 25 && !c && c.error() == errc::rank_refused; i++) {
        std::this_thread::sleep_for(200ms);
        c = channel::create_cm(nullptr, co);
      }
      return c;
    };
    auto c1 = connect(1);
    auto c0 = connect(0);
    server.join();
    EXPECT_OK(c1);
    EXPECT_OK(c0);
    EXPECT_OK(hub);
    EXPECT(hub->connected() && hub->cm_connected(0) && hub->cm_connected(1));
    // Peer i is rank i: each sees the other's bytes.
    for (std::size_t i = 0; i < 2; i++) {
      channel &leaf = i == 0 ? *c0 : *c1;
      std::vector<std::byte> b(32), r(32);
      fill(b, 60 + static_cast<unsigned>(i));
      TRY(bm, hub->pd().register_memory(b));
      TRY(rm, leaf.pd().register_memory(r));
      result<std::uint32_t> got = errc::timed_out;
      std::thread rx([&] { got = leaf.receive(*rm->all(), 5s); });
      auto sent = hub->send(i, *bm->all(), 5s);
      rx.join();
      EXPECT_OK(sent);
      EXPECT_OK(got);
      EXPECT(same(r, b));
    }
  }
  return true;
}

// A full mesh of three multi_channels of two peers each over rdma_cm
// loopback (cm_mesh): node k's peer p is node p (p < k) or p + 1, checked
// by what each node receives from each peer, then one-sided writes.
bool check_cm_mesh() {
  constexpr std::size_t k = 3, len = 128;
  const std::string host = cm_host();
  std::vector<listener> lst;
  std::vector<cm_address> nodes;
  for (std::size_t i = 0; i < k; i++) {
    TRY(l, listener::bind(host, 0));
    nodes.push_back({host, l->port()});
    lst.push_back(std::move(*l));
  }
  std::atomic<int> built{0}, finished{0}, good{0};
  std::vector<std::string> why(k);
  // Each node's region, so the others can write into it: slot j <- node j.
  std::vector<std::vector<std::byte>> region(k, std::vector<std::byte>(k * len));
  std::vector<remote_region> regions(k);
  auto node = [&](std::size_t r) -> bool {
    auto fail = [&](const char *what, std::error_code ec) {
      why[r] = std::string(what) + ": " + ec.message();
      return false;
    };
    auto o = cm_mesh(r, nodes);
    if (!o)
      return fail("cm_mesh", o.error());
    o->timeout = 15s;
    auto mc = multi_channel::create_cm(&lst[r], *o);
    built++;
    if (!mc)
      return fail("create_cm", mc.error());
    std::vector<std::byte> out(len), in((k - 1) * len);
    fill(out, 300 + static_cast<unsigned>(r));
    auto mo = mc->pd().register_memory(out);
    auto mi = mc->pd().register_memory(in);
    auto mr = mc->pd().register_memory(region[r], access::remote_write);
    if (!mo || !mi || !mr)
      return fail("register", std::make_error_code(std::errc::not_enough_memory));
    regions[r] = mr->remote().value();
    {
      auto s = mc->scope();
      for (std::size_t p = 0; p < k - 1; p++)
        if (auto h = s.post_recv(p, mi->slice(p * len, len).value()); !h)
          return fail("post_recv", h.error());
      for (std::size_t p = 0; p < k - 1; p++)
        if (auto h = s.post_send(p, *mo->all()); !h)
          return fail("post_send", h.error());
      auto all = s.wait_all(15s);
      if (!all)
        return fail("wait_all", all.error());
      for (const auto &w : *all)
        if (!w.ok())
          return fail("completion", w.error());
    }
    for (std::size_t p = 0; p < k - 1; p++) {
      std::size_t sender = p < r ? p : p + 1;
      std::vector<std::byte> want(len);
      fill(want, 300 + static_cast<unsigned>(sender));
      if (!same(std::span(in).subspan(p * len, len), want))
        return fail("peer index", std::make_error_code(std::errc::bad_message));
    }
    // Every node has published its region once all are built and have
    // exchanged; then each writes its slot into every peer's region.
    finished++;
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (finished.load() < static_cast<int>(k) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    for (std::size_t p = 0; p < k - 1; p++) {
      std::size_t target = p < r ? p : p + 1;
      auto dst = regions[target].slice(r * len, len);
      if (!dst)
        return fail("slice", dst.error());
      if (auto w = mc->write(p, *mo->all(), *dst, 10s); !w)
        return fail("write", w.error());
    }
    finished++; // second barrier: nobody disconnects while others still write
    while (finished.load() < static_cast<int>(2 * k) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    good++;
    return true;
  };
  std::vector<std::thread> t;
  for (std::size_t r = 0; r < k; r++)
    t.emplace_back([&, r] { (void)node(r); });
  for (auto &x : t)
    x.join();
  for (std::size_t r = 0; r < k; r++)
    if (!why[r].empty())
      std::fprintf(stderr, "  node %zu: %s\n", r, why[r].c_str());
  EXPECT(built.load() == static_cast<int>(k));
  EXPECT(good.load() == static_cast<int>(k));
  for (std::size_t r = 0; r < k; r++)
    for (std::size_t j = 0; j < k; j++) {
      if (j == r)
        continue;
      std::vector<std::byte> want(len);
      fill(want, 300 + static_cast<unsigned>(j));
      EXPECT(same(std::span(region[r]).subspan(j * len, len), want));
    }
  return true;
}

// --absent: the library or kernel is missing; everything fails cleanly.
int absent_main() {
  report("absent-available", !available());
  auto l = device_list::get();
  report("absent-device-list", !l && l.error() == std::errc::operation_not_supported);
  auto c = context::open();
  report("absent-context", !c && c.error() == std::errc::operation_not_supported);
  auto e = event_channel::create();
  report("absent-event-channel", !e && e.error() == std::errc::operation_not_supported);
  auto k = connect("127.0.0.1", 1);
  report("absent-cm-connect", !k && k.error() == std::errc::operation_not_supported);
  cm_channel_options co;
  co.connect = {{"127.0.0.1", 1}};
  auto mc = multi_channel::create_cm(nullptr, co);
  report("absent-cm-multi-channel", !mc && mc.error() == std::errc::operation_not_supported);
  return failures ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--absent") == 0)
    return absent_main();
  if (const char *d = std::getenv("RDMADL_TEST_DEVICE"))
    dev_name = d;
  if (const char *ip = std::getenv("RDMADL_TEST_IP")) {
    in_addr a{};
    if (inet_pton(AF_INET, ip, &a) == 1)
      test_ip = a.s_addr;
  }
  const char *only = argc > 1 ? argv[1] : nullptr;
  struct {
    const char *name;
    bool (*fn)();
  } checks[] = {
      {"peer-exit", check_peer_exit}, // first: forks before this process opens a device
      {"probe", check_probe},
      {"device", check_device},
      {"gid-select", check_gid_select},
      {"memory-bounds", check_memory_bounds},
      {"rc-send-recv", [] { return check_send_recv(qp_type::rc); }},
      {"uc-send-recv", [] { return check_send_recv(qp_type::uc); }},
      {"send-imm", [] { return check_imm(false); }},
      {"write-imm", [] { return check_imm(true); }},
      {"write-read", check_write_read},
      {"dmabuf", check_dmabuf},
      {"atomics", check_atomics},
      {"ud-send-recv", check_ud},
      {"srq", check_srq},
      {"batch-poll", check_batch_poll},
      {"comp-channel", check_comp_channel},
      {"send-batch", [] { return check_send_batch(true); }},
      {"send-batch-chained", [] { return check_send_batch(false); }},
      {"endpoint", check_endpoint_errors},
      {"peer-mismatch", check_peer_mismatch},
      {"lifetimes", check_lifetimes},
      {"batch-guard", check_batch_guard},
      {"prepared", check_prepared},
      {"poll-session", check_poll_session},
      {"waits-saturate", check_waits_saturate},
      {"multi-channel", check_multi_channel},
      {"mixed-posts", check_mixed_posts},
      {"cm-connect", check_cm},
      {"cm-reject", check_cm_reject},
      {"cm-ack-timeout", check_cm_ack_timeout},
      {"cm-multi-channel", check_cm_multi_channel},
      {"cm-accept-deadline", check_cm_accept_deadline},
      {"cm-mesh", check_cm_mesh},
      {"async-events", check_async_events}, // last: it takes the port down
  };
  for (auto &c : checks) {
    if (only && std::strcmp(only, c.name) != 0)
      continue;
    std::fprintf(stderr, "cxx-%s\n", c.name);
    report(c.name, c.fn());
  }
  return failures ? 1 : 0;
}

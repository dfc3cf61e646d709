// SPDX-License-Identifier: MIT
// cxx_device's checks of one device's objects: probe, device and GID
// selection, memory regions (dma-buf too), every queue pair type's data path,
// completion queues and channels, batches, endpoints, lifetimes, async
// events, and a peer process that dies.
#include "cxx_device.hpp"

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <linux/udmabuf.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace cxx_device {

namespace {
// A source and a destination buffer of LEN bytes on PD, the source filled
// with SEED's pattern, the destination registered with RIGHTS.
struct buffers {
  std::vector<std::byte> src, dst;
  memory_region ms, md;
};
result<buffers> make_buffers(const protection_domain &pd, std::size_t len, unsigned seed,
                             rdmadl::access rights = rdmadl::access::local) {
  buffers b{std::vector<std::byte>(len), std::vector<std::byte>(len), {}, {}};
  fill(b.src, seed);
  auto ms = pd.register_memory(b.src);
  if (!ms)
    return ms.error();
  auto md = pd.register_memory(b.dst, rights);
  if (!md)
    return md.error();
  b.ms = std::move(*ms);
  b.md = std::move(*md);
  return b;
}
} // namespace

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
  EXPECT(mr->slice(0, 0).error() == errc::empty_span);
  TRY(rmr, pd->register_memory(buf, access::remote_read));
  TRY(rr, rmr->remote(8, 16));
  EXPECT(rr->rkey == rmr->rkey() && rr->length == 16);
  EXPECT(rmr->remote(4090, 16).error() == errc::out_of_range);
  return true;
}

bool check_send_recv(qp_type type) {
  TRY(l, make_loop(type));
  TRY(bufs, make_buffers(l->pd, 4096, 1));
  auto &[src, dst, ms, md] = *bufs;
  TRY(rs, md.all());
  EXPECT_OK(l->b.post_recv(*rs, 7));
  TRY(ss, ms.all());
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
  TRY(bufs, make_buffers(l->pd, 1024, 2, access::remote_write));
  auto &[src, dst, ms, md] = *bufs;
  TRY(rs, md.all());
  TRY(ss, ms.all());
  EXPECT_OK(l->b.post_recv(*rs, 1));
  if (write) {
    TRY(rr, md.remote());
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
  TRY(bufs, make_buffers(l->pd, 256 * 4, 5));
  auto &[src, dst, ms, md] = *bufs;
  for (int i = 0; i < 4; i++) {
    TRY(rs, md.slice(static_cast<std::size_t>(i) * 256, 256));
    EXPECT_OK(srq->post_recv(*rs, 100 + static_cast<std::uint64_t>(i)));
  }
  for (int i = 0; i < 4; i++) {
    TRY(ss, ms.slice(static_cast<std::size_t>(i) * 256, 256));
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
  TRY(bufs, make_buffers(l->pd, 64 * n, 6));
  auto &[src, dst, ms, md] = *bufs;
  for (int i = 0; i < n; i++) {
    TRY(r, md.slice(static_cast<std::size_t>(i) * 64, 64));
    EXPECT_OK(l->b.post_recv(*r, static_cast<std::uint64_t>(i)));
  }
  for (int i = 0; i < n; i++) {
    TRY(s, ms.slice(static_cast<std::size_t>(i) * 64, 64));
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
  TRY(bufs, make_buffers(l->pd, 128, 7));
  auto &[src, dst, ms, md] = *bufs;
  TRY(rs, md.all());
  TRY(ss, ms.all());
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
  qp_options o4 = test_qp_options();
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
    qp_options o = test_qp_options();
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
  TRY(bufs, make_buffers(l->pd, 64, 5, access::remote_write));
  auto &[src, dst, ms, md] = *bufs;
  TRY(s, ms.all());
  TRY(r, md.remote());
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
  TRY(bufs, make_buffers(l->pd, n * len, 6));
  auto &[src, dst, ms, md] = *bufs;
  std::array<local_slice, n> rs{};
  std::array<recv_request, n> rr{};
  for (std::size_t i = 0; i < n; i++) {
    TRY(slice, md.slice(i * len, len));
    rs[i] = *slice;
    rr[i] = recv_request{100 + i, i + 1 < n ? &rr[i + 1] : nullptr, &rs[i], 1};
  }
  EXPECT_OK(l->b.post(rr[0]));
  TRY(first, ms.slice(0, len));
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
    TRY(bufs, make_buffers(l->pd, 96, 7, access::remote_write));
    auto &[src, dst, ms, md] = *bufs;
    TRY(r, md.remote());
    for (std::uint64_t i = 0; i < 3; i++) {
      TRY(s, ms.slice(i * 32, 32));
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
  TRY(bufs, make_buffers(l->pd, 4 * 64, 70, access::remote_write));
  auto &[src, dst, ms, md] = *bufs;
  TRY(r, md.remote());
  for (std::uint64_t i = 0; i < 4; i++) {
    TRY(s, ms.slice(i * 64, 64));
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
    qp_options o = test_qp_options();
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
    qp_options o = test_qp_options();
    TRY(qp, queue_pair::create(*ctx, *pd, *cq, *cq, o));
    std::array<std::byte, endpoint::serialized_size> peer;
    EXPECT(read(to_parent[0], peer.data(), peer.size()) == static_cast<ssize_t>(peer.size()));
    auto me = qp->local_endpoint()->serialize();
    EXPECT(write(to_child[1], me.data(), me.size()) == static_cast<ssize_t>(me.size()));
    TRY(pe, endpoint::parse(peer));
    connect_options co;
    co.transport.ack_timeout = 10; // ~4 ms per try
    co.transport.retry_count = 2;
    co.transport.rnr_retry = 2;
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

} // namespace cxx_device

// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <cstring>
#include <string>
#include <sys/resource.h>
#include <utility>

#include "detail.hpp"
#include "nodes.hpp"
#include "rdmadl/memory.hpp"
#include "rdmadl/runtime.hpp"
#include "serial.hpp"

namespace rdmadl {

namespace {
constexpr char region_magic[5] = "RDRR";
}

// Layout: magic[4] version[1] pad[3] addr[8] rkey[4] length[8], little-endian.
// A region never wraps: addr + length <= 2^64 - 1 (a length past the end of
// the address space is written as what remains of it, so parse() accepts
// every blob serialize() makes).
std::array<std::byte, remote_region::serialized_size> remote_region::serialize() const noexcept {
  std::array<std::byte, serialized_size> b{};
  detail::put_header(b.data(), region_magic, format_version);
  detail::put_le(b.data() + 8, addr);
  detail::put_le(b.data() + 16, rkey);
  detail::put_le(b.data() + 20, length <= UINT64_MAX - addr ? length : UINT64_MAX - addr);
  return b;
}

// Accepts exactly what serialize() writes: the header, and a region whose
// addr + length does not wrap (otherwise errc::bad_blob).
result<remote_region> remote_region::parse(std::span<const std::byte> b) {
  if (auto ec = detail::check_header(b, region_magic, format_version, serialized_size))
    return ec;
  remote_region r;
  r.addr = detail::get_le<std::uint64_t>(b.data() + 8);
  r.rkey = detail::get_le<std::uint32_t>(b.data() + 16);
  r.length = detail::get_le<std::uint64_t>(b.data() + 20);
  if (r.length > UINT64_MAX - r.addr)
    return errc::bad_blob;
  return r;
}

result<remote_region> remote_region::slice(std::uint64_t offset, std::uint64_t len) const {
  if (len == 0)
    return errc::empty_span;
  if (offset > length || len > length - offset)
    return errc::out_of_range;
  return remote_region{addr + offset, rkey, len};
}

result<local_slice> memory_region::all() const {
  return slice(0, len_);
}

result<local_slice> memory_region::slice(std::size_t offset, std::size_t len) const {
  if (!n_)
    return detail::rdma_error(errc::empty_object);
  if (len == 0)
    return errc::empty_span;
  if (offset > len_ || len > len_ - offset)
    return errc::out_of_range;
  if (len > UINT32_MAX)
    return errc::slice_too_long;
  return local_slice{reinterpret_cast<std::uint64_t>(base_.get() + offset),
                     static_cast<std::uint32_t>(len), lkey_};
}

result<remote_region> memory_region::remote(std::size_t offset, std::size_t len) const {
  if (!n_)
    return detail::rdma_error(errc::empty_object);
  if (!has(access_, access::remote_write) && !has(access_, access::remote_read) &&
      !has(access_, access::remote_atomic))
    return std::errc::operation_not_permitted;
  if (len == SIZE_MAX && offset <= len_)
    len = len_.get() - offset;
  if (len == 0)
    return errc::empty_span;
  if (offset > len_ || len > len_ - offset)
    return errc::out_of_range;
  return remote_region{reinterpret_cast<std::uint64_t>(base_.get() + offset), rkey_, len};
}

protection_domain detail::software_pd() {
  return detail::access::make<protection_domain>(std::make_shared<detail::pd_node>());
}

result<protection_domain> protection_domain::create(const context &ctx) {
  if (!ctx)
    return detail::rdma_error(errc::empty_object);
  return detail::access::adopt<protection_domain>(ibv_alloc_pd(ctx.native_handle()),
                                                  &detail::pd_node::pd, [&](detail::pd_node &n) {
                                                    n.owned = true;
                                                    n.ctx = detail::access::node(ctx);
                                                  });
}
protection_domain protection_domain::borrow(ibv_pd *pd) noexcept {
  protection_domain p;
  if (pd) {
    auto n = std::make_shared<detail::pd_node>();
    n->pd = pd;
    detail::access::set(p, std::move(n));
  }
  return p;
}

namespace {
int access_flags(access rights) noexcept {
  unsigned flags = IBV_ACCESS_LOCAL_WRITE;
  if (has(rights, access::remote_write))
    flags |= IBV_ACCESS_REMOTE_WRITE;
  if (has(rights, access::remote_read))
    flags |= IBV_ACCESS_REMOTE_READ;
  if (has(rights, access::remote_atomic))
    flags |= IBV_ACCESS_REMOTE_ATOMIC;
  return static_cast<int>(flags);
}
} // namespace

namespace {
// ibv_reg_mr failed with ENOMEM (errc::memlock_limit: the kernel does not say
// whether the locked-memory limit or the device's region count ran out) or
// EPERM (errc::memlock_denied); last_error_detail() gives both limits:
// "ibv_reg_mr of 16384 bytes: Cannot allocate memory (errno 12): the
// locked-memory limit RLIMIT_MEMLOCK 65536 bytes (`ulimit -l`) or the
// device's max_mr 256 is reached".
status_code pinning_failed(ibv_pd *pd, std::size_t bytes, int e) noexcept {
  rlimit rl{};
  std::string limit = "unknown";
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0)
    limit = rl.rlim_cur == RLIM_INFINITY
                ? "unlimited"
                : std::to_string(static_cast<unsigned long long>(rl.rlim_cur));
  ibv_device_attr da{};
  const int max_mr = ibv_query_device(pd->context, &da) == 0 ? da.max_mr : -1;
  return detail::fail(
      e == ENOMEM ? errc::memlock_limit : errc::memlock_denied,
      detail::format("ibv_reg_mr of %zu bytes: %s (errno %d): the locked-memory limit "
                     "RLIMIT_MEMLOCK %s bytes (`ulimit -l`) or the device's max_mr %d is reached",
                     bytes, std::strerror(e), e, limit.c_str(), max_mr));
}
} // namespace

result<memory_region> protection_domain::register_memory(std::span<std::byte> buf,
                                                         access rights) const {
  if (buf.empty())
    return errc::empty_span;
  if (!n_)
    return detail::rdma_error(errc::empty_object);
  detail::clear_error_detail();
  auto n = std::make_shared<detail::mr_node>();
  const auto addr = reinterpret_cast<std::uint64_t>(buf.data());
  if (!pd_) { // a software PD: keys from its table's counter
    n->lkey = n->rkey = n_->regions.next_key();
    n_->regions.add(n->lkey, n->rkey, addr, buf.size(), rights);
    n->pd = n_;
    memory_region m;
    detail::access::set(m, std::move(n), buf.data(), buf.size(), rights);
    return m;
  }
  const int flags = access_flags(rights);
  errno = 0;
  ibv_mr *mr = ibv_reg_mr(pd_, buf.data(), buf.size(), flags);
  if (!mr) {
    const int e = errno;
    if (e == ENOMEM || e == EPERM)
      return pinning_failed(pd_, buf.size(), e);
    ibv_pd *pd = pd_;
    ibv_device_attr da{};
    return detail::resource_error("ibv_reg_mr", "memory region", "max_mr",
                                  ibv_query_device(pd->context, &da) == 0 ? da.max_mr : -1, e);
  }
  n->mr = mr;
  n->lkey = mr->lkey;
  n->rkey = mr->rkey;
  n_->regions.add(n->lkey, n->rkey, addr, buf.size(), rights); // for TCP peers of a channel
  n->pd = n_;
  memory_region m;
  detail::access::set(m, std::move(n), buf.data(), buf.size(), rights);
  return m;
}

result<memory_region> protection_domain::register_dmabuf(int fd, std::uint64_t offset,
                                                         std::size_t length, std::uint64_t iova,
                                                         access rights) const {
  if (length == 0)
    return errc::empty_span;
  if (fd < 0)
    return std::errc::bad_file_descriptor;
  if (length > UINT64_MAX - offset || length > UINT64_MAX - iova)
    return errc::out_of_range;
  if (!n_)
    return detail::rdma_error(errc::empty_object);
  if (!pd_) // a software PD: no device to map the dma-buf
    return std::errc::operation_not_supported;
  // A release without ibv_reg_dmabuf_mr: the loader's stub refuses and
  // rdma_error() says errc::library_lacks, not the device's EOPNOTSUPP.
  errno = 0;
  ibv_mr *mr = ibv_reg_dmabuf_mr(pd_, offset, length, iova, fd, access_flags(rights));
  if (!mr)
    return detail::rdma_error();
  auto n = std::make_shared<detail::mr_node>();
  n->mr = mr; // no table entry: an IOVA range is no memory a TCP peer's bytes can reach
  n->lkey = mr->lkey;
  n->rkey = mr->rkey;
  n->pd = n_;
  memory_region m;
  detail::access::set(m, std::move(n), reinterpret_cast<std::byte *>(iova), length, rights);
  return m;
}

} // namespace rdmadl

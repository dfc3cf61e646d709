// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/memory.hpp - protection domains, registered memory, and the
/// descriptor a peer needs for one-sided operations.
#ifndef RDMADL_MEMORY_HPP
#define RDMADL_MEMORY_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/fwd.hpp"

namespace rdmadl {

/// Memory-region access rights. Local write is always granted; remote rights
/// only when asked for.
enum class access : unsigned {
  local = 0,              ///< local write only (IBV_ACCESS_LOCAL_WRITE, always granted)
  remote_write = 1u << 1, ///< IBV_ACCESS_REMOTE_WRITE
  remote_read = 1u << 2,  ///< IBV_ACCESS_REMOTE_READ
  remote_atomic = 1u << 3 ///< IBV_ACCESS_REMOTE_ATOMIC
};
/// The union of two sets of rights.
constexpr access operator|(access a, access b) noexcept {
  return static_cast<access>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
/// True when set grants bit (for a combination: any of its rights); never for access::local.
constexpr bool has(access set, access bit) noexcept {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(bit)) != 0;
}

/// A local scatter/gather element: part of a registered region. The layout
/// twin of struct ibv_sge (checked in src/abi.cpp), so a work request points
/// straight at it.
struct local_slice {
  std::uint64_t addr = 0;   ///< the first byte's address (ibv_sge::addr)
  std::uint32_t length = 0; ///< bytes (ibv_sge::length)
  std::uint32_t lkey = 0;   ///< the region's local key (ibv_sge::lkey)
  /// addr as a pointer.
  std::byte *data() const noexcept { return reinterpret_cast<std::byte *>(addr); }
};

/// What a peer needs to read, write or atomically update a region: its
/// address, rkey and length. Serialises to a fixed 28-byte blob with a magic
/// and a format version.
struct RDMADL_CXX_API remote_region {
  std::uint64_t addr = 0;   ///< the first byte's address in the peer's address space (or IOVA)
  std::uint32_t rkey = 0;   ///< the peer region's remote key
  std::uint64_t length = 0; ///< bytes

  /// The blob format serialize() writes; parse() refuses a newer one.
  static constexpr std::uint8_t format_version = 1;
  static constexpr std::size_t serialized_size = 28; ///< bytes of the blob
  /// The blob; a length that would run past the end of the address space is
  /// cut there, so every blob describes a range that does not wrap.
  std::array<std::byte, serialized_size> serialize() const noexcept;
  /// Parses a blob made by serialize(); accepts exactly what serialize() can
  /// produce. Errors (all equal to std::errc::invalid_argument):
  /// errc::bad_size, errc::bad_magic, errc::newer_format, errc::bad_blob
  /// (non-zero reserved bytes, addr + length wrapping).
  static result<remote_region> parse(std::span<const std::byte> blob);
  /// [offset, offset + len) of this region. Errors: errc::empty_span (len
  /// 0), errc::out_of_range (not inside this region).
  result<remote_region> slice(std::uint64_t offset, std::uint64_t len) const;
  /// Field-wise equality.
  friend bool operator==(const remote_region &, const remote_region &) = default;
};

/// A registered memory region (ibv_reg_mr). Never owns the buffer: the
/// caller keeps it alive and in place while the region lives. Keeps its
/// protection domain (and so the device) alive. Move-only.
class RDMADL_CXX_API memory_region {
public:
  /// An empty region.
  memory_region() noexcept = default;
  /// Moves; the source becomes empty.
  memory_region(memory_region &&o) noexcept = default;
  /// Moves; the source becomes empty and this region's former registration
  /// is released (deregistered when nothing else holds it).
  memory_region &operator=(memory_region &&o) noexcept = default;
  /// Releases the registration (ibv_dereg_mr); the buffer itself is untouched.
  /// Once the registration is released, no TCP peer's byte lands in the
  /// buffer: a copy into it that is running is waited for (a thread waiting
  /// on a channel may take a large payload's rest in one blocking recv(2),
  /// at most 20 ms).
  ~memory_region() = default;

  /// The registered bytes (for register_dmabuf(): the IOVA range, not memory
  /// to touch); empty when the region is empty.
  std::span<std::byte> data() const noexcept { return {base_.get(), len_.get()}; }
  /// The local key, for local_slice; 0 when empty.
  std::uint32_t lkey() const noexcept { return lkey_; }
  /// The remote key, for remote_region; 0 when empty.
  std::uint32_t rkey() const noexcept { return rkey_; }
  /// The rights it was registered with.
  access rights() const noexcept { return access_; }
  /// The whole region as a scatter/gather element. Errors: errc::empty_object,
  /// errc::slice_too_long when it is longer than 4 GiB - 1 (use slice()).
  result<local_slice> all() const;
  /// [offset, offset + len) of the region. Errors: errc::empty_object,
  /// errc::empty_span (len 0), errc::out_of_range (not inside the region),
  /// errc::slice_too_long (len >= 4 GiB).
  result<local_slice> slice(std::size_t offset, std::size_t len) const;
  /// The descriptor to send to a peer, for [offset, offset + len) (whole region
  /// by default). Errors: errc::empty_object, errc::empty_span (len 0),
  /// errc::out_of_range (not inside the region); operation_not_permitted
  /// when the region has no remote access.
  result<remote_region> remote(std::size_t offset = 0, std::size_t len = SIZE_MAX) const;

  /// The rdma-core region; null when empty or registered on a software
  /// protection domain (a channel without a device, see multi_channel::pd()).
  ::ibv_mr *native_handle() const noexcept { return mr_; }
  /// False for an empty (default-constructed or moved-from) region.
  explicit operator bool() const noexcept { return n_ != nullptr; }

private:
  friend struct detail::access;
  detail::take<::ibv_mr *> mr_;
  detail::take<std::byte *> base_;
  detail::take<std::size_t> len_;
  detail::take<std::uint32_t> lkey_, rkey_;
  access access_ = access::local;
  std::shared_ptr<detail::mr_node> n_;
};

/// A protection domain (ibv_alloc_pd). Keeps its context's device open; is
/// deallocated when it and every region, queue pair, SRQ and address handle
/// made on it are gone. Move-only.
class RDMADL_CXX_API protection_domain {
public:
  /// Allocates a protection domain on ctx. Errors: operation_not_supported,
  /// errc::empty_object, or the errno.
  static result<protection_domain> create(const context &ctx);
  /// Wraps pd without owning it.
  static protection_domain borrow(::ibv_pd *pd) noexcept;

  /// An empty protection domain.
  protection_domain() noexcept = default;
  /// Moves; the source becomes empty.
  protection_domain(protection_domain &&o) noexcept = default;
  /// Moves; the source becomes empty and this handle's former PD is released
  /// (deallocated when nothing else holds it).
  protection_domain &operator=(protection_domain &&o) noexcept = default;
  /// Releases this handle; the PD is deallocated with its last object.
  ~protection_domain() = default;

  /// Registers buf (local write always; remote rights only as asked). On a
  /// software protection domain the keys come from a counter and nothing is
  /// pinned. Errors:
  /// errc::empty_span, errc::memlock_limit / errc::memlock_denied (the
  /// locked-memory limit: raise it with `ulimit -l`; ENOMEM, which may also
  /// be the device's max_mr: last_error_detail() gives both limits), or the
  /// errno (EAGAIN: the rdma cgroup's rdma.max refused one more device
  /// object; last_error_detail() says so).
  result<memory_region> register_memory(std::span<std::byte> buf,
                                        access rights = access::local) const;

  /// Registers [offset, offset + length) of the dma-buf fd (GPU or other
  /// device memory exported as a dma-buf), addressed as [iova, iova +
  /// length) by work requests and peers: the region's data() is that IOVA
  /// range, not memory this process may touch. The region does not own fd.
  /// Errors say which layer refused: errc::library_lacks (equal to
  /// operation_not_supported) when the loaded libibverbs has no
  /// ibv_reg_dmabuf_mr (rdma-core < 34, supports(feature::dmabuf_mr) false);
  /// otherwise the errno of the provider or kernel (EOPNOTSUPP: the device
  /// or its driver cannot register dma-bufs; EBADF, EINVAL: not a usable
  /// dma-buf or range). Before any call: errc::empty_span (length 0),
  /// std::errc::bad_file_descriptor (fd < 0), errc::out_of_range (offset +
  /// length or iova + length past 2^64).
  result<memory_region> register_dmabuf(int fd, std::uint64_t offset, std::size_t length,
                                        std::uint64_t iova, access rights = access::local) const;

  /// The rdma-core protection domain; null when empty or a software one (the
  /// pd() of a channel that has no device: its regions serve TCP peers only).
  ::ibv_pd *native_handle() const noexcept { return pd_; }
  /// False for an empty (default-constructed or moved-from) protection domain.
  explicit operator bool() const noexcept { return n_ != nullptr; }

private:
  friend struct detail::access;
  detail::take<::ibv_pd *> pd_;
  std::shared_ptr<detail::pd_node> n_;
};

} // namespace rdmadl

#endif // RDMADL_MEMORY_HPP

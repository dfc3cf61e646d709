// SPDX-License-Identifier: MIT
// The regions of one protection domain, as the TCP engine needs them: every
// register_memory() of a PD (software or verbs) adds its range, keys and
// rights here and the region's end removes them, so the engine can check an
// incoming write or read (inside a region, with that right) the way an RC
// responder checks an rkey, and a local slice against its lkey.
//
// use() runs a copy into or out of a region under the table's shared lock:
// a region's end (remove) takes the lock exclusively, so it waits for a copy
// that is running, and the next copy finds the region gone. A copy is one
// non-blocking socket call, so no end ever waits for a peer.
#ifndef RDMADL_SRC_REGION_TABLE_HPP
#define RDMADL_SRC_REGION_TABLE_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <shared_mutex>
#include <span>
#include <unordered_map>

#include "rdmadl/memory.hpp"

namespace rdmadl::detail {

class region_table {
public:
  // Which key a lookup names: a peer's rkey, or a local slice's lkey.
  enum class key_kind { remote, local };
  // Adds a region (keys, range, rights).
  void add(std::uint32_t lkey, std::uint32_t rkey, std::uint64_t addr, std::uint64_t length,
           rdmadl::access rights);
  // Removes the region of lkey; waits for a use() that is running.
  void remove(std::uint32_t lkey) noexcept;
  // Calls fn() while [addr, addr + length) is inside the region that key
  // names and that grants right (access::local: any region), holding the
  // region in place; returns false (fn not called) otherwise.
  template <class Fn>
  bool use(key_kind kind, std::uint32_t key, std::uint64_t addr, std::uint64_t length,
           rdmadl::access right, Fn &&fn) const {
    std::shared_lock lock(m_);
    if (!allows(kind, key, addr, length, right))
      return false;
    fn();
    return true;
  }
  // One range for use_each() (no initializers: an array of them is filled
  // per sendmsg(2)).
  struct range {
    key_kind kind;
    std::uint32_t key;
    std::uint64_t addr, length;
    rdmadl::access right;
  };
  // use() for several ranges at once (one sendmsg(2) of several payloads):
  // calls fn() while each of ranges is inside the region its key names and
  // that grants its right, holding them all in place; returns false (fn
  // not called) if one is not.
  template <class Fn> bool use_each(std::span<const range> ranges, Fn &&fn) const {
    std::shared_lock lock(m_);
    for (const range &r : ranges)
      if (!allows(r.kind, r.key, r.addr, r.length, r.right))
        return false;
    fn();
    return true;
  }
  // A key for a software region: never 0, never one given before.
  std::uint32_t next_key() noexcept { return next_.fetch_add(1) | 0x100000u; }

private:
  // use()'s check; the caller holds m_.
  bool allows(key_kind kind, std::uint32_t key, std::uint64_t addr, std::uint64_t length,
              rdmadl::access right) const noexcept;
  struct entry {
    std::uint32_t rkey;
    std::uint64_t addr, length;
    rdmadl::access rights;
  };
  // Every socket call looks a key up: hashed, not searched (a PD may hold
  // thousands of regions).
  mutable std::shared_mutex m_;
  std::unordered_map<std::uint32_t, entry> by_lkey_;
  std::unordered_map<std::uint32_t, std::uint32_t> lkey_of_rkey_;
  std::atomic<std::uint32_t> next_{1};
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_REGION_TABLE_HPP

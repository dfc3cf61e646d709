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
// non-blocking socket call, so no end waits for a peer there. A copy that
// may block (a recv(2) that waits for the rest of a peer's payload) goes
// through use_blocking(): it holds its one region only, not the table, so
// only that region's end waits for it, as deregistering memory that a
// NIC is writing waits for the NIC to let go.
//
// The engine checks a region about twice per message (a batch's payloads
// once, under one reader, through their sendmsg(2); an incoming payload
// once, under use(), through its copy), so the read path is kept short: the shared lock is one
// atomic counter (gate; a region's start or end, rare, waits for the readers to leave), and a
// caller may pass a hint that remembers the regions it found last, valid
// while no region started or ended since (the table's generation): a stream
// of frames through the same buffers then looks nothing up.
#ifndef RDMADL_SRC_REGION_TABLE_HPP
#define RDMADL_SRC_REGION_TABLE_HPP

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <unordered_map>

#include "locks.hpp"
#include "rdmadl/memory.hpp"

namespace rdmadl::detail {

class region_table {
  struct entry {
    std::uint32_t lkey, rkey;
    std::uint64_t addr, length;
    rdmadl::access rights;
  };

public:
  // Which key a lookup names: a peer's rkey, or a local slice's lkey.
  enum class key_kind { remote, local };
  // What a caller found last (see the top of this file): a few regions by
  // kind and key, as of the table's generation gen. One per thread of use
  // at a time (the TCP engine keeps one per peer, under its mutex).
  class hint {
    friend class region_table;
    struct found {
      key_kind kind = key_kind::local;
      std::uint32_t key = 0;
      entry e{};
    };
    std::uint64_t gen = 0; // 0: nothing (the table's starts at 1)
    std::array<found, 4> slot{};
    std::uint32_t next = 0; // the slot the next one found goes to
  };
  // Adds a region (keys, range, rights).
  void add(std::uint32_t lkey, std::uint32_t rkey, std::uint64_t addr, std::uint64_t length,
           rdmadl::access rights);
  // Removes the region of lkey; waits for a use() that is running, and for
  // a use_blocking() of that region.
  void remove(std::uint32_t lkey) noexcept;
  // Calls fn() while [addr, addr + length) is inside the region that key
  // names and that grants right (access::local: any region), holding the
  // region in place; returns false (fn not called) otherwise. h (optional):
  // the caller's hint, consulted and updated.
  template <class Fn>
  bool use(key_kind kind, std::uint32_t key, std::uint64_t addr, std::uint64_t length,
           rdmadl::access right, Fn &&fn, hint *h = nullptr) const {
    std::shared_lock lock(gate_);
    if (!allowed(kind, key, addr, length, right, h))
      return false;
    fn();
    return true;
  }
  // use() for an fn() that may block (a blocking recv(2)): fn() runs
  // without the table's shared lock, the region alone held in place (its
  // end waits for fn() to return; every other use(), start and end goes on).
  template <class Fn>
  bool use_blocking(key_kind kind, std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                    rdmadl::access right, Fn &&fn) const {
    pin_node held;
    {
      std::shared_lock lock(gate_);
      const entry *e = allowed(kind, key, addr, length, right, nullptr);
      if (!e)
        return false;
      held.lkey = e->lkey;
      pin(held); // before the gate opens: a remove() that follows sees it
    }
    fn();
    unpin(held);
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
  template <class Fn>
  bool use_each(std::span<const range> ranges, Fn &&fn, hint *h = nullptr) const {
    std::shared_lock lock(gate_);
    for (const range &r : ranges)
      if (!allowed(r.kind, r.key, r.addr, r.length, r.right, h))
        return false;
    fn();
    return true;
  }
  // A shared hold of the table, as use() takes for one call, for a caller
  // that checks several ranges and then uses them all (the TCP engine's
  // batch: its checks, then one sendmsg(2)): while it lasts, no region
  // starts or ends. No use() or use_each() while holding one (a region's
  // start or end waiting for it would keep them out for good).
  class reader {
  public:
    explicit reader(const region_table &t) noexcept : t_(t) { t_.gate_.lock_shared(); }
    ~reader() { t_.gate_.unlock_shared(); }
    reader(const reader &) = delete;
    reader &operator=(const reader &) = delete;
    // use()'s test: whether [addr, addr + length) is inside the region that
    // key names and that grants right (access::local: any region).
    bool allows(key_kind kind, std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                rdmadl::access right, hint *h = nullptr) const noexcept {
      return t_.allowed(kind, key, addr, length, right, h) != nullptr;
    }

  private:
    const region_table &t_;
  };
  // A key for a software region: never 0, never one given before.
  std::uint32_t next_key() noexcept { return next_.fetch_add(1) | 0x100000u; }

private:
  // use()'s check: the region, if it allows the use (nullptr: none); the
  // caller holds gate_ shared. Inline while the hint has the region (the
  // engine's case once warm), else found().
  const entry *allowed(key_kind kind, std::uint32_t key, std::uint64_t addr, std::uint64_t length,
                       rdmadl::access right, hint *h) const noexcept {
    if (h && h->gen == gen_ && key != 0)
      for (const auto &s : h->slot)
        if (s.key == key && s.kind == kind)
          return covers(s.e, addr, length, right) ? &s.e : nullptr;
    const entry *e = found(kind, key, h);
    return e && covers(*e, addr, length, right) ? e : nullptr;
  }
  // Whether e grants right over [addr, addr + length).
  static bool covers(const entry &e, std::uint64_t addr, std::uint64_t length,
                     rdmadl::access right) noexcept {
    if (right != rdmadl::access::local && !has(e.rights, right))
      return false;
    return addr >= e.addr && addr - e.addr <= e.length && length <= e.length - (addr - e.addr);
  }
  // The region key names (nullptr: none), looked up and put in h (if any).
  const entry *found(key_kind kind, std::uint32_t key, hint *h) const noexcept;
  // The region key names (nullptr: none); the caller holds gate_.
  const entry *find(key_kind kind, std::uint32_t key) const noexcept;
  // Every socket call looks a key up: hashed, not searched (a PD may hold
  // thousands of regions), or found in the caller's hint.
  mutable rw_gate gate_;
  std::mutex writers_;    // one writer in gate_ at a time
  std::uint64_t gen_ = 1; // bumped by every add and remove (under gate_)
  std::unordered_map<std::uint32_t, entry> by_lkey_;
  std::unordered_map<std::uint32_t, std::uint32_t> lkey_of_rkey_;
  std::atomic<std::uint32_t> next_{1};
  // The regions a use_blocking() holds: rare, so a list under a mutex, and
  // remove() waits on pin_cv_. Each call's node lives on its own stack, so
  // holding a region allocates nothing (the engine's callers are noexcept).
  struct pin_node {
    std::uint32_t lkey = 0;
    pin_node *next = nullptr;
  };
  void pin(pin_node &n) const noexcept;
  void unpin(pin_node &n) const noexcept;
  bool pinned(std::uint32_t lkey) const noexcept; // the caller holds pin_m_
  mutable std::mutex pin_m_;
  mutable std::condition_variable pin_cv_;
  mutable pin_node *pins_ = nullptr;
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_REGION_TABLE_HPP

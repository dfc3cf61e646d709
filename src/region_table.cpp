// SPDX-License-Identifier: MIT
#include "region_table.hpp"

#include <mutex>

namespace rdmadl::detail {

void region_table::add(std::uint32_t lkey, std::uint32_t rkey, std::uint64_t addr,
                       std::uint64_t length, rdmadl::access rights) {
  std::lock_guard w(writers_);
  std::lock_guard lock(gate_);
  gen_++;
  by_lkey_[lkey] = entry{lkey, rkey, addr, length, rights};
  lkey_of_rkey_[rkey] = lkey;
}

void region_table::remove(std::uint32_t lkey) noexcept {
  {
    std::lock_guard w(writers_);
    std::lock_guard lock(gate_);
    gen_++;
    auto it = by_lkey_.find(lkey);
    if (it == by_lkey_.end())
      return;
    auto r = lkey_of_rkey_.find(it->second.rkey);
    if (r != lkey_of_rkey_.end() && r->second == lkey)
      lkey_of_rkey_.erase(r);
    by_lkey_.erase(it);
  }
  // Gone from the table: no use starts; one that holds it runs to its end.
  std::unique_lock l(pin_m_);
  pin_cv_.wait(l, [&] { return !pinned(lkey); });
}

bool region_table::pinned(std::uint32_t lkey) const noexcept {
  for (const pin_node *n = pins_; n; n = n->next)
    if (n->lkey == lkey)
      return true;
  return false;
}

void region_table::pin(pin_node &n) const noexcept {
  std::lock_guard l(pin_m_);
  n.next = pins_;
  pins_ = &n;
}

void region_table::unpin(pin_node &n) const noexcept {
  {
    std::lock_guard l(pin_m_);
    pin_node **at = &pins_;
    while (*at != &n)
      at = &(*at)->next;
    *at = n.next;
  }
  pin_cv_.notify_all();
}

const region_table::entry *region_table::find(key_kind kind, std::uint32_t key) const noexcept {
  if (kind == key_kind::remote) {
    auto r = lkey_of_rkey_.find(key);
    if (r == lkey_of_rkey_.end())
      return nullptr;
    key = r->second;
  }
  auto it = by_lkey_.find(key);
  return it == by_lkey_.end() ? nullptr : &it->second;
}

const region_table::entry *region_table::found(key_kind kind, std::uint32_t key,
                                               hint *h) const noexcept {
  const entry *e = find(kind, key);
  if (!e || !h || key == 0)
    return e;
  if (h->gen != gen_) { // a region started or ended since: forget them all
    h->gen = gen_;
    for (auto &s : h->slot)
      s.key = 0;
  }
  auto &s = h->slot[h->next];
  h->next = (h->next + 1) % h->slot.size();
  s = {kind, key, *e};
  return &s.e;
}

} // namespace rdmadl::detail

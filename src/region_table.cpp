// SPDX-License-Identifier: MIT
#include "region_table.hpp"

#include <mutex>

namespace rdmadl::detail {

void region_table::add(std::uint32_t lkey, std::uint32_t rkey, std::uint64_t addr,
                       std::uint64_t length, rdmadl::access rights) {
  std::unique_lock lock(m_);
  by_lkey_[lkey] = entry{rkey, addr, length, rights};
  lkey_of_rkey_[rkey] = lkey;
}

void region_table::remove(std::uint32_t lkey) noexcept {
  std::unique_lock lock(m_);
  auto it = by_lkey_.find(lkey);
  if (it == by_lkey_.end())
    return;
  auto r = lkey_of_rkey_.find(it->second.rkey);
  if (r != lkey_of_rkey_.end() && r->second == lkey)
    lkey_of_rkey_.erase(r);
  by_lkey_.erase(it);
}

bool region_table::allows(key_kind kind, std::uint32_t key, std::uint64_t addr,
                          std::uint64_t length, rdmadl::access right) const noexcept {
  if (kind == key_kind::remote) {
    auto r = lkey_of_rkey_.find(key);
    if (r == lkey_of_rkey_.end())
      return false;
    key = r->second;
  }
  auto it = by_lkey_.find(key);
  if (it == by_lkey_.end())
    return false;
  const entry &e = it->second;
  if (right != rdmadl::access::local && !has(e.rights, right))
    return false;
  return addr >= e.addr && addr - e.addr <= e.length && length <= e.length - (addr - e.addr);
}

} // namespace rdmadl::detail

// SPDX-License-Identifier: MIT
#include "region_table.hpp"

#include <mutex>

namespace rdmadl::detail {

void region_table::add(std::uint32_t lkey, std::uint32_t rkey, std::uint64_t addr,
                       std::uint64_t length, rdmadl::access rights) {
  std::unique_lock lock(m_);
  entries_.push_back({lkey, rkey, addr, length, rights});
}

void region_table::remove(std::uint32_t lkey) noexcept {
  std::unique_lock lock(m_);
  for (std::size_t i = 0; i < entries_.size(); i++)
    if (entries_[i].lkey == lkey) {
      entries_[i] = entries_.back();
      entries_.pop_back();
      return;
    }
}

bool region_table::allows(key_kind kind, std::uint32_t key, std::uint64_t addr,
                          std::uint64_t length, rdmadl::access right) const noexcept {
  for (const auto &e : entries_) {
    if ((kind == key_kind::remote ? e.rkey : e.lkey) != key)
      continue;
    if (right != rdmadl::access::local && !has(e.rights, right))
      return false;
    return addr >= e.addr && addr - e.addr <= e.length && length <= e.length - (addr - e.addr);
  }
  return false;
}

} // namespace rdmadl::detail

// SPDX-License-Identifier: MIT
// The fallback decisions (README: the failure contract) as the loader tests check them: what the
// table says (emu_in_table) and, written out independently of it, the symbols newer than
// rdma-core 33.2 (IBVERBS_1.11, RDMACM_1.3) that fall back; every other newer one fails with
// EOPNOTSUPP when the library lacks it. Needs loader/ on the include path.
#ifndef RDMADL_TEST_EMU_DECISIONS_HPP
#define RDMADL_TEST_EMU_DECISIONS_HPP

#include <set>
#include <string>

// Whether symbols.def marks name EMU.
inline bool emu_in_table(const std::string &name) {
  static const struct {
    const char *name, *impl;
  } table[] = {
#define RDMADL_SYM(lib, minor, fail, impl, ret, n, params, args) {#n, #impl},
#include "symbols.def"
#undef RDMADL_SYM
  };
  for (const auto &e : table)
    if (name == e.name)
      return std::string(e.impl) == "EMU";
  return false;
}

inline const std::set<std::string> emulated_newer = {
    "ibv_alloc_buf", "ibv_free_buf", "ibv_reg_buf_mr", "ibv_reg_mr_ex", "ibv_export_buf_dmabuf_fd"};

#endif // RDMADL_TEST_EMU_DECISIONS_HPP

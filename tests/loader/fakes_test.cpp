// SPDX-License-Identifier: MIT
// The loader against fake libraries at the dlopen boundary (tests/fakes).
// ctest runs one case per process, with RDMADL_IBVERBS_PATH pointing at the
// fake and RDMADL_RDMACM_PATH at a file that does not exist.
#include "emu_decisions.hpp"
#include "symbol_counts.h"
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <set>
#include <string>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "rdmadl/loader.h"
#include <doctest/doctest.h>

#undef ibv_get_device_list
#undef ibv_reg_mr

#include "refused_checks.hpp"

namespace {

std::string str(const char *s) {
  return s ? s : "(null)";
}

std::string override_realpath() {
  char buf[PATH_MAX];
  const char *p = std::getenv("RDMADL_IBVERBS_PATH");
  REQUIRE(p != nullptr);
  REQUIRE(realpath(p, buf) != nullptr);
  return buf;
}

// Every stub of a library that bound nothing fails with EOPNOTSUPP.
void check_nothing_bound() {
  CHECK(rdmadl_load() == EOPNOTSUPP);
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) == RDMADL_TEST_IBV_SYMBOLS);
  check_device_list_refused(7);
  CHECK(rdmadl_lib_state(RDMADL_LIB_RDMACM) == RDMADL_STATE_SKIPPED);
}

// The library was refused as incompatible, for a reason whose text holds each
// of the given parts, and nothing was bound.
void check_refused(std::initializer_list<const char *> why) {
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_INCOMPATIBLE);
  std::string err = str(rdmadl_lib_error(RDMADL_LIB_IBVERBS));
  CAPTURE(err);
  for (const char *part : why)
    CHECK(err.find(part) != std::string::npos);
  CHECK(rdmadl_symbol_status("ibv_open_device", nullptr) == 0);
  check_nothing_bound();
}

// Fallbacks for symbols an older library lacks (loader/hand*.c, EMU).

// The fake's registration record (tests/fakes/fake_ibverbs.c): which call ran.
enum { FAKE_MR_REG_MR = 1, FAKE_MR_IOVA2 = 2, FAKE_MR_DMABUF = 3, FAKE_MR_EX = 4 };

uint64_t iova_of(const ibv_mr *mr) {
  return reinterpret_cast<uintptr_t>(mr->context);
}

// The EMU entries of symbols.def.

int minor_of(const std::string &node) {
  return std::stoi(node.substr(node.find('.') + 1));
}

// Every libibverbs symbol above IBVERBS_1.<have>: emulated exactly when the
// table and the decision list say so, else missing; those up to <have> bound.
void check_decisions(int have) {
  size_t newer = 0;
  for (size_t i = 0; const char *name = rdmadl_symbol_name(i, nullptr); i++) {
    const char *node = nullptr;
    int status = rdmadl_symbol_status(name, &node);
    std::string n = node;
    if (n.rfind("IBVERBS_", 0) != 0)
      continue;
    CAPTURE(name);
    if (minor_of(n) <= have) {
      CHECK(status == RDMADL_SYMBOL_RESOLVED);
      continue;
    }
    if (minor_of(n) > 11)
      CHECK(emu_in_table(name) == (emulated_newer.count(name) == 1));
    CHECK(status == (emu_in_table(name) ? RDMADL_SYMBOL_EMULATED : RDMADL_SYMBOL_MISSING));
    newer++;
  }
  CHECK(newer > 0);
}

ibv_mr_init_attr addr_attr(void *addr, size_t len, uint64_t mask) {
  ibv_mr_init_attr a{};
  a.length = len;
  a.access = IBV_ACCESS_LOCAL_WRITE;
  a.comp_mask = mask;
  a.addr = addr;
  return a;
}

// ibv_reg_mr_ex of A with IBV_REG_MR_MASK_IOVA added and IOVA set: A is
// left that way, and the MR comes from ibv_reg_mr_iova2 at IOVA.
ibv_mr *check_reg_at_iova(ibv_pd *pd, ibv_mr_init_attr &a, uint64_t iova) {
  a.comp_mask |= IBV_REG_MR_MASK_IOVA;
  a.iova = iova;
  ibv_mr *mr = ibv_reg_mr_ex(pd, &a);
  REQUIRE(mr != nullptr);
  CHECK(mr->handle == FAKE_MR_IOVA2);
  CHECK(iova_of(mr) == iova);
  return mr;
}

// ibv_reg_mr_ex fails with ERR for ATTR, and the library was not called.
void check_refused_ex(ibv_pd *pd, ibv_mr_init_attr a, int err) {
  errno = 0;
  CHECK(ibv_reg_mr_ex(pd, &a) == nullptr);
  CHECK(errno == err);
}

} // namespace

TEST_CASE("fakes: a complete library binds every symbol") {
  CHECK(rdmadl_load() == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_LOADED);
  CHECK(str(rdmadl_lib_version_node(RDMADL_LIB_IBVERBS)) == "IBVERBS_1.18");
  CHECK(str(rdmadl_lib_path(RDMADL_LIB_IBVERBS)) == override_realpath());
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) == 0);
  // This program calls no rdma_* function: librdmacm waits for its first use.
  const std::string unused = "not loaded: no rdma_* function in this program";
  CHECK(rdmadl_lib_state(RDMADL_LIB_RDMACM) == RDMADL_STATE_NOT_LOADED);
  CHECK(str(rdmadl_lib_error(RDMADL_LIB_RDMACM)) == unused);
  CHECK(rdmadl_lib_path(RDMADL_LIB_RDMACM) == nullptr);
  int n = 7;
  ibv_device **list = ibv_get_device_list(&n);
  CHECK(list != nullptr);
  CHECK(n == 0);
  CHECK(rdmadl_stack_state() == RDMADL_STACK_NO_DEVICES);
  const std::string head =
      "libibverbs.so.1 (IBVERBS_1.18, " + override_realpath() + "): complete; ";
  std::string reason = str(rdmadl_reason());
  CHECK(reason.rfind(head, 0) == 0);
  CHECK(reason.find(unused) != std::string::npos);
  // Its first use tries the override, a file that does not exist; the
  // diagnostics then describe that.
  CHECK(rdmadl_lib_load(RDMADL_LIB_RDMACM) == EOPNOTSUPP);
  CHECK(rdmadl_lib_state(RDMADL_LIB_RDMACM) == RDMADL_STATE_NOT_FOUND);
  CHECK(str(rdmadl_lib_error(RDMADL_LIB_RDMACM)).find("No such file") != std::string::npos);
  reason = str(rdmadl_reason());
  CHECK(reason.rfind(head, 0) == 0);
  CHECK(reason.find(unused) == std::string::npos);
  CHECK(reason.find("not-found") != std::string::npos);
}

TEST_CASE("fakes: a library missing one symbol fails only that one") {
  CHECK(rdmadl_load() == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_PARTIAL);
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) == 1);
  CHECK(str(rdmadl_lib_missing_symbol(RDMADL_LIB_IBVERBS, 0)) == "ibv_query_ece");
  CHECK(rdmadl_symbol_status("ibv_query_ece", nullptr) == 0);
  CHECK(rdmadl_symbol_status("ibv_set_ece", nullptr) == 1);
  errno = 0;
  CHECK(ibv_query_ece(nullptr, nullptr) == EOPNOTSUPP);
  CHECK(errno == EOPNOTSUPP);
  int n = 7;
  CHECK(ibv_get_device_list(&n) != nullptr);
  // ibv_query_ece (IBVERBS_1.10) is below the file's highest node: a real gap.
  CHECK(str(rdmadl_reason()).find("): 1 symbol of its own release missing, 0 newer absent") !=
        std::string::npos);
}

TEST_CASE("fakes: an IBVERBS_1.0/1.1-only library binds exactly those nodes") {
  CHECK(rdmadl_load() == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_PARTIAL);
  CHECK(str(rdmadl_lib_version_node(RDMADL_LIB_IBVERBS)) == "IBVERBS_1.1");
  size_t old = 0, emulated = 0;
  for (size_t i = 0; const char *name = rdmadl_symbol_name(i, nullptr); i++) {
    const char *node = nullptr;
    int status = rdmadl_symbol_status(name, &node);
    std::string n = node;
    CAPTURE(name);
    if (n == "IBVERBS_1.0" || n == "IBVERBS_1.1") {
      CHECK(status == 1);
      old++;
    } else if (n.rfind("IBVERBS_", 0) == 0) {
      // The fallbacks need only IBVERBS_1.1 calls.
      CHECK(status == (emu_in_table(name) ? RDMADL_SYMBOL_EMULATED : RDMADL_SYMBOL_MISSING));
      emulated += emu_in_table(name);
    }
  }
  CHECK(emulated > 0);
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) == RDMADL_TEST_IBV_SYMBOLS - old);
  // An older release lacking newer symbols is complete for its release; the
  // reason counts them as rdmadl-info does: absent (EOPNOTSUPP) apart from
  // emulated (a fallback serves them), each symbol once.
  CHECK(str(rdmadl_reason())
            .find("(IBVERBS_1.1, " + override_realpath() + "): complete for its release, " +
                  std::to_string(RDMADL_TEST_IBV_SYMBOLS - old - emulated) +
                  " newer symbols absent, " + std::to_string(emulated) + " emulated") !=
        std::string::npos);
}

TEST_CASE("fakes: ibv_reg_mr_iova2 falls back to ibv_reg_mr when iova == addr") {
  REQUIRE(rdmadl_symbol_status("ibv_reg_mr_iova2", nullptr) == RDMADL_SYMBOL_EMULATED);
  char buf[64];
  auto *pd = reinterpret_cast<ibv_pd *>(buf);
  ibv_mr *mr = ibv_reg_mr_iova2(pd, buf, sizeof buf, reinterpret_cast<uintptr_t>(buf),
                                IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  CHECK(mr->addr == buf);
  CHECK(mr->length == sizeof buf);
  CHECK(mr->lkey == IBV_ACCESS_LOCAL_WRITE);
  errno = 0;
  CHECK(ibv_reg_mr_iova2(pd, buf, sizeof buf, 4096, IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == EOPNOTSUPP);
}

TEST_CASE("fakes: a garbage file is a failed load, not a crash") {
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_LOAD_FAILED);
  std::string err = str(rdmadl_lib_error(RDMADL_LIB_IBVERBS));
  CAPTURE(err);
  CHECK((err.find("invalid ELF header") != std::string::npos ||
         err.find("file too short") != std::string::npos));
  CHECK(str(rdmadl_reason()).find("load-failed") != std::string::npos);
  check_nothing_bound();
}

TEST_CASE("fakes: a library with the wrong soname is refused") {
  check_refused({"soname libnotverbs.so.7", "expected libibverbs.so.1"});
}

TEST_CASE("fakes: IBVERBS_1.0 compat entries are never bound") {
  check_refused({"exports none"});
}

TEST_CASE("fakes: a constructor calling a stub during dlopen neither recurses nor deadlocks") {
  // Linked with the shared drop-in library: the fake's call binds to
  // rdmadl's exported stub while rdmadl is still inside dlopen.
  CHECK(str(std::getenv("FAKE_CTOR_CALLEE")).find("librdmadl-verbs.so") != std::string::npos);
  CHECK(str(std::getenv("FAKE_CTOR_RESULT")) == "own-list");
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_LOADED);
}

TEST_CASE("fakes: a library whose symbols resolve to rdmadl itself binds none") {
  // Each dlvsym through the fake's handle returns rdmadl's own stub; none may
  // be bound (a stub calling itself would recurse forever).
  check_refused({"exports none"});
}

TEST_CASE("fakes: rdmadl's own library at the override path is refused") {
  check_refused({"rdmadl itself"});
}

TEST_CASE("fakes: an IBVERBS_1.11 library (like 33.2): every newer symbol emulated or missing") {
  CHECK(rdmadl_load() == 0);
  CHECK(str(rdmadl_lib_version_node(RDMADL_LIB_IBVERBS)) == "IBVERBS_1.11");
  check_decisions(11);
  // Emulated symbols still count as missing from the library.
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) > emulated_newer.size());
  // A missing one fails as its man page says, with EOPNOTSUPP.
  uint64_t speed = 7;
  errno = 0;
  CHECK(ibv_query_port_speed(nullptr, 1, &speed) == EOPNOTSUPP);
  CHECK(errno == EOPNOTSUPP);
  CHECK(speed == 7);
  errno = 0;
  CHECK(ibv_reg_dmabuf_mr(nullptr, 0, 4096, 0, 3, 0) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  errno = 0;
  CHECK(ibv_is_fork_initialized() == IBV_FORK_DISABLED);
  CHECK(errno == EOPNOTSUPP);
}

TEST_CASE("fakes: ibv_alloc_buf / ibv_reg_buf_mr / ibv_free_buf fall back to 65.0's default") {
  REQUIRE(rdmadl_symbol_status("ibv_alloc_buf", nullptr) == RDMADL_SYMBOL_EMULATED);
  REQUIRE(rdmadl_symbol_status("ibv_reg_buf_mr", nullptr) == RDMADL_SYMBOL_EMULATED);
  REQUIRE(rdmadl_symbol_status("ibv_free_buf", nullptr) == RDMADL_SYMBOL_EMULATED);
  char pds[2][16];
  auto *pd = reinterpret_cast<ibv_pd *>(pds[0]);
  auto *other_pd = reinterpret_cast<ibv_pd *>(pds[1]);
  const long page = sysconf(_SC_PAGESIZE);
  ibv_buf *buf = nullptr;
  auto *mem = static_cast<char *>(ibv_alloc_buf(pd, 3 * page, &buf));
  REQUIRE(mem != nullptr);
  REQUIRE(buf != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(mem) % page == 0);
  std::memset(mem, 0x5a, 3 * page); // all of it is ours (ASan checks)

  // A range inside the buffer: a plain registration at iova == addr.
  ibv_mr *mr = ibv_reg_buf_mr(pd, buf, mem + page, page, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  CHECK(mr->handle == FAKE_MR_IOVA2);
  CHECK(mr->pd == pd);
  CHECK(mr->addr == mem + page);
  CHECK(mr->length == size_t(page));
  CHECK(iova_of(mr) == reinterpret_cast<uintptr_t>(mem + page));
  CHECK(mr->lkey == IBV_ACCESS_LOCAL_WRITE);
  // The whole buffer, and the empty range at its end, are inside it.
  CHECK(ibv_reg_buf_mr(pd, buf, mem, 3 * page, 0) != nullptr);

  // What 65.0 refuses with EINVAL: another PD, a range outside the buffer.
  struct bad {
    ibv_pd *pd;
    char *addr;
    size_t len;
  } cases[] = {{other_pd, mem, size_t(page)},
               {pd, mem, size_t(3 * page + 1)},
               {pd, mem - 1, 2},
               {pd, mem + 3 * page, 1},
               {pd, mem + 4 * page, 0},
               {pd, mem + page, size_t(2 * page + 1)}};
  for (const bad &c : cases) {
    CAPTURE(c.addr - mem);
    CAPTURE(c.len);
    errno = 0;
    CHECK(ibv_reg_buf_mr(c.pd, buf, c.addr, c.len, 0) == nullptr);
    CHECK(errno == EINVAL);
  }
  // The same through ibv_reg_mr_ex: BUF needs ADDR and excludes FD/FD_OFFSET;
  // IOVA is allowed for ordinary memory.
  ibv_mr_init_attr a = addr_attr(mem, page, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_BUF);
  a.buf = buf;
  mr = check_reg_at_iova(pd, a, 0x10000);
  a.comp_mask = IBV_REG_MR_MASK_BUF;
  errno = 0;
  CHECK(ibv_reg_mr_ex(pd, &a) == nullptr);
  CHECK(errno == EINVAL);
  for (uint64_t extra : {IBV_REG_MR_MASK_FD, IBV_REG_MR_MASK_FD_OFFSET}) {
    a.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_BUF | extra;
    errno = 0;
    CHECK(ibv_reg_mr_ex(pd, &a) == nullptr);
    CHECK(errno == EINVAL);
  }
  // A fallback buffer has no dma-buf: -1 and ENODATA, as 65.0 answers.
  errno = 0;
  CHECK(ibv_export_buf_dmabuf_fd(buf) == -1);
  CHECK(errno == ENODATA);

  // A handle that is not a fallback one is refused, never dereferenced
  // further than its tag.
  uint64_t foreign[8] = {};
  auto *not_ours = reinterpret_cast<ibv_buf *>(foreign);
  errno = 0;
  CHECK(ibv_reg_buf_mr(pd, not_ours, mem, 1, 0) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;
  ibv_free_buf(not_ours);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_export_buf_dmabuf_fd(not_ours) == -1);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_alloc_buf(pd, 64, nullptr) == nullptr);
  CHECK(errno == EINVAL);

  ibv_free_buf(buf); // ASan/LSan: both the handle and the memory go
}

TEST_CASE("fakes: ibv_reg_mr_ex maps its comp_mask combinations onto older calls") {
  REQUIRE(rdmadl_symbol_status("ibv_reg_mr_ex", nullptr) == RDMADL_SYMBOL_EMULATED);
  char pdbuf[16], mem[256];
  auto *pd = reinterpret_cast<ibv_pd *>(pdbuf);
  ibv_mr_init_attr a = addr_attr(mem, sizeof mem, IBV_REG_MR_MASK_ADDR);
  ibv_mr *mr = ibv_reg_mr_ex(pd, &a);
  REQUIRE(mr != nullptr);
  CHECK(mr->handle == FAKE_MR_IOVA2);
  CHECK(mr->addr == mem);
  CHECK(mr->length == sizeof mem);
  CHECK(iova_of(mr) == reinterpret_cast<uintptr_t>(mem));
  CHECK(mr->lkey == IBV_ACCESS_LOCAL_WRITE);
  mr = check_reg_at_iova(pd, a, 0);
  // A dma-buf needs ibv_reg_dmabuf_mr (IBVERBS_1.12), which 1.11 lacks.
  ibv_mr_init_attr d = addr_attr(
      nullptr, 4096, IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET | IBV_REG_MR_MASK_IOVA);
  d.fd = 3;
  check_refused_ex(pd, d, EOPNOTSUPP);
  // 65.0's checks: EINVAL for ADDR with FD or FD_OFFSET, for neither;
  // EOPNOTSUPP for a DMA handle or a bit it does not know.
  check_refused_ex(pd, addr_attr(mem, 8, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_FD), EINVAL);
  check_refused_ex(pd, addr_attr(mem, 8, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_FD_OFFSET), EINVAL);
  check_refused_ex(pd, addr_attr(mem, 8, 0), EINVAL);
  check_refused_ex(pd, addr_attr(mem, 8, IBV_REG_MR_MASK_IOVA), EINVAL);
  check_refused_ex(pd, addr_attr(mem, 8, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH), EOPNOTSUPP);
  check_refused_ex(pd, addr_attr(mem, 8, IBV_REG_MR_MASK_ADDR | (1u << 6)), EOPNOTSUPP);
  errno = 0;
  CHECK(ibv_reg_mr_ex(pd, nullptr) == nullptr);
  CHECK(errno == EINVAL);
}

TEST_CASE("fakes: an IBVERBS_1.14 library (like 44.0): a dma-buf goes to ibv_reg_dmabuf_mr") {
  check_decisions(14);
  char pdbuf[16];
  auto *pd = reinterpret_cast<ibv_pd *>(pdbuf);
  ibv_mr_init_attr d = addr_attr(
      nullptr, 8192, IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET | IBV_REG_MR_MASK_IOVA);
  d.fd = 9;
  d.fd_offset = 4096;
  d.iova = 0x200000;
  ibv_mr *mr = ibv_reg_mr_ex(pd, &d);
  REQUIRE(mr != nullptr);
  CHECK(mr->handle == FAKE_MR_DMABUF);
  CHECK(mr->pd == pd);
  CHECK(reinterpret_cast<uintptr_t>(mr->addr) == 4096); // the offset
  CHECK(mr->length == 8192);
  CHECK(iova_of(mr) == 0x200000);
  CHECK(mr->rkey == 9); // the fd
  // 65.0 requires FD_OFFSET and IOVA with FD.
  d.comp_mask = IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET;
  check_refused_ex(pd, d, EINVAL);
  d.comp_mask = IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_IOVA;
  check_refused_ex(pd, d, EINVAL);
}

TEST_CASE("fakes: the library's ibv_reg_mr_ex never sees a fallback buffer") {
  // IBVERBS_1.16: ibv_reg_mr_ex is the library's, ibv_alloc_buf is not.
  check_decisions(16);
  REQUIRE(rdmadl_symbol_status("ibv_reg_mr_ex", nullptr) == RDMADL_SYMBOL_RESOLVED);
  char pds[2][16];
  auto *pd = reinterpret_cast<ibv_pd *>(pds[0]);
  ibv_buf *buf = nullptr;
  auto *mem = static_cast<char *>(ibv_alloc_buf(pd, 4096, &buf));
  REQUIRE(mem != nullptr);
  // A plain request goes to the library as it is.
  ibv_mr_init_attr a = addr_attr(mem, 64, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_IOVA);
  a.iova = 77;
  ibv_mr *mr = ibv_reg_mr_ex(pd, &a);
  REQUIRE(mr != nullptr);
  CHECK(mr->handle == FAKE_MR_EX);
  CHECK(mr->rkey == (IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_IOVA));
  CHECK(iova_of(mr) == 77);
  // A fallback buffer reaches it as the plain range it is, without BUF.
  mr = ibv_reg_buf_mr(pd, buf, mem + 64, 128, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  CHECK(mr->handle == FAKE_MR_EX);
  CHECK(mr->rkey == IBV_REG_MR_MASK_ADDR);
  CHECK(mr->addr == mem + 64);
  CHECK(mr->length == 128);
  a = addr_attr(mem, 4096, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_BUF);
  a.buf = buf;
  mr = ibv_reg_mr_ex(pd, &a);
  REQUIRE(mr != nullptr);
  CHECK(mr->handle == FAKE_MR_EX);
  CHECK(mr->rkey == IBV_REG_MR_MASK_ADDR);
  // Refused before the library is asked.
  mr->handle = 0;
  check_refused_ex(reinterpret_cast<ibv_pd *>(pds[1]), a, EINVAL);
  CHECK(mr->handle == 0);
  ibv_free_buf(buf);
}

TEST_CASE("fakes: a library with every symbol gets every call, no fallback runs") {
  for (const char *name : {"ibv_alloc_buf", "ibv_reg_buf_mr", "ibv_free_buf", "ibv_reg_mr_ex",
                           "ibv_export_buf_dmabuf_fd", "ibv_reg_mr_iova2"})
    CHECK(rdmadl_symbol_status(name, nullptr) == RDMADL_SYMBOL_RESOLVED);
  char pdbuf[16], mem[64];
  auto *pd = reinterpret_cast<ibv_pd *>(pdbuf);
  // The fake's own ibv_alloc_buf / ibv_reg_buf_mr return NULL without
  // touching errno; a fallback would have succeeded, a stub said EOPNOTSUPP.
  ibv_buf *buf = nullptr;
  errno = 0;
  CHECK(ibv_alloc_buf(pd, 4096, &buf) == nullptr);
  CHECK(errno == 0);
  CHECK(ibv_reg_buf_mr(pd, buf, mem, sizeof mem, 0) == nullptr);
  CHECK(errno == 0);
  ibv_mr_init_attr a = addr_attr(mem, sizeof mem, IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH);
  ibv_mr *mr = ibv_reg_mr_ex(pd, &a);
  REQUIRE(mr != nullptr);
  CHECK(mr->handle == FAKE_MR_EX);
  CHECK(mr->rkey == (IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH));
}

// SPDX-License-Identifier: MIT
// cxx_device's exhaustion check on Soft-RoCE. rxe's own limits (max_qp
// 65536, max_mr in the millions) are out of reach under TCG, so the limits
// are set from outside, as an operator sets them:
//   - the kernel's rdma cgroup: this process moves into a cgroup whose
//     rdma.max allows the device objects it holds plus a few (hca_object);
//     queue pairs, CQs and memory regions are made until it says no (EAGAIN);
//   - RLIMIT_MEMLOCK of 64 KiB with CAP_IPC_LOCK dropped (root ignores the
//     limit otherwise): 16 KiB regions are registered until it says no.
// (The check changes its process for good: run it as a process of its own.)
// Each failure is a clean error whose last_error_detail() names the call,
// the resource and the limit; the objects made before move bytes after it;
// at the end the cgroup's rdma.current (the process's device objects), its
// fds and its mappings equal the start. Prints "exhaustion.NAME: ..." lines.
#include "cxx_device.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <linux/capability.h>
#include <sstream>
#include <string>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

#include "process_counts.hpp"

namespace cxx_device {

namespace {

bool mentions(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

bool write_file(const std::string &path, const std::string &text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  if (!f)
    std::fprintf(stderr, "  write %s <- '%s': %s\n", path.c_str(), text.c_str(),
                 std::strerror(errno));
  return static_cast<bool>(f);
}

std::string read_file(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A cgroup of its own for this process, with the rdma controller.
class rdma_cgroup {
public:
  bool enter() {
    if (::access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
      root_ = "/sys/fs/cgroup";
    } else {
      root_ = "/tmp/rdmadl-cgroup";
      ::mkdir(root_.c_str(), 0755);
      if (::mount("cgroup2", root_.c_str(), "cgroup2", 0, nullptr) != 0) {
        std::fprintf(stderr, "  mount cgroup2: %s\n", std::strerror(errno));
        return false;
      }
      mounted_ = true;
    }
    if (!mentions(read_file(root_ + "/cgroup.controllers"), "rdma")) {
      std::fprintf(stderr, "  the kernel has no rdma cgroup controller\n");
      return false;
    }
    dir_ = root_ + "/rdmadl-exhaustion";
    if (::mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST)
      return false;
    return write_file(root_ + "/cgroup.subtree_control", "+rdma") &&
           write_file(dir_ + "/cgroup.procs", std::to_string(getpid()));
  }
  // Objects (hca_object) of the device this cgroup holds.
  long objects() const { return field(read_file(dir_ + "/rdma.current"), "hca_object="); }
  long handles() const { return field(read_file(dir_ + "/rdma.current"), "hca_handle="); }
  // At most n objects of the device ("max": no limit).
  bool limit(const std::string &n) const {
    return write_file(dir_ + "/rdma.max", dev_name + " hca_handle=max hca_object=" + n);
  }
  bool limit(long n) const { return limit(std::to_string(n)); }
  ~rdma_cgroup() {
    if (dir_.empty())
      return;
    write_file(root_ + "/cgroup.procs", std::to_string(getpid()));
    ::rmdir(dir_.c_str());
    if (mounted_)
      ::umount(root_.c_str());
  }

private:
  // The number after KEY on the device's line (0 without one).
  long field(const std::string &text, const char *key) const {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(dev_name + " ", 0) == 0) {
        auto at = line.find(key);
        return at == std::string::npos ? -1 : std::atol(line.c_str() + at + std::strlen(key));
      }
    return 0;
  }
  std::string root_, dir_;
  bool mounted_ = false;
};

// The objects every part makes first: a context, a PD, one CQ.
struct base {
  context ctx;
  protection_domain pd;
  completion_queue cq;
};
result<base> make_base() {
  auto ctx = context::open(dev_name);
  if (!ctx)
    return ctx.error();
  auto pd = protection_domain::create(*ctx);
  if (!pd)
    return pd.error();
  auto cq = completion_queue::create(*ctx);
  if (!cq)
    return cq.error();
  return base{std::move(*ctx), std::move(*pd), std::move(*cq)};
}

result<queue_pair> make_qp(base &b, completion_queue &cq) {
  qp_options o;
  o.gid.ipv4 = test_ip;
  return queue_pair::create(b.ctx, b.pd, cq, cq, o);
}

// Connects A and B (fresh) to each other and sends SRC to DST (both CQs are cq):
// true when both completions are fine and every byte arrived.
bool moves_bytes(queue_pair &a, queue_pair &b, completion_queue &cq, const memory_region &src,
                 const memory_region &dst, unsigned seed) {
  auto ea = a.local_endpoint(), eb = b.local_endpoint();
  EXPECT(ea && eb);
  EXPECT_OK(a.connect(*eb));
  EXPECT_OK(b.connect(*ea));
  auto s = src.data(), d = dst.data();
  fill(s, seed);
  std::memset(d.data(), 0, d.size());
  EXPECT_OK(b.post_recv(*dst.all(), 1));
  EXPECT_OK(a.post_send(*src.all(), 2));
  std::array<completion, 2> c;
  std::size_t got = 0;
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (got < 2 && std::chrono::steady_clock::now() < end) {
    auto n = cq.poll_wait(std::span(c).subspan(got), 1000ms);
    EXPECT_OK(n);
    got += *n;
  }
  EXPECT(got == 2 && c[0].ok() && c[1].ok());
  return same(s, d);
}

bool expect_refusal(const std::error_code &ec, const char *call, const char *what) {
  const std::string detail(last_error_detail());
  std::printf("  refused: %s\n", detail.c_str());
  EXPECT(ec == std::errc::resource_unavailable_try_again);
  EXPECT(mentions(detail, call));
  EXPECT(mentions(detail, what));
  EXPECT(mentions(detail, "rdma.max hca_object"));
  return true;
}

bool qps(rdma_cgroup &cg) {
  TRY(b, make_base());
  std::vector<std::byte> sb(4096), db(4096);
  TRY(src, b->pd.register_memory(sb));
  TRY(dst, b->pd.register_memory(db));
  const long held = cg.objects();
  EXPECT(cg.limit(held + 6));
  std::vector<queue_pair> made;
  result<queue_pair> q = errc::empty_object;
  while (made.size() < 100 && (q = make_qp(*b, b->cq)))
    made.push_back(std::move(*q));
  std::printf("exhaustion.qp: %zu queue pairs under hca_object %ld (%ld held before)\n",
              made.size(), held + 6, held);
  EXPECT(made.size() == 6);
  EXPECT(expect_refusal(q.error(), "ibv_create_qp", "queue pair"));
  EXPECT(moves_bytes(made[0], made[5], b->cq, *src, *dst, 11));
  made.pop_back(); // one freed: one more fits
  EXPECT_OK(make_qp(*b, b->cq));
  return cg.limit("max");
}

bool cqs(rdma_cgroup &cg) {
  TRY(b, make_base());
  std::vector<std::byte> sb(4096), db(4096);
  TRY(src, b->pd.register_memory(sb));
  TRY(dst, b->pd.register_memory(db));
  const long held = cg.objects();
  EXPECT(cg.limit(held + 5));
  std::vector<completion_queue> made;
  result<completion_queue> c = errc::empty_object;
  while (made.size() < 100 && (c = completion_queue::create(b->ctx)))
    made.push_back(std::move(*c));
  std::printf("exhaustion.cq: %zu CQs under hca_object %ld (%ld held before)\n", made.size(),
              held + 5, held);
  EXPECT(made.size() == 5);
  EXPECT(expect_refusal(c.error(), "ibv_create_cq", "completion queue"));
  made.resize(3); // two freed: room for two queue pairs on an earlier CQ
  TRY(qa, make_qp(*b, made[0]));
  TRY(qb, make_qp(*b, made[0]));
  EXPECT(moves_bytes(*qa, *qb, made[0], *src, *dst, 12));
  return cg.limit("max");
}

bool mrs(rdma_cgroup &cg) {
  TRY(b, make_base());
  TRY(qa, make_qp(*b, b->cq));
  TRY(qb, make_qp(*b, b->cq));
  const long held = cg.objects();
  EXPECT(cg.limit(held + 4));
  std::vector<std::vector<std::byte>> bufs;
  std::vector<memory_region> made;
  result<memory_region> m = errc::empty_object;
  while (made.size() < 100) {
    bufs.emplace_back(4096);
    if (!(m = b->pd.register_memory(bufs.back())))
      break;
    made.push_back(std::move(*m));
  }
  std::printf("exhaustion.mr: %zu memory regions under hca_object %ld (%ld held before)\n",
              made.size(), held + 4, held);
  EXPECT(made.size() == 4);
  EXPECT(expect_refusal(m.error(), "ibv_reg_mr", "memory region"));
  EXPECT(moves_bytes(*qa, *qb, b->cq, made[0], made[3], 13));
  return cg.limit("max");
}

// Takes CAP_IPC_LOCK away from this process for good: the kernel then holds
// its pinned memory to RLIMIT_MEMLOCK.
bool drop_ipc_lock() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  EXPECT(syscall(SYS_capget, &h, d) == 0);
  const unsigned bit = 1u << CAP_IPC_LOCK;
  d[0].effective &= ~bit;
  d[0].permitted &= ~bit;
  d[0].inheritable &= ~bit;
  EXPECT(syscall(SYS_capset, &h, d) == 0);
  EXPECT(syscall(SYS_capget, &h, d) == 0 && !(d[0].effective & bit));
  return true;
}

bool memlock() {
  constexpr std::size_t piece = 16 * 1024;
  EXPECT(drop_ipc_lock());
  rlimit saved{};
  EXPECT(getrlimit(RLIMIT_MEMLOCK, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = 64 * 1024;
  EXPECT(setrlimit(RLIMIT_MEMLOCK, &low) == 0);
  TRY(b, make_base());
  TRY(qa, make_qp(*b, b->cq));
  TRY(qb, make_qp(*b, b->cq));
  std::vector<std::byte *> bufs;
  std::vector<memory_region> made;
  result<memory_region> m = errc::empty_object;
  while (made.size() < 100) {
    bufs.push_back(static_cast<std::byte *>(std::aligned_alloc(4096, piece)));
    EXPECT(bufs.back());
    if (!(m = b->pd.register_memory(std::span(bufs.back(), piece))))
      break;
    made.push_back(std::move(*m));
  }
  const std::string detail(last_error_detail());
  std::printf(
      "exhaustion.memlock: %zu regions of 16 KiB under RLIMIT_MEMLOCK %llu\n  refused: %s\n",
      made.size(), static_cast<unsigned long long>(low.rlim_cur), detail.c_str());
  bool ok = made.size() == low.rlim_cur / piece && m.error() == errc::memlock_limit &&
            mentions(detail, "ibv_reg_mr of 16384 bytes") &&
            mentions(detail, "RLIMIT_MEMLOCK 65536") &&
            moves_bytes(*qa, *qb, b->cq, made[0], made[made.size() - 1], 14);
  if (ok) { // a freed one makes room
    made.pop_back();
    ok = static_cast<bool>(b->pd.register_memory(std::span(bufs.back(), piece)));
  }
  made.clear();
  for (auto *p : bufs)
    std::free(p);
  EXPECT(setrlimit(RLIMIT_MEMLOCK, &saved) == 0);
  EXPECT(ok);
  return true;
}

} // namespace

bool check_exhaustion() {
  rdma_cgroup cg;
  EXPECT(cg.enter());
  { // warm-up: the provider's libraries stay mapped after the first open
    TRY(b, make_base());
  }
  const auto before = process_counts::now();
  const long objects0 = cg.objects(), handles0 = cg.handles();
  EXPECT(qps(cg));
  EXPECT(cqs(cg));
  EXPECT(mrs(cg));
  EXPECT(memlock());
  const auto after = process_counts::now();
  const long objects1 = cg.objects(), handles1 = cg.handles();
  std::printf("exhaustion: %s, device objects %ld -> %ld, contexts %ld -> %ld\n",
              process_counts::describe(before, after).c_str(), objects0, objects1, handles0,
              handles1);
  EXPECT(objects1 == objects0 && handles1 == handles0);
  EXPECT(after.fds == before.fds && after.maps == before.maps);
  return true;
}

} // namespace cxx_device

// SPDX-License-Identifier: MIT
// Hostile and careless environments: each case runs a drop-in program
// (probe.c, preinit.c, forkload.c, ctorthread.c, tests/dropin/plugin_host.c)
// in a chosen environment, working directory and stdin, with a time limit,
// and checks what it printed. ctest passes the programs and the fakes
// directory in HOSTILE_* variables; each case runs once per link mode.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "symbol_counts.h"
#include <time.h>
#include <unistd.h>

#include <doctest/doctest.h>

extern char **environ;

namespace {

struct result {
  bool hung = false;
  int status = -1; // exit status, or 128 + signal
  std::string out, err;
  std::map<std::string, std::string> kv; // "key=value" lines of out
  std::string operator[](const std::string &k) const {
    auto it = kv.find(k);
    return it == kv.end() ? "(absent)" : it->second;
  }
};

std::string need(const char *var) {
  const char *v = std::getenv(var);
  REQUIRE_MESSAGE(v != nullptr, var << " is not set (run through ctest)");
  return v;
}

std::string fakes() {
  return need("HOSTILE_FAKES");
}

// A fresh directory under the build tree, removed by nobody (ctest's tree).
std::string scratch(const std::string &name) {
  std::string dir = need("HOSTILE_SCRATCH") + "/" + name;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  return dir;
}

std::string read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_file(const std::string &path, const std::string &data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
  REQUIRE(f.good());
}

// Runs ARGV with the current environment minus every RDMADL_* variable, plus
// ENV; in CWD when not empty; STDIN_DATA on a pipe as its stdin; killed after
// LIMIT seconds (then hung is true).
result run(const std::vector<std::string> &argv, const std::vector<std::string> &env,
           const std::string &cwd = "", const std::string &stdin_data = "", int limit = 60) {
  std::vector<std::string> envs;
  for (char **e = environ; *e; e++)
    if (std::strncmp(*e, "RDMADL_", 7) != 0)
      envs.emplace_back(*e);
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char *> cargv, cenv;
  for (auto &a : argv)
    cargv.push_back(const_cast<char *>(a.c_str()));
  cargv.push_back(nullptr);
  for (auto &e : envs)
    cenv.push_back(const_cast<char *>(e.c_str()));
  cenv.push_back(nullptr);
  int in[2], out[2], err[2];
  REQUIRE(pipe2(in, O_CLOEXEC) == 0);
  REQUIRE(pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(pipe2(err, O_CLOEXEC) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0)
      _exit(126);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  signal(SIGPIPE, SIG_IGN);
  if (!stdin_data.empty())
    (void)!write(in[1], stdin_data.data(), stdin_data.size());
  close(in[1]);
  result r;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long left = (start.tv_sec + limit - now.tv_sec) * 1000;
    if (left <= 0 || poll(fds, 2, static_cast<int>(left)) == 0) {
      r.hung = true;
      kill(pid, SIGKILL);
      break;
    }
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || !fds[i].revents)
        continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i ? r.err : r.out).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        open_fds--;
      }
    }
  }
  for (auto &f : fds)
    if (f.fd >= 0)
      close(f.fd);
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  size_t pos = 0;
  while (pos < r.out.size()) {
    size_t nl = r.out.find('\n', pos);
    std::string line = r.out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    size_t eq = line.find('=');
    if (eq != std::string::npos)
      r.kv.emplace(line.substr(0, eq), line.substr(eq + 1));
    pos = nl == std::string::npos ? r.out.size() : nl + 1;
  }
  return r;
}

result probe(const std::vector<std::string> &env, const std::string &cwd = "",
             const std::string &stdin_data = "") {
  result r = run({need("HOSTILE_PROBE")}, env, cwd, stdin_data);
  INFO("stdout: " << r.out);
  INFO("stderr: " << r.err);
  CHECK_FALSE(r.hung);
  return r;
}

bool has(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

std::string real(const std::string &p) {
  char buf[PATH_MAX];
  REQUIRE(realpath(p.c_str(), buf) != nullptr);
  return buf;
}

const std::string no_cm = "RDMADL_RDMACM_PATH=/nonexistent/librdmacm.so.1";

// The override to the fake libibverbs whose calls a test can hook.
std::string hooked_ibverbs() {
  return "RDMADL_IBVERBS_PATH=" + fakes() + "/fake_hooked/libibverbs.so.1";
}

// R ran to its end (no hang) with status 0, its stdout holding each of OUT
// and its stderr each of ERR.
void check_clean_run(const result &r, std::initializer_list<const char *> out,
                     std::initializer_list<const char *> err = {}) {
  INFO(r.out << r.err);
  CHECK_FALSE(r.hung);
  for (const char *part : out)
    CHECK_MESSAGE(has(r.out, part), "stdout lacks: " << part);
  for (const char *part : err)
    CHECK_MESSAGE(has(r.err, part), "stderr lacks: " << part);
  CHECK(r.status == 0);
}

// A copy of fake_full with some bytes of its ELF header replaced.
std::string patched_fake(const std::string &dir, size_t offset, const std::string &bytes) {
  std::string elf = read_file(fakes() + "/fake_full/libibverbs.so.1");
  REQUIRE(elf.size() > 64);
  elf.replace(offset, bytes.size(), bytes);
  std::string path = dir + "/libibverbs.so.1";
  write_file(path, elf);
  return path;
}

} // namespace

TEST_CASE("hostile: an override naming a FIFO is refused, not opened (no hang)") {
  std::string dir = scratch("fifo");
  std::string fifo = dir + "/libibverbs.so.1";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  result r = probe({"RDMADL_IBVERBS_PATH=" + fifo, no_cm});
  CHECK(r.status == 0);
  CHECK(r["state"] == "load-failed");
  CHECK(has(r["error"], "a FIFO, not a regular file"));
  CHECK(has(r["reason"], fifo));
}

TEST_CASE("hostile: an override naming /dev/stdin leaves stdin to the program") {
  result r = probe({"RDMADL_IBVERBS_PATH=/dev/stdin", no_cm, "PROBE_READ_STDIN=1"}, "",
                   "the program's input");
  CHECK(r.status == 0);
  CHECK(r["state"] == "load-failed");
  CHECK(has(r["error"], "a FIFO, not a regular file"));
  CHECK(r["stdin"] == "the program's input");
}

TEST_CASE("hostile: an override naming a directory or a character device is refused") {
  result d = probe({"RDMADL_IBVERBS_PATH=/", no_cm});
  CHECK(d["state"] == "load-failed");
  CHECK(has(d["error"], "a directory, not a regular file"));
  result c = probe({"RDMADL_IBVERBS_PATH=/dev/zero", no_cm});
  CHECK(c["state"] == "load-failed");
  CHECK(has(c["error"], "a character device, not a regular file"));
}

TEST_CASE("hostile: a relative override is a file in the current directory, never searched") {
  std::string full = fakes() + "/fake_full";
  // Bare name: the file in the current directory, although LD_LIBRARY_PATH
  // would find another library of that name.
  result r = probe(
      {"RDMADL_IBVERBS_PATH=libibverbs.so.1", no_cm, "LD_LIBRARY_PATH=" + fakes() + "/fake_v11"},
      full);
  CHECK(r["state"] == "loaded");
  CHECK(r["path"] == real(full + "/libibverbs.so.1"));
  // A relative path with a directory part, the same rule.
  result p = probe({"RDMADL_IBVERBS_PATH=fake_full/libibverbs.so.1", no_cm}, fakes());
  CHECK(p["state"] == "loaded");
  CHECK(p["path"] == real(full + "/libibverbs.so.1"));
  // A bare name that is not in the current directory is not found, even
  // though the library path has one.
  std::string empty = scratch("relative-empty");
  result n =
      probe({"RDMADL_IBVERBS_PATH=libibverbs.so.1", no_cm, "LD_LIBRARY_PATH=" + full}, empty);
  CHECK(n["state"] == "not-found");
  CHECK(has(n["error"], "RDMADL_IBVERBS_PATH=libibverbs.so.1: No such file"));
}

TEST_CASE("hostile: a wrong-architecture file in the current directory says what it is") {
  std::string dir = scratch("wrong-arch");
  // e_machine (offset 18, little-endian) = 183, AArch64.
  patched_fake(dir, 18, std::string("\xb7\x00", 2));
  result r = probe({"RDMADL_IBVERBS_PATH=libibverbs.so.1", no_cm}, dir);
  CHECK(r["state"] == "load-failed");
  CHECK(has(r["error"], "is an ELF file for AArch64"));
  CHECK(has(r["error"], "e_machine 183"));
  CHECK(has(r["error"], "this process is"));
  std::string dir32 = scratch("wrong-class");
  patched_fake(dir32, 4, std::string("\x01", 1)); // EI_CLASS = ELFCLASS32
  result c = probe({"RDMADL_IBVERBS_PATH=" + dir32 + "/libibverbs.so.1", no_cm});
  CHECK(c["state"] == "load-failed");
  CHECK(has(c["error"], "32-bit"));
}

TEST_CASE("hostile: a truncated library at the override path is refused, not mapped (no SIGBUS)") {
  std::string elf = read_file(fakes() + "/fake_full/libibverbs.so.1");
  REQUIRE(elf.size() > 8192);
  std::string dir = scratch("truncated");
  // 4 KB: the headers are there, the segments are not; one byte short: the
  // last loadable segment lacks its end. (Section headers, past every
  // segment, are never mapped: a file cut only there loads.)
  ElfW(Ehdr) eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  size_t load_end = 0;
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    ElfW(Phdr) ph;
    std::memcpy(&ph, elf.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD)
      load_end = std::max<size_t>(load_end, ph.p_offset + ph.p_filesz);
  }
  REQUIRE(load_end > 4096);
  for (size_t cut : {size_t{4096}, load_end - 1}) {
    CAPTURE(cut);
    std::string path = dir + "/libibverbs.so." + std::to_string(cut);
    write_file(path, elf.substr(0, cut));
    result r = probe({"RDMADL_IBVERBS_PATH=" + path, no_cm});
    CHECK(r.status == 0);
    CHECK(r["state"] == "load-failed");
    CHECK(has(r["error"], "RDMADL_IBVERBS_PATH=" + path + ": " + path + " is truncated"));
    CHECK(has(r["error"], "the file has " + std::to_string(cut)));
  }
  std::string whole = dir + "/libibverbs.so.1";
  write_file(whole, elf.substr(0, load_end));
  CHECK(probe({"RDMADL_IBVERBS_PATH=" + whole, no_cm})["state"] == "loaded");
}

TEST_CASE("hostile: a library whose dependency is missing is load-failed, not not-found") {
  std::string dep = fakes() + "/fake_missing_dep";
  // Found by soname search.
  result s = probe({"LD_LIBRARY_PATH=" + dep, no_cm});
  CHECK(s["state"] == "load-failed");
  CHECK(has(s["error"], "libibverbs.so.1 was found but cannot be loaded"));
  CHECK(has(s["error"], "libfakegone.so.1"));
  // Named by the override.
  result o = probe({"RDMADL_IBVERBS_PATH=" + dep + "/libibverbs.so.1", no_cm});
  CHECK(o["state"] == "load-failed");
  CHECK(has(o["error"], "a library it needs cannot be loaded"));
  CHECK(has(o["error"], "libfakegone.so.1"));
}

TEST_CASE("hostile: lazy binding: an unresolvable function fails at its call, -z now at load") {
  // rdmadl dlopens with RTLD_LAZY, as a direct link binds. A library linked
  // -z now (rdma-core's are) is still bound completely: refused at load.
  result now = probe({"RDMADL_IBVERBS_PATH=" + fakes() + "/fake_undef_now/libibverbs.so.1", no_cm});
  CHECK(now["state"] == "load-failed");
  CHECK(has(now["error"], "undefined symbol: fake_nowhere"));
  // A lazily bound one loads; the call that needs the missing function ends
  // the process, exactly as it would in a program linked with that library.
  result lazy = probe({"RDMADL_IBVERBS_PATH=" + fakes() + "/fake_undef/libibverbs.so.1", no_cm,
                       "PROBE_CALL_FORK_INIT=1"});
  CHECK(lazy["state"] == "loaded");
  CHECK(lazy["fork_init"] == "(absent)");
  CHECK(lazy.status == 127);
  CHECK(has(lazy.err, "symbol lookup error"));
  CHECK(has(lazy.err, "fake_nowhere"));
}

TEST_CASE("hostile: RDMADL_DISABLE takes the usual spellings of true and false") {
  const std::string full = "RDMADL_IBVERBS_PATH=" + fakes() + "/fake_full/libibverbs.so.1";
  for (const char *yes : {"1", "true", "TRUE", "yes", "Yes", "on", "ON", "2"}) {
    CAPTURE(yes);
    CHECK(probe({full, no_cm, std::string("RDMADL_DISABLE=") + yes})["state"] == "disabled");
  }
  for (const char *no : {"0", "00", "false", "False", "no", "NO", "off", "Off", ""}) {
    CAPTURE(no);
    CHECK(probe({full, no_cm, std::string("RDMADL_DISABLE=") + no})["state"] == "loaded");
  }
  // Anything else is ignored, with a warning under RDMADL_DEBUG.
  result r = probe({full, no_cm, "RDMADL_DISABLE=please", "RDMADL_DEBUG=yes"});
  CHECK(r["state"] == "loaded");
  CHECK(has(r.err, "RDMADL_DISABLE=please is not a boolean"));
  result quiet = probe({full, no_cm, "RDMADL_DISABLE=please"});
  CHECK(quiet["state"] == "loaded");
  CHECK(quiet.err.empty());
}

TEST_CASE("hostile: a long override path keeps the whole reason, cause included") {
  std::string path = "/nonexistent";
  for (int i = 0; i < 30; i++)
    path += "/" + std::string(100, static_cast<char>('a' + i % 26));
  path += "/libibverbs.so.1";
  result r = probe({"RDMADL_IBVERBS_PATH=" + path, no_cm});
  CHECK(r["state"] == "not-found");
  std::string reason = r["reason"];
  CHECK(reason.size() > 3000);
  CHECK(has(reason, path));
  CHECK(reason.substr(reason.size() - 25) == "No such file or directory");
}

TEST_CASE("hostile: first use from .preinit_array honours the environment") {
  const std::string preinit = need("HOSTILE_PREINIT");
  result d = run({preinit}, {"RDMADL_DISABLE=1"});
  INFO(d.out << d.err);
  CHECK(d.status == 0);
  CHECK(d["early_environ"] == "0"); // the case this is about
  CHECK(d["early_list"] == "no");
  CHECK(d["early_errno"] == std::to_string(EOPNOTSUPP));
  CHECK(d["state"] == "disabled");
  std::string full = fakes() + "/fake_full/libibverbs.so.1";
  result o = run({preinit}, {"RDMADL_IBVERBS_PATH=" + full, no_cm});
  INFO(o.out << o.err);
  CHECK(o["early_list"] == "yes");
  CHECK(o["early_n"] == "0");
  CHECK(o["state"] == "loaded");
  CHECK(o["path"] == real(full));
}

// The "rdmadl: " lines of a run's stderr.
static std::vector<std::string> log_lines(const std::string &err) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < err.size();) {
    size_t nl = err.find('\n', pos);
    std::string line = err.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (line.rfind("rdmadl: ", 0) == 0)
      out.push_back(line);
    pos = nl == std::string::npos ? err.size() : nl + 1;
  }
  return out;
}

TEST_CASE("hostile: a log handler set in .preinit_array sees the start-up lines, escaped") {
  const std::string sink = need("HOSTILE_LOGSINK");
  const std::string full = fakes() + "/fake_full/libibverbs.so.1";
  // The summary: a line per library, then the verdict; a path with a newline
  // cannot start a line of its own anywhere.
  const std::string forged = "/nonexistent/a\nrdmadl: forged";
  result r = run({sink, "2"}, {"RDMADL_IBVERBS_PATH=" + forged, no_cm});
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r["early_set"] == "0");
  CHECK(r["lines"] == "3");
  CHECK(r["wrong_ctx"] == "0");
  CHECK(r["raw_newlines"] == "0");
  CHECK(has(r.out, "log=2 /nonexistent/a\\nrdmadl: forged not-found: "));
  CHECK(has(r.out, "log=2 verdict: no usable libibverbs: /nonexistent/a\\nrdmadl: forged"));
  CHECK(has(r["verdict"], "/nonexistent/a\\nrdmadl: forged not-found"));
  CHECK(has(r["reason"], "/nonexistent/a\\nrdmadl: forged not-found"));
  CHECK_FALSE(has(r.out, "\nrdmadl: forged"));
  CHECK(r.err.empty()); // nothing went to stderr
  // The verdict line is the verdict.
  CHECK(has(r.out, "log=2 verdict: " + r["verdict"] + "\n"));

  // Every step at the debug level: a line per symbol bound.
  result d = run({sink, "3"}, {"RDMADL_IBVERBS_PATH=" + full, no_cm});
  INFO(d.out << d.err);
  CHECK(std::stoi(d["lines"]) > RDMADL_TEST_IBV_SYMBOLS);
  CHECK(has(d.out, "log=3 ibv_open_device@IBVERBS_1.1: 0x"));
  CHECK(has(d.out, "log=2 libibverbs.so.1 (IBVERBS_1.18, " + real(full) + "): complete\n"));
  // Errors only: a normal start-up says nothing.
  result e = run({sink, "0"}, {"RDMADL_IBVERBS_PATH=" + full, no_cm});
  INFO(e.out << e.err);
  CHECK(e["lines"] == "0");
  CHECK(e.err.empty());

  // Restored to the default: the handler is not called again, and stderr
  // gets what RDMADL_DEBUG asks for (here: every step).
  const std::string missing = "RDMADL_IBVERBS_PATH=/nonexistent/libibverbs.so.1";
  result q = run({sink, "3", "default"}, {missing, no_cm});
  INFO(q.out << q.err);
  CHECK(q["restore"] == "0");
  CHECK(q["after_restore"] == "0");
  CHECK(q.err.empty());
  result v = run({sink, "3", "default"}, {missing, no_cm, "RDMADL_DEBUG=2"});
  INFO(v.out << v.err);
  CHECK(v["after_restore"] == "0");
  CHECK(log_lines(v.err) ==
        std::vector<std::string>{"rdmadl: ibv_fork_init@IBVERBS_1.1: not in the loaded library "
                                 "(a fallback or EOPNOTSUPP)"});
}

TEST_CASE("hostile: RDMADL_DEBUG=1 logs a line per library and the verdict, 2 every symbol") {
  const std::string full = "RDMADL_IBVERBS_PATH=" + fakes() + "/fake_full/libibverbs.so.1";
  for (const char *on : {"1", "true", "yes", "info"}) {
    CAPTURE(on);
    result r = probe({full, no_cm, std::string("RDMADL_DEBUG=") + on});
    auto lines = log_lines(r.err);
    REQUIRE(lines.size() == 3);
    CHECK(lines[0].rfind("rdmadl: libibverbs.so.1 (IBVERBS_1.18, ", 0) == 0);
    // The probe calls no rdma_* function: librdmacm is left alone.
    CHECK(lines[1] == "rdmadl: /nonexistent/librdmacm.so.1 not loaded: no rdma_* function in "
                      "this program");
    CHECK(lines[2] == "rdmadl: verdict: the kernel supports RDMA but no device exists (for "
                      "Soft-RoCE: rdma link add rxe0 type rxe netdev IFACE)");
  }
  for (const char *all : {"2", "3", "debug", "symbols", "SYMBOLS"}) {
    CAPTURE(all);
    result r = probe({full, no_cm, std::string("RDMADL_DEBUG=") + all});
    CHECK(log_lines(r.err).size() > RDMADL_TEST_IBV_SYMBOLS);
  }
  for (const char *off : {"0", "false", "off", ""}) {
    CAPTURE(off);
    CHECK(probe({full, no_cm, std::string("RDMADL_DEBUG=") + off}).err.empty());
  }
  // Not understood: the summary, and a warning saying so.
  result r = probe({full, no_cm, "RDMADL_DEBUG=loud"});
  CHECK(has(r.err, "rdmadl: RDMADL_DEBUG=loud is not understood"));
  CHECK(log_lines(r.err).size() == 4);
}

TEST_CASE("hostile: fork while another thread is inside the loader loads once per process") {
  // A provider override too: the child's load again must free the cut-off
  // load's copy of it (forkload checks for leaks under ASan).
  check_clean_run(run({need("HOSTILE_FORKLOAD")},
                      {hooked_ibverbs(), no_cm, "RDMADL_MLX5_PATH=/nonexistent/libmlx5.so.1"}),
                  {"child: state loaded, 95 symbols, 0 missing, list yes", "forkload: consistent"});
}

TEST_CASE("hostile: a constructor joining a thread that calls verbs does not deadlock") {
  check_clean_run(run({need("HOSTILE_CTORTHREAD")}, {hooked_ibverbs(), no_cm}),
                  {"ctorthread: consistent"},
                  {"ibv_get_device_list: another thread has been loading"});
}

TEST_CASE("hostile: dlclosing a plugin that links the drop-in keeps rdmadl's strings") {
  check_clean_run(run({need("HOSTILE_PLUGIN_HOST"), need("HOSTILE_PLUGIN")},
                      {"RDMADL_IBVERBS_PATH=/nonexistent/libibverbs.so.1", no_cm}),
                  {"drop-in still mapped: yes"});
}

TEST_CASE("hostile: dlclosing a plugin that embeds the static drop-in keeps rdmadl's strings") {
  const std::string plugin = need("HOSTILE_PLUGIN_STATIC");
  // Not found, and disabled: each gives its own set of strings.
  for (const char *env : {"RDMADL_IBVERBS_PATH=/nonexistent/libibverbs.so.1", "RDMADL_DISABLE=1"}) {
    INFO("environment: " << std::string(env));
    check_clean_run(run({need("HOSTILE_PLUGIN_HOST"), plugin, plugin}, {env, no_cm}),
                    {"drop-in still mapped: yes"});
  }
}

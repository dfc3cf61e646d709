// SPDX-License-Identifier: MIT
// What rdmadl-bench-cxx and rdmadl-bench-channel share: a server and a client
// process on one device, forked from one program, that trade endpoints and
// step markers over two pipes and die on a peer that hangs; and the end of a
// run, where the client prints "lat_us <average> <median>" of the half round
// trips or "bw_gbps <Gb/s>". Each program sets bench::name first; a failure
// prints one "<name>: ..." line on stderr and exits non-zero.
#pragma once
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace bench {

inline const char *name = "rdmadl-bench";

[[noreturn]] inline void fail(const char *what) {
  std::fprintf(stderr, "%s: %s\n", name, what);
  std::fflush(stderr);
  _exit(2);
}

inline void on_alarm(int) {
  static const char msg[] = ": timed out (alarm), peer hung?\n";
  (void)!write(2, name, std::strlen(name));
  (void)!write(2, msg, sizeof msg - 1);
  _exit(3);
}

// One end of the pair: the server is the forked child.
struct peer {
  bool server;
  pid_t pid;    // the child's, in the client
  int wfd, rfd; // to and from the other process
};

// Forks the server; both processes kill themselves after timeout_s (alarm),
// so a hung peer cannot hang the run.
inline peer fork_pair(unsigned timeout_s) {
  std::signal(SIGALRM, on_alarm);
  int p2c[2], c2p[2];
  if (pipe(p2c) || pipe(c2p))
    fail("pipe() failed");
  pid_t pid = fork();
  if (pid < 0)
    fail("fork() failed");
  alarm(timeout_s);
  const bool server = pid == 0;
  close(server ? c2p[0] : p2c[0]);
  close(server ? p2c[1] : c2p[1]);
  return {server, pid, server ? c2p[1] : p2c[1], server ? p2c[0] : c2p[0]};
}

// Sends out to the other process and reads its in.
template <class T> void xfer(const peer &p, const T &out, T &in) {
  if (write(p.wfd, &out, sizeof out) != sizeof out || read(p.rfd, &in, sizeof in) != sizeof in)
    fail("pipe to the peer process closed (peer failed)");
}

// The end of a run of iters iterations that took secs: both processes meet,
// the server exits, the client checks it exited cleanly and prints the
// figure (rtt_us: the client's round trips, for lat).
inline int finish(const peer &p, bool lat, std::vector<double> &rtt_us, double secs, long iters,
                  std::size_t size) {
  char sync = 0;
  xfer(p, sync, sync);
  if (p.server)
    _exit(0);
  int st = 0;
  if (waitpid(p.pid, &st, 0) != p.pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail("server process failed");
  if (lat) {
    auto mid = rtt_us.begin() + static_cast<long>(rtt_us.size() / 2);
    std::nth_element(rtt_us.begin(), mid, rtt_us.end());
    std::printf("lat_us %.3f %.3f\n", secs * 1e6 / double(iters) / 2, *mid / 2);
  } else
    std::printf("bw_gbps %.3f\n", double(iters) * double(size) * 8 / secs / 1e9);
  return 0;
}

} // namespace bench

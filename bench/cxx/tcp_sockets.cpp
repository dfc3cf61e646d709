// SPDX-License-Identifier: MIT
// rdmadl-bench-tcp-host's view of the kernel's TCP state (--phase-stats):
// apart from tcp_host.cpp because <linux/tcp.h>, whose struct tcp_info has
// the fields that tell a congestion window from a socket buffer as the
// limit, cannot be included beside <netinet/tcp.h>.
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "tcp_sockets.hpp"

// One line per connected TCP socket of this process (the plain loop's and a
// channel's alike), from TCP_INFO and the socket's buffer sizes:
//   tcp-sock: LABEL fd=N ports=LOCAL>PEER rtt_us=.. rttvar_us=.. cwnd=..
//             ssthresh=.. pacing_mb_s=.. delivery_mb_s=.. snd_wnd=..
//             rcv_space=.. sndbuf=.. rcvbuf=.. retrans=.. busy_ms=..
//             rwnd_limited_ms=.. sndbuf_limited_ms=..
// retrans and the last three add up over the connection's life (the
// kernel's counters).
void print_tcp_sockets(const char *label) {
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return;
  while (dirent *e = readdir(d)) {
    char *end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    struct stat st {};
    if (*end || fd == dirfd(d) || fstat(static_cast<int>(fd), &st) || !S_ISSOCK(st.st_mode))
      continue;
    tcp_info ti{};
    socklen_t len = sizeof ti;
    sockaddr_in me{}, peer{};
    socklen_t ml = sizeof me, pl = sizeof peer;
    int snd = 0, rcv = 0;
    socklen_t il = sizeof snd;
    if (getsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_INFO, &ti, &len) ||
        ti.tcpi_state != 1 /* established */ ||
        getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr *>(&me), &ml) ||
        getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr *>(&peer), &pl))
      continue;
    getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_SNDBUF, &snd, &il);
    il = sizeof rcv;
    getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_RCVBUF, &rcv, &il);
    std::printf(
        "tcp-sock: %s fd=%ld ports=%u>%u rtt_us=%u rttvar_us=%u cwnd=%u ssthresh=%u "
        "pacing_mb_s=%.1f delivery_mb_s=%.1f snd_wnd=%u rcv_space=%u sndbuf=%d rcvbuf=%d "
        "retrans=%u busy_ms=%.1f rwnd_limited_ms=%.1f sndbuf_limited_ms=%.1f\n",
        label, fd, ntohs(me.sin_port), ntohs(peer.sin_port), ti.tcpi_rtt, ti.tcpi_rttvar,
        ti.tcpi_snd_cwnd, ti.tcpi_snd_ssthresh, static_cast<double>(ti.tcpi_pacing_rate) / 1e6,
        static_cast<double>(ti.tcpi_delivery_rate) / 1e6, ti.tcpi_snd_wnd, ti.tcpi_rcv_space, snd,
        rcv, ti.tcpi_total_retrans, static_cast<double>(ti.tcpi_busy_time) / 1e3,
        static_cast<double>(ti.tcpi_rwnd_limited) / 1e3,
        static_cast<double>(ti.tcpi_sndbuf_limited) / 1e3);
  }
  closedir(d);
  std::fflush(stdout);
}

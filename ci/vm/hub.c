/* SPDX-License-Identifier: MIT */
/*
 * hub - the Ethernet segment of a ci/vm cluster run: an unmanaged hub over
 * unix datagram sockets, for QEMU's "-netdev dgram,local.type=unix,...,
 * remote.type=unix,remote.path=HUB". Nothing touches a host interface.
 *
 *   hub HUB-SOCKET NODE-SOCKET...
 *
 * Binds HUB-SOCKET and sends every frame it receives to every NODE-SOCKET but
 * the sender's (a node whose QEMU is not up yet, or has died, is skipped).
 * The hub never blocks on one node: a node's socket holds only
 * net.unix.max_dgram_qlen frames (10 by default), so a frame a slow node
 * cannot take yet waits in that node's own queue (QUEUE frames, in order;
 * beyond that it is lost, as on a switch) while the other nodes' traffic
 * flows on. Runs until SIGTERM/SIGINT; prints frame counts per node on
 * stderr then.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum { MAX_NODES = 16, FRAME = 65536, QUEUE = 512 };

struct frame {
  size_t len;
  char data[];
};

/* The frames waiting for one node, oldest first. */
struct queue {
  struct frame *f[QUEUE];
  unsigned head, count;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static int set_path(struct sockaddr_un *a, const char *path) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  if (strlen(path) >= sizeof a->sun_path) {
    fprintf(stderr, "hub: socket path too long: %s\n", path);
    return -1;
  }
  strcpy(a->sun_path, path);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc - 2 > MAX_NODES) {
    fprintf(stderr, "usage: hub HUB-SOCKET NODE-SOCKET... (1 to %d nodes)\n", MAX_NODES);
    return 2;
  }
  int n = argc - 2;
  struct sockaddr_un hub, node[MAX_NODES];
  unsigned long in[MAX_NODES] = {0}, out[MAX_NODES] = {0}, slow[MAX_NODES] = {0};
  if (set_path(&hub, argv[1]))
    return 2;
  for (int i = 0; i < n; i++)
    if (set_path(&node[i], argv[i + 2]))
      return 2;
  int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  unlink(argv[1]);
  if (fd < 0 || bind(fd, (struct sockaddr *)&hub, sizeof hub) != 0) {
    fprintf(stderr, "hub: %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: poll returns */
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  static struct queue q[MAX_NODES];
  static char buf[FRAME];
  unsigned long waited[MAX_NODES] = {0};
  unsigned queued = 0; /* frames in all queues */
  while (!stop) {
    /* With frames waiting, look again every 2 ms whether their node takes them. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, queued ? 2 : -1) < 0) {
      if (errno == EINTR)
        continue;
      fprintf(stderr, "hub: poll: %s\n", strerror(errno));
      return 1;
    }
    for (int i = 0; i < n; i++) /* the oldest frames first */
      while (q[i].count) {
        struct frame *f = q[i].f[q[i].head];
        ssize_t r =
            sendto(fd, f->data, f->len, MSG_DONTWAIT, (struct sockaddr *)&node[i], sizeof node[i]);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
          break;
        if (r == (ssize_t)f->len)
          out[i]++;
        free(f);
        q[i].head = (q[i].head + 1) % QUEUE;
        q[i].count--;
        queued--;
      }
    if (!(p.revents & POLLIN))
      continue;
    struct sockaddr_un from;
    socklen_t flen = sizeof from;
    ssize_t len = recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
    if (len < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      fprintf(stderr, "hub: recvfrom: %s\n", strerror(errno));
      return 1;
    }
    int src = -1;
    for (int i = 0; i < n && src < 0; i++)
      if (flen > offsetof(struct sockaddr_un, sun_path) &&
          strcmp(from.sun_path, node[i].sun_path) == 0)
        src = i;
    if (src < 0)
      continue; /* not one of ours */
    in[src]++;
    for (int i = 0; i < n; i++) {
      if (i == src)
        continue;
      if (q[i].count == 0) {
        if (sendto(fd, buf, (size_t)len, MSG_DONTWAIT, (struct sockaddr *)&node[i],
                   sizeof node[i]) == len) {
          out[i]++;
          continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          continue; /* not up, or gone */
      }
      struct frame *f = q[i].count < QUEUE ? malloc(sizeof *f + (size_t)len) : NULL;
      if (!f) {
        slow[i]++;
        continue;
      }
      f->len = (size_t)len;
      memcpy(f->data, buf, (size_t)len);
      q[i].f[(q[i].head + q[i].count) % QUEUE] = f;
      q[i].count++;
      queued++;
      waited[i]++;
    }
  }
  for (int i = 0; i < n; i++)
    fprintf(stderr,
            "hub: node %d: %lu frames sent, %lu delivered (%lu of them after waiting in the "
            "hub), %lu lost to a full queue\n",
            i, in[i], out[i], waited[i], slow[i]);
  unlink(argv[1]);
  return 0;
}

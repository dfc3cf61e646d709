/* SPDX-License-Identifier: MIT */
/*
 * hub - the Ethernet segment of a ci/vm cluster run: an unmanaged hub over
 * unix datagram sockets, for QEMU's "-netdev dgram,local.type=unix,...,
 * remote.type=unix,remote.path=HUB". Nothing touches a host interface.
 *
 *   hub [--seed N] [--impair NAME:SPEC]... HUB-SOCKET NODE-SOCKET...
 *
 * Binds HUB-SOCKET and sends every frame it receives to every NODE-SOCKET but
 * the sender's (a node whose QEMU is not up yet, or has died, is skipped).
 * The hub never blocks on one node: a node's socket holds only
 * net.unix.max_dgram_qlen frames (10 by default), so a frame a slow node
 * cannot take yet waits in that node's own queue (QUEUE frames, in order;
 * beyond that it is lost, as on a switch) while the other nodes' traffic
 * flows on. Runs until SIGTERM/SIGINT; prints frame counts per node on
 * stderr then.
 *
 * Impairment (README.md, "Impaired frames"): each --impair names a profile,
 * SPEC being "drop=P,dup=P,reorder=P,delay=MS,rtu=B" (P a probability, MS
 * milliseconds, "ms" optional; B 0 or 1; any part may be left out). Profile K (1-based, in option
 * order) becomes active when the hub forwards a TCP SYN to port IMPAIR_PORT+K, IMPAIR_PORT itself
 * turns impairment off (the start state): a guest switches with "nc PEER PORT" before a test, and
 * since every frame passes the hub in one order, all frames of the test that follows see the new
 * profile. Only RoCE v2 frames (UDP to port 4791) are impaired: TCP, ARP and the guests' side
 * channels pass untouched, so the rendezvous of the tests stays reliable and what is measured is
 * rxe's own retransmission. Per frame and receiving node: lost with probability drop, else sent
 * twice with probability dup, held back REORDER_MS (so the frames after it overtake it) with
 * probability reorder, and every frame delayed by delay ms. With rtu=1, every frame carrying an
 * rdma_cm RTU (a CM MAD, attribute 0x0014, to QP 1) is lost as well: the
 * active side of each connection then believes it is connected while the
 * passive side never hears so from the CM. The draws come from a
 * splitmix64 stream seeded by --seed; the counts per profile are printed
 * at the end (dropped includes the RTUs).
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
#include <time.h>
#include <unistd.h>

enum { MAX_NODES = 16, FRAME = 65536, QUEUE = 512 };
enum { MAX_PROFILES = 8, IMPAIR_PORT = 47900, ROCE_PORT = 4791, REORDER_MS = 3 };

struct profile {
  char name[32];
  double drop, dup, reorder;
  unsigned delay_ms;
  int rtu;
  unsigned long seen, dropped, duplicated, reordered, switches;
};

/* A frame the impairment holds back: sent to node dst at due (ns). */
struct pending {
  struct pending *next;
  unsigned long long due;
  int dst;
  size_t len;
  char data[];
};

static unsigned long long rng;

/* splitmix64: a uniform draw in [0, 1). */
static double draw(void) {
  unsigned long long z = (rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-53;
}

static unsigned long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (unsigned long long)t.tv_sec * 1000000000ULL + (unsigned long long)t.tv_nsec;
}

/* The UDP or TCP header of an untagged IPv4/IPv6 frame with protocol proto. */
static const unsigned char *l4(const unsigned char *b, size_t len, unsigned char proto) {
  if (len < 14 + 40 + 20)
    return NULL;
  if (b[12] == 0x08 && b[13] == 0x00) {
    size_t ihl = (size_t)(b[14] & 15) * 4;
    if (b[23] != proto || ihl < 20 || (((b[20] & 0x1f) << 8) | b[21]) != 0 || 14 + ihl + 20 > len)
      return NULL;
    return b + 14 + ihl;
  }
  if (b[12] == 0x86 && b[13] == 0xdd && b[20] == proto)
    return b + 14 + 40;
  return NULL;
}

static unsigned port_at(const unsigned char *p) {
  return (unsigned)(p[0] << 8 | p[1]);
}

/* Whether the RoCE v2 packet at UDP header udp (end: the frame's end) is a
 * CM RTU: BTH (12 bytes) to QP 1 with a UD send, DETH (8), then a MAD of
 * management class 0x07 (CM) with attribute ID 0x0014 (RTU). */
static int is_rtu(const unsigned char *udp, const unsigned char *end) {
  const unsigned char *bth = udp + 8, *mad = bth + 12 + 8;
  if (mad + 18 > end)
    return 0;
  return bth[0] == 0x64 && bth[5] == 0 && bth[6] == 0 && bth[7] == 1 && mad[1] == 0x07 &&
         mad[16] == 0x00 && mad[17] == 0x14;
}

static int parse_profile(struct profile *p, const char *arg) {
  const char *colon = strchr(arg, ':');
  if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof p->name)
    return -1;
  memcpy(p->name, arg, (size_t)(colon - arg));
  for (const char *s = colon + 1; *s;) {
    char key[16];
    int used = 0;
    double v;
    if (sscanf(s, "%15[a-z]=%lf%n", key, &v, &used) != 2 || v < 0)
      return -1;
    if (strcmp(key, "drop") == 0 && v <= 1)
      p->drop = v;
    else if (strcmp(key, "dup") == 0 && v <= 1)
      p->dup = v;
    else if (strcmp(key, "reorder") == 0 && v <= 1)
      p->reorder = v;
    else if (strcmp(key, "delay") == 0 && v <= 1000)
      p->delay_ms = (unsigned)v;
    else if (strcmp(key, "rtu") == 0 && (v == 0 || v == 1))
      p->rtu = (int)v;
    else
      return -1;
    s += used;
    if (strcmp(key, "delay") == 0 && strncmp(s, "ms", 2) == 0)
      s += 2;
    if (*s == ',')
      s++;
    else if (*s)
      return -1;
  }
  return 0;
}

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

static int fd, n;
static struct sockaddr_un node[MAX_NODES];
static struct queue q[MAX_NODES];
static unsigned long out[MAX_NODES], slow[MAX_NODES], waited[MAX_NODES];
static unsigned queued; /* frames in all queues */

/* Frame data to node i: at once, or after the frames waiting for it. */
static void deliver(int i, const char *data, size_t len) {
  if (q[i].count == 0) {
    if (sendto(fd, data, len, MSG_DONTWAIT, (struct sockaddr *)&node[i], sizeof node[i]) ==
        (ssize_t)len) {
      out[i]++;
      return;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return; /* not up, or gone */
  }
  struct frame *f = q[i].count < QUEUE ? malloc(sizeof *f + len) : NULL;
  if (!f) {
    slow[i]++;
    return;
  }
  f->len = len;
  memcpy(f->data, data, len);
  q[i].f[(q[i].head + q[i].count) % QUEUE] = f;
  q[i].count++;
  queued++;
  waited[i]++;
}

static struct pending *held; /* by due time, oldest first */

static void hold(int i, const char *data, size_t len, unsigned long long due) {
  struct pending *h = malloc(sizeof *h + len), **at = &held;
  if (!h) {
    slow[i]++;
    return;
  }
  h->due = due;
  h->dst = i;
  h->len = len;
  memcpy(h->data, data, len);
  while (*at && (*at)->due <= due)
    at = &(*at)->next;
  h->next = *at;
  *at = h;
}

int main(int argc, char **argv) {
  static struct profile prof[MAX_PROFILES + 1]; /* [0]: no impairment */
  int nprof = 0, cur = 0;
  unsigned long long seed = 1;
  strcpy(prof[0].name, "none");
  int a = 1;
  for (; a + 1 < argc && strncmp(argv[a], "--", 2) == 0; a += 2) {
    if (strcmp(argv[a], "--seed") == 0) {
      char *end;
      seed = strtoull(argv[a + 1], &end, 10);
      if (*end || !*argv[a + 1])
        break;
    } else if (strcmp(argv[a], "--impair") != 0 || nprof == MAX_PROFILES ||
               parse_profile(&prof[nprof + 1], argv[a + 1]) != 0) {
      break;
    } else {
      nprof++;
    }
  }
  if (argc - a < 2 || argc - a - 1 > MAX_NODES || (a < argc && strncmp(argv[a], "--", 2) == 0)) {
    fprintf(stderr,
            "usage: hub [--seed N] [--impair NAME:drop=P,dup=P,reorder=P,delay=MS]... "
            "HUB-SOCKET NODE-SOCKET... (1 to %d nodes, up to %d profiles)\n",
            MAX_NODES, MAX_PROFILES);
    return 2;
  }
  rng = seed;
  n = argc - a - 1;
  struct sockaddr_un hub;
  unsigned long in[MAX_NODES] = {0};
  if (set_path(&hub, argv[a]))
    return 2;
  for (int i = 0; i < n; i++)
    if (set_path(&node[i], argv[a + 1 + i]))
      return 2;
  fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  unlink(argv[a]);
  if (fd < 0 || bind(fd, (struct sockaddr *)&hub, sizeof hub) != 0) {
    fprintf(stderr, "hub: %s: %s\n", argv[a], strerror(errno));
    return 1;
  }
  for (int k = 1; k <= nprof; k++)
    fprintf(stderr,
            "hub: impairment profile %d %s: drop=%g dup=%g reorder=%g delay=%ums seed=%llu "
            "(a TCP SYN to port %d selects it)\n",
            k, prof[k].name, prof[k].drop, prof[k].dup, prof[k].reorder, prof[k].delay_ms, seed,
            IMPAIR_PORT + k);
  struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: poll returns */
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  static char buf[FRAME];
  while (!stop) {
    /* With frames waiting, look again every 2 ms whether their node takes
       them; with frames held back, when the first of them is due. */
    int wait_ms = queued ? 2 : -1;
    if (held) {
      unsigned long long t = now_ns();
      int due = held->due <= t ? 0 : (int)((held->due - t + 999999) / 1000000);
      if (wait_ms < 0 || due < wait_ms)
        wait_ms = due;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, wait_ms) < 0) {
      if (errno == EINTR)
        continue;
      fprintf(stderr, "hub: poll: %s\n", strerror(errno));
      return 1;
    }
    for (unsigned long long t = now_ns(); held && held->due <= t;) {
      struct pending *h = held;
      held = h->next;
      deliver(h->dst, h->data, h->len);
      free(h);
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
    const unsigned char *u = (const unsigned char *)buf;
    const unsigned char *tcp = nprof ? l4(u, (size_t)len, 6) : NULL;
    if (tcp && (tcp[13] & 0x12) == 0x02 && port_at(tcp + 2) >= IMPAIR_PORT &&
        port_at(tcp + 2) <= IMPAIR_PORT + (unsigned)nprof) {
      int k = (int)(port_at(tcp + 2) - IMPAIR_PORT);
      if (k != cur) {
        fprintf(stderr, "hub: node %d selects impairment profile %s\n", src, prof[k].name);
        cur = k;
        prof[k].switches++;
      }
    }
    struct profile *pr = &prof[cur];
    const unsigned char *udp = cur ? l4(u, (size_t)len, 17) : NULL;
    int impair = udp && port_at(udp + 2) == ROCE_PORT;
    if (impair)
      pr->seen++;
    for (int i = 0; i < n; i++) {
      if (i == src)
        continue;
      if (!impair) {
        deliver(i, buf, (size_t)len);
        continue;
      }
      if (draw() < pr->drop || (pr->rtu && is_rtu(udp, u + len))) {
        pr->dropped++;
        continue;
      }
      int copies = 1;
      if (draw() < pr->dup) {
        pr->duplicated++;
        copies = 2;
      }
      unsigned ms = pr->delay_ms;
      if (draw() < pr->reorder) {
        pr->reordered++;
        ms += REORDER_MS;
      }
      for (int c = 0; c < copies; c++) {
        if (ms == 0)
          deliver(i, buf, (size_t)len);
        else
          hold(i, buf, (size_t)len, now_ns() + ms * 1000000ULL);
      }
    }
  }
  for (int i = 0; i < n; i++)
    fprintf(stderr,
            "hub: node %d: %lu frames sent, %lu delivered (%lu of them after waiting in the "
            "hub), %lu lost to a full queue\n",
            i, in[i], out[i], waited[i], slow[i]);
  for (int k = 1; k <= nprof; k++)
    fprintf(stderr,
            "hub: impair %s (drop=%g dup=%g reorder=%g delay=%ums rtu=%d seed=%llu): selected %lu "
            "times, RoCE frames seen %lu, dropped %lu, duplicated %lu, reordered %lu\n",
            prof[k].name, prof[k].drop, prof[k].dup, prof[k].reorder, prof[k].delay_ms, prof[k].rtu,
            seed, prof[k].switches, prof[k].seen, prof[k].dropped, prof[k].duplicated,
            prof[k].reordered);
  unlink(argv[a]);
  return 0;
}

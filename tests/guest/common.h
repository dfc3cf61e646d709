/* SPDX-License-Identifier: MIT */
/*
 * common.h - helpers shared by the Soft-RoCE guest programs: device and GID
 * lookup, RC/UD QP bring-up, completion polling and result lines.
 *
 * Every check prints one line "RDMADL-CHECK <name> PASS|FAIL|UNSUPPORTED" on
 * stdout; t_exit() returns non-zero when any check failed. The programs are
 * ordinary verbs / rdma_cm code linked against rdmadl's drop-in library.
 *
 * Environment (set by the guest): RDMADL_TEST_DEVICE (default: the first
 * device), RDMADL_TEST_GID_INDEX (default: the first RoCE v2 IPv4 GID),
 * RDMADL_VM_BREAK (a check name, or 1 for rc.send_recv: that check's expected
 * bytes get one byte flipped, to prove the tier fails).
 *
 * "--absent" on the command line: no RDMA stack is installed. The program then
 * only checks that rdmadl fails cleanly (EOPNOTSUPP, "not found" diagnostics).
 *
 * Across two nodes (ci/vm/cluster.sh), programs that support it take
 * "--listen" (the passive side: target of one-sided operations, receiver,
 * rdma_cm server) or "--connect IP" (the active side, IP being the listener's
 * node address), and "--port N" (TCP port of the side channel, default
 * T_PORT). Each side prints the checks it can verify itself, under the same
 * names as in one process. Completions are then awaited through a completion
 * channel (poll(2) on its fd), not by busy polling: a 1-vCPU guest's kernel
 * needs the CPU to move the packets.
 */
#ifndef RDMADL_GUEST_COMMON_H
#define RDMADL_GUEST_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

struct t_dev {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_device_attr attr;
  struct ibv_port_attr port_attr;
  uint8_t port;
  int gid_index;
  union ibv_gid gid;
};

enum t_role { T_LOCAL, T_LISTEN, T_CONNECT };
enum { T_PORT = 18600 };

/* Parses the common options; PROG names the program in result lines. Exits
 * with status 2 and a message on a bad option. */
void t_init(int argc, char **argv, const char *prog);
/* True when run with --absent. */
bool t_absent(void);
/* The role given on the command line (T_LOCAL without --listen/--connect). */
enum t_role t_role(void);
/* The peer address of --connect (NULL otherwise), and the --port value. */
const char *t_peer_ip(void);
int t_port(void);
/* Opens the side channel to the peer: --listen accepts one TCP connection on
 * --port, --connect connects to it, retrying until TIMEOUT_MS passed (the
 * peer may boot later). Returns 0, or -1 after printing a FAIL line
 * "<prog>.peer". Reads and writes on it time out after 60 s. */
int t_peer_open(int timeout_ms);
void t_peer_close(void);
/* Sends LEN bytes of MINE and receives LEN bytes into THEIRS. Returns 0, or
 * -1 (peer gone, timeout) after a message on stderr. */
int t_peer_xchg(const void *mine, void *theirs, size_t len);
/* A barrier with the peer: both sides must reach step STEP. */
bool t_peer_sync(uint32_t step);
/* A completion queue of DEPTH on CTX; with a completion channel of its own
 * in the two-node roles (see t_poll). t_destroy_cq frees both. */
struct ibv_cq *t_create_cq(struct ibv_context *ctx, int depth);
void t_destroy_cq(struct ibv_cq *cq);
/* FN(P) when P is not NULL: the teardown of what a setup may not have made. */
#define T_FREE(fn, p) ((p) ? (void)fn(p) : (void)0)
/* The attributes of a QP of TYPE on SCQ and RCQ, DEPTH work requests each
 * way, one SGE each. */
struct ibv_qp_init_attr t_qp_attr(struct ibv_cq *scq, struct ibv_cq *rcq, enum ibv_qp_type type,
                                  uint32_t depth);
/* Prints one result line; DETAIL (printf format) goes to stderr on failure. */
bool t_check(const char *name, bool ok, const char *detail, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints "<name> UNSUPPORTED" and "RDMADL-WHY <name> <layer>", LAYER being
 * "library" (rdmadl: the loaded libibverbs lacks the symbol) or "device" (the
 * library has it, the provider/device said EOPNOTSUPP); WHY goes to stderr. */
void t_unsupported(const char *name, const char *layer, const char *why);
/* Exit status: 0 when no check failed (and at least one ran), else 1. */
int t_exit(void);

/* Opens the test device, its first active port, PD and RoCE v2 GID. Returns 0,
 * or -1 after printing a FAIL line "<prog>.open". With --absent it instead
 * checks rdmadl's clean failure, prints "<prog>.absent", and returns 1. */
int t_open(struct t_dev *d);
void t_close(struct t_dev *d);

/* Moves an RC or UD QP from RESET to RTS, connected (RC) to REMOTE_QPN on the
 * same port and GID (loopback through the device). Returns 0 or an errno. */
int t_rc_connect(struct t_dev *d, struct ibv_qp *qp, uint32_t remote_qpn, int access);
/* The same, to REMOTE_QPN behind the RoCE v2 GID DGID (another node). */
int t_rc_connect_gid(struct t_dev *d, struct ibv_qp *qp, uint32_t remote_qpn,
                     const union ibv_gid *dgid, int access);
int t_ud_ready(struct t_dev *d, struct ibv_qp *qp, uint32_t qkey);
/* Address-handle attributes for a GRH-routed packet to our own GID. */
void t_ah_attr(struct t_dev *d, struct ibv_ah_attr *ah);
/* Posts one signaled work request on QP: OP over LEN bytes at ADDR (LKEY);
 * RADDR and RKEY address the peer's memory for the RDMA opcodes, IMM (host
 * order) is the immediate data of the _WITH_IMM ones. Returns
 * ibv_post_send's result (0, or an errno value). */
int t_post1(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, const void *addr,
            uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm);

/* Polls CQ until N completions arrived or TIMEOUT_MS passed, BATCH at a time;
 * when CQ has a completion channel and the program runs in a two-node role,
 * sleeps on the channel between polls. Returns the number polled, or -1 on a
 * poll error. */
int t_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n, int batch, int timeout_ms);
/* True when the first N completions all have status SUCCESS (prints others). */
bool t_wc_ok(const struct ibv_wc *wc, int n);

/* Deterministic byte pattern for SEED. */
void t_fill(void *buf, size_t len, unsigned seed);
/* Byte-for-byte comparison for check NAME (honours RDMADL_VM_BREAK). */
bool t_same(const char *name, const void *got, const void *want, size_t len);

#endif

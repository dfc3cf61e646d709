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

/* Parses the common options; PROG names the program in result lines. */
void t_init(int argc, char **argv, const char *prog);
/* True when run with --absent. */
bool t_absent(void);
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
int t_ud_ready(struct t_dev *d, struct ibv_qp *qp, uint32_t qkey);
/* Address-handle attributes for a GRH-routed packet to our own GID. */
void t_ah_attr(struct t_dev *d, struct ibv_ah_attr *ah);

/* Polls CQ until N completions arrived or TIMEOUT_MS passed, BATCH at a time.
 * Returns the number polled, or -1 on a poll error. */
int t_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n, int batch, int timeout_ms);
/* True when the first N completions all have status SUCCESS (prints others). */
bool t_wc_ok(const struct ibv_wc *wc, int n);

/* Deterministic byte pattern for SEED. */
void t_fill(void *buf, size_t len, unsigned seed);
/* Byte-for-byte comparison for check NAME (honours RDMADL_VM_BREAK). */
bool t_same(const char *name, const void *got, const void *want, size_t len);

#endif

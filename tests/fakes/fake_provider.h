/* SPDX-License-Identifier: MIT */
/*
 * The scripting and inspection API of the fake provider (fake_provider.c), a
 * fake libibverbs.so.1 with one working fake device ("fake0"). Tests load it
 * through rdmadl's override path (RDMADL_IBVERBS_PATH) and reach these
 * functions with fakeprov_open() below (dlopen RTLD_NOLOAD + dlsym), so they
 * never link the fake themselves.
 *
 * Every function here is exported at version node FAKEPROV_1.0 and is safe to
 * call from any thread (one mutex guards the whole fake). Plain C, usable from
 * C++; no rdma-core header needed: opcodes, statuses and states are the
 * numeric values of the verbs.h enums.
 *
 * Objects the fake hands out are not freed: a destroyed object stays in a
 * registry, marked dead, so any later use of it is counted as a violation
 * instead of being undefined behaviour (until fakeprov_reap()).
 */
#ifndef RDMADL_TESTS_FAKE_PROVIDER_H
#define RDMADL_TESTS_FAKE_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Operations that fakeprov_fail_next() can make fail, X(NAME) each:
 * FAKEPROV_OP_NAME in enum fakeprov_op, "NAME" in FAKEPROV_FAIL. */
#define FAKEPROV_OPS(X)                                                                            \
  X(GET_DEVICE_LIST)                                                                               \
  X(OPEN_DEVICE)                                                                                   \
  X(CLOSE_DEVICE)                                                                                  \
  X(QUERY_DEVICE) /* ibv_query_device and query_device_ex */                                       \
  X(QUERY_PORT)                                                                                    \
  X(QUERY_GID) /* ibv_query_gid, _ibv_query_gid_ex, _ibv_query_gid_table */                        \
  X(ALLOC_PD)                                                                                      \
  X(DEALLOC_PD)                                                                                    \
  X(REG_MR)                                                                                        \
  X(DEREG_MR)                                                                                      \
  X(CREATE_COMP_CHANNEL)                                                                           \
  X(DESTROY_COMP_CHANNEL)                                                                          \
  X(CREATE_CQ)    /* ibv_create_cq */                                                              \
  X(CREATE_CQ_EX) /* the create_cq_ex context op */                                                \
  X(DESTROY_CQ)                                                                                    \
  X(REQ_NOTIFY_CQ)                                                                                 \
  X(GET_CQ_EVENT)                                                                                  \
  X(POLL_CQ)      /* poll_cq and start_poll: the call fails, nothing is consumed */                \
  X(CREATE_QP)    /* ibv_create_qp */                                                              \
  X(CREATE_QP_EX) /* the create_qp_ex context op */                                                \
  X(MODIFY_QP)                                                                                     \
  X(QUERY_QP)                                                                                      \
  X(DESTROY_QP)                                                                                    \
  X(POST_SEND) /* post_send, and wr_complete of the WR API */                                      \
  X(POST_RECV)                                                                                     \
  X(POST_SRQ_RECV)                                                                                 \
  X(CREATE_SRQ)                                                                                    \
  X(DESTROY_SRQ)                                                                                   \
  X(CREATE_AH)                                                                                     \
  X(DESTROY_AH)

/* clang-format off */
enum fakeprov_op {
#define FAKEPROV_OPS_ENUM(name) FAKEPROV_OP_##name,
  FAKEPROV_OPS(FAKEPROV_OPS_ENUM)
#undef FAKEPROV_OPS_ENUM
  FAKEPROV_OP_COUNT
};
/* clang-format on */

/* Object types counted by fakeprov_live(). */
enum fakeprov_type {
  FAKEPROV_DEVICE_LIST, /* lists from ibv_get_device_list not yet freed */
  FAKEPROV_CONTEXT,
  FAKEPROV_PD,
  FAKEPROV_MR,
  FAKEPROV_COMP_CHANNEL,
  FAKEPROV_CQ,
  FAKEPROV_QP,
  FAKEPROV_SRQ,
  FAKEPROV_AH,
  FAKEPROV_TYPE_COUNT
};

/* What the create_cq_ex / create_qp_ex context ops do. */
enum fakeprov_ex_mode {
  FAKEPROV_EX_WORKS,      /* the extended object is created */
  FAKEPROV_EX_EOPNOTSUPP, /* the op is set but fails with EOPNOTSUPP (rdma-core 33.2 rxe) */
  FAKEPROV_EX_ABSENT      /* the op pointer is NULL (verbs_get_ctx_op finds nothing) */
};

/* Knobs of fakeprov_set(); each has the default given. They are read when
 * the answer is computed, so they also change what live contexts report.
 * Another process (a tool a test runs) sets them with the environment:
 * FAKEPROV_KNOBS=PORT_LINK_LAYER=1,PORT_LID=7 (names without "FAKEPROV_"),
 * read at the first use; fakeprov_reset() restores the defaults. Likewise
 * FAKEPROV_FAIL=OPEN_DEVICE=13,QUERY_GID=5 (enum fakeprov_op names without
 * "FAKEPROV_OP_") makes every call of those operations fail with that errno.
 * X(NAME) each: FAKEPROV_NAME in enum fakeprov_knob, "NAME" in FAKEPROV_KNOBS. */
#define FAKEPROV_KNOBS(X)                                                                          \
  X(MAX_QP_WR)           /* 64 */                                                                  \
  X(MAX_SGE)             /* 4 (max_sge and max_sge_rd) */                                          \
  X(MAX_CQE)             /* 256; <= 0 is reported as is, and no limit applies */                   \
  X(MAX_QP_RD_ATOM)      /* 4 */                                                                   \
  X(MAX_QP_INIT_RD_ATOM) /* 4 */                                                                   \
  X(MAX_SRQ)             /* 8; 0 means "no SRQ" (ibv_create_srq fails EOPNOTSUPP) */               \
  X(MAX_SRQ_WR)          /* 64 */                                                                  \
  X(MAX_SRQ_SGE)         /* 4 */                                                                   \
  X(MAX_INLINE)          /* 64: the inline size granted at most */                                 \
  X(ATOMIC_CAP)          /* 1 (IBV_ATOMIC_HCA) */                                                  \
  X(PORT_STATE)          /* 4 (IBV_PORT_ACTIVE) */                                                 \
  X(PORT_LINK_LAYER)     /* 2 (IBV_LINK_LAYER_ETHERNET); 1 = InfiniBand */                         \
  X(PORT_LID)            /* 0 (RoCE); the LID when the link layer is InfiniBand */                 \
  X(PORT_ACTIVE_MTU)     /* 3 (IBV_MTU_1024); max_mtu is IBV_MTU_4096 */                           \
  X(CQ_EX)               /* FAKEPROV_EX_WORKS */                                                   \
  X(QP_EX)               /* FAKEPROV_EX_WORKS */                                                   \
  X(LOOPBACK)            /* 1: deliver between fake QPs (see fakeprov_wr_record) */                \
  /* 0: a send WR runs (effects, completion) when posted. N > 0: it is held                        \
   * and runs at the Nth poll of its send CQ after the post; -1: held until                        \
   * fakeprov_release() or its QP goes to the error state (then flushed). */                       \
  X(HOLD_SENDS)                                                                                    \
  /* 0. 1 (read when a context is opened): the data path does the least a                          \
   * provider can, for bench/cxx/run-host.sh's instruction counts: no checks,                      \
   * no log, no loopback, no scripted failure; each signalled send and each                        \
   * receive completes at once on its CQ (at most 1024 waiting per CQ), as if                      \
   * its message were there already. */                                                            \
  X(MINIMAL_OPS)                                                                                   \
  /* Device limits, reported by ibv_query_device and enforced: creating one                        \
   * more live object than the limit fails with ENOMEM, as a device out of                         \
   * resources does. */                                                                            \
  X(MAX_QP) /* 64 */                                                                               \
  X(MAX_CQ) /* 64 */                                                                               \
  X(MAX_MR) /* 256 */                                                                              \
  /* 0: registered bytes are not counted. 1: ibv_reg_mr fails with ENOMEM                          \
   * when the live regions' bytes would pass RLIMIT_MEMLOCK's soft limit (as                       \
   * the kernel pins pages for a process without CAP_IPC_LOCK). */                                 \
  X(MEMLOCK)

/* clang-format off */
enum fakeprov_knob {
#define FAKEPROV_KNOBS_ENUM(name) FAKEPROV_##name,
  FAKEPROV_KNOBS(FAKEPROV_KNOBS_ENUM)
#undef FAKEPROV_KNOBS_ENUM
  FAKEPROV_KNOB_COUNT
};
/* clang-format on */

/* The device: name "fake0", node type CA, transport IB, one port. */
#define FAKEPROV_DEVICE_NAME "fake0"
#define FAKEPROV_NODE_GUID 0x0002c9fffe123456ull /* host order */
/* GID table of port 1 (gid_tbl_len 4):
 *   0  fe80::0202:c9ff:fe12:3456   RoCE v1
 *   1  ::ffff:192.0.2.1            RoCE v2 (FAKEPROV_IPV4, network order bytes)
 *   2  fe80::0202:c9ff:fe12:3456   RoCE v2
 *   3  empty (zero; not listed by _ibv_query_gid_table) */
#define FAKEPROV_GID_TBL_LEN 4
#define FAKEPROV_IPV4 "192.0.2.1"
#define FAKEPROV_MAX_RECORD_SGE 8
#define FAKEPROV_MAX_RECORD_INLINE 256

enum fakeprov_wr_kind {
  FAKEPROV_WR_SEND,     /* a send-queue WR (post_send or the WR API) */
  FAKEPROV_WR_RECV,     /* post_recv */
  FAKEPROV_WR_SRQ_RECV, /* post_srq_recv (logged under the SRQ's number) */
};

struct fakeprov_sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

/* A deep copy of one posted work request. */
struct fakeprov_wr_record {
  uint64_t seq;     /* global post order, from 1 */
  uint32_t qpn;     /* the QP's number (the SRQ's number for SRQ receives) */
  int kind;         /* enum fakeprov_wr_kind */
  int via_wr_api;   /* 1: built with ibv_wr_* between wr_start and wr_complete */
  int chain_index;  /* position in the chain of one post call / one wr_complete */
  int chain_length; /* length of that chain */
  uint64_t wr_id;
  int opcode;          /* enum ibv_wr_opcode (send kind only) */
  unsigned send_flags; /* IBV_SEND_* */
  uint32_t imm_data;   /* as given (network order), for *_WITH_IMM */
  uint64_t remote_addr;
  uint32_t rkey;
  uint64_t compare_add;
  uint64_t swap;
  const void *ud_ah; /* the struct ibv_ah * given (UD) */
  uint32_t ud_remote_qpn;
  uint32_t ud_remote_qkey;
  int num_sge; /* as given; at most FAKEPROV_MAX_RECORD_SGE are copied */
  struct fakeprov_sge sge[FAKEPROV_MAX_RECORD_SGE];
  uint32_t inline_length; /* IBV_SEND_INLINE / wr_set_inline_data: bytes copied at post */
  uint8_t inline_data[FAKEPROV_MAX_RECORD_INLINE];
};

/* One ibv_modify_qp call that succeeded. */
struct fakeprov_modify_record {
  uint32_t qpn;
  int attr_mask; /* IBV_QP_* */
  int from_state, to_state;
  /* The attributes as given (only those in attr_mask are meaningful). */
  int path_mtu;
  uint32_t qkey, rq_psn, sq_psn, dest_qp_num;
  unsigned qp_access_flags;
  uint16_t pkey_index;
  uint8_t port_num, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, timeout, retry_cnt, rnr_retry;
  /* ah_attr */
  uint16_t dlid;
  uint8_t sl, is_global, sgid_index, hop_limit, traffic_class, ah_port_num;
  uint8_t dgid[16];
  uint32_t flow_label;
};

/* How a test gets at these functions: the fake is already loaded (by rdmadl,
 * from RDMADL_IBVERBS_PATH). */
#define FAKEPROV_FUNCTIONS(X)                                                                      \
  X(void, fakeprov_reset, (void))                                                                  \
  X(void, fakeprov_set, (enum fakeprov_knob knob, long value))                                     \
  X(long, fakeprov_get, (enum fakeprov_knob knob))                                                 \
  X(void, fakeprov_fail_next, (enum fakeprov_op op, int err, unsigned count))                      \
  X(void, fakeprov_complete_with, (unsigned count, int status, uint32_t vendor_err))               \
  X(int, fakeprov_complete_recv,                                                                   \
    (uint32_t qpn, uint32_t byte_len, int with_imm, uint32_t imm_data, uint32_t src_qp))           \
  X(int, fakeprov_live, (enum fakeprov_type type))                                                 \
  X(int, fakeprov_live_total, (void))                                                              \
  X(int, fakeprov_violations, (void))                                                              \
  X(const char *, fakeprov_last_violation, (void))                                                 \
  X(int, fakeprov_cq_overruns, (void))                                                             \
  X(size_t, fakeprov_wr_log, (uint32_t qpn, struct fakeprov_wr_record * out, size_t max))          \
  X(void, fakeprov_wr_log_clear, (void))                                                           \
  X(size_t, fakeprov_modify_log, (uint32_t qpn, struct fakeprov_modify_record * out, size_t max))  \
  X(int, fakeprov_qp_state, (uint32_t qpn))                                                        \
  X(int, fakeprov_cq_pending, (const void *cq))                                                    \
  X(uint32_t, fakeprov_last_qpn, (void))                                                           \
  X(int, fakeprov_held, (uint32_t qpn))                                                            \
  X(int, fakeprov_release, (uint32_t qpn))                                                         \
  X(unsigned long, fakeprov_calls, (enum fakeprov_op op))                                          \
  X(int, fakeprov_reap, (void))

/* fakeprov_reset: clears scripted failures and completions, the logs, the
 * violation, overrun and call counts, and sets every knob to its default. Live
 * objects stay live.
 * fakeprov_set / fakeprov_get: a knob (enum fakeprov_knob).
 * fakeprov_fail_next: the next COUNT calls of OP fail with ERR (as that call
 * reports failure: NULL + errno, or the errno value returned).
 * fakeprov_complete_with: the next COUNT completions produced (send or
 * receive) carry STATUS (enum ibv_wc_status) and VENDOR_ERR.
 * fakeprov_complete_recv: completes the oldest receive posted on QP QPN (or on
 * its SRQ) as if a send of BYTE_LEN bytes from SRC_QP arrived; 0, or ENOENT
 * when none is posted / no such live QP.
 * fakeprov_live: live objects of TYPE; fakeprov_live_total: of every type.
 * fakeprov_violations: uses of dead or foreign objects, double destroys,
 * ibv_close_device with live children, WR-API misuse (nested wr_start, a
 * builder outside wr_start..wr_complete, a builder whose IBV_QP_EX_WITH_*
 * flag was not asked for, post_send inside a batch, destroying a QP inside a
 * batch), extended-CQ misuse (a read outside a poll session or of a field not
 * asked for), destroying a CQ with unacknowledged events;
 * fakeprov_last_violation says what the last one was ("" when none; a copy
 * per thread).
 * fakeprov_cq_overruns: completions that found their CQ full (dropped).
 * fakeprov_wr_log: copies up to MAX records of QP (or SRQ) QPN, oldest first,
 * into OUT; returns how many there are in all (OUT may be NULL).
 * fakeprov_modify_log: the same for successful ibv_modify_qp calls.
 * fakeprov_qp_state: the QP's state (enum ibv_qp_state), -1 if no such QP.
 * fakeprov_cq_pending: completions queued on CQ (a struct ibv_cq *), -1 if
 * not a live fake CQ.
 * fakeprov_last_qpn: the number of the QP created last (0 if none).
 * fakeprov_held: send WRs of QP QPN (0: of every QP) held and not yet run
 * (FAKEPROV_HOLD_SENDS): the ones whose buffers the fake may still touch.
 * fakeprov_release: runs them now, oldest first; returns how many ran.
 * fakeprov_calls: how many times OP was called (failed or not) since the
 * fake was loaded or last reset, e.g. how often the devices were listed.
 * fakeprov_reap: frees the destroyed objects the registry keeps, for a test
 * that makes thousands (churn) and holds no pointer to them any more: a
 * later use of one is then undefined instead of a violation. It also empties
 * the work-request and modify logs (their capacity stays). Returns how many
 * objects it freed. */
#define FAKEPROV_DECLARE(ret, name, params) ret name params;
FAKEPROV_FUNCTIONS(FAKEPROV_DECLARE)
#undef FAKEPROV_DECLARE

/* A table of the functions, filled by fakeprov_open(). */
struct fakeprov_api {
#define FAKEPROV_MEMBER(ret, name, params) ret(*name) params;
  FAKEPROV_FUNCTIONS(FAKEPROV_MEMBER)
#undef FAKEPROV_MEMBER
};

#ifdef FAKEPROV_WANT_OPEN
#include <dlfcn.h>
#include <stdlib.h>
/* Fills API from the fake that rdmadl loaded from RDMADL_IBVERBS_PATH (load
 * rdmadl first, e.g. with rdmadl_load()). Returns 0, or -1 when the fake is
 * not loaded or lacks a function. */
static inline int fakeprov_open(struct fakeprov_api *api) {
  const char *path = getenv("RDMADL_IBVERBS_PATH");
  void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  if (!h)
    return -1;
  int ok = 1;
#define FAKEPROV_LOOKUP(ret, name, params)                                                         \
  *(void **)(&api->name) = dlvsym(h, #name, "FAKEPROV_1.0");                                       \
  ok &= api->name != NULL;
  FAKEPROV_FUNCTIONS(FAKEPROV_LOOKUP)
#undef FAKEPROV_LOOKUP
  dlclose(h); /* drops the reference RTLD_NOLOAD took; rdmadl's stays */
  return ok ? 0 : -1;
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* RDMADL_TESTS_FAKE_PROVIDER_H */

// SPDX-License-Identifier: MIT
// The public headers mirror a few rdma-core structures so that the data path
// is inline without including <infiniband/verbs.h>: these are the checks that
// each mirror is the layout twin of the real structure (libibverbs.so.1
// froze them), and that rdmadl's enumerations carry rdma-core's values.
#include "rdmadl_verbs.h"

#include <cstddef>

#include "rdmadl/rdmadl.hpp"

namespace rdmadl {
namespace {

#define RDMADL_SAME_FIELD(ours, theirs, a, b)                                                      \
  static_assert(offsetof(ours, a) == offsetof(theirs, b), #ours "::" #a " offset");                \
  static_assert(sizeof(ours::a) == sizeof(theirs::b), #ours "::" #a " size")

static_assert(sizeof(local_slice) == sizeof(ibv_sge) && alignof(local_slice) == alignof(ibv_sge));
RDMADL_SAME_FIELD(local_slice, ibv_sge, addr, addr);
RDMADL_SAME_FIELD(local_slice, ibv_sge, length, length);
RDMADL_SAME_FIELD(local_slice, ibv_sge, lkey, lkey);

static_assert(sizeof(completion) == sizeof(ibv_wc) && alignof(completion) == alignof(ibv_wc));
RDMADL_SAME_FIELD(completion, ibv_wc, wr_id, wr_id);
RDMADL_SAME_FIELD(completion, ibv_wc, status, status);
RDMADL_SAME_FIELD(completion, ibv_wc, opcode, opcode);
RDMADL_SAME_FIELD(completion, ibv_wc, vendor_err, vendor_err);
RDMADL_SAME_FIELD(completion, ibv_wc, byte_len, byte_len);
RDMADL_SAME_FIELD(completion, ibv_wc, imm_be, imm_data);
RDMADL_SAME_FIELD(completion, ibv_wc, qp_num, qp_num);
RDMADL_SAME_FIELD(completion, ibv_wc, src_qp, src_qp);
RDMADL_SAME_FIELD(completion, ibv_wc, wc_flags, wc_flags);
RDMADL_SAME_FIELD(completion, ibv_wc, pkey_index, pkey_index);
RDMADL_SAME_FIELD(completion, ibv_wc, slid, slid);
RDMADL_SAME_FIELD(completion, ibv_wc, sl, sl);
RDMADL_SAME_FIELD(completion, ibv_wc, dlid_path_bits, dlid_path_bits);

static_assert(sizeof(send_request) == sizeof(ibv_send_wr) &&
              alignof(send_request) == alignof(ibv_send_wr));
RDMADL_SAME_FIELD(send_request, ibv_send_wr, wr_id, wr_id);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, next, next);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, sg_list, sg_list);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, num_sge, num_sge);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, opcode, opcode);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, flags, send_flags);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, imm_be, imm_data);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, wr.rdma.remote_addr, wr.rdma.remote_addr);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, wr.rdma.rkey, wr.rdma.rkey);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, wr.atomic.remote_addr, wr.atomic.remote_addr);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, wr.atomic.compare_add, wr.atomic.compare_add);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, wr.atomic.swap, wr.atomic.swap);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, wr.atomic.rkey, wr.atomic.rkey);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, wr.ud.ah, wr.ud.ah);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, wr.ud.remote_qpn, wr.ud.remote_qpn);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, wr.ud.remote_qkey, wr.ud.remote_qkey);
RDMADL_SAME_FIELD(send_request, ibv_send_wr, xrc_remote_srqn, qp_type.xrc.remote_srqn);
static_assert(offsetof(send_request, reserved_) == offsetof(ibv_send_wr, bind_mw));

static_assert(sizeof(recv_request) == sizeof(ibv_recv_wr) &&
              alignof(recv_request) == alignof(ibv_recv_wr));
RDMADL_SAME_FIELD(recv_request, ibv_recv_wr, wr_id, wr_id);
RDMADL_SAME_FIELD(recv_request, ibv_recv_wr, next, next);
RDMADL_SAME_FIELD(recv_request, ibv_recv_wr, sg_list, sg_list);
RDMADL_SAME_FIELD(recv_request, ibv_recv_wr, num_sge, num_sge);

// The function pointers the handles keep are the ops' own types.
static_assert(std::is_same_v<detail::post_send_fn, decltype(ibv_context_ops::post_send)>);
static_assert(std::is_same_v<detail::post_recv_fn, decltype(ibv_context_ops::post_recv)>);
static_assert(std::is_same_v<detail::post_srq_recv_fn, decltype(ibv_context_ops::post_srq_recv)>);
static_assert(std::is_same_v<detail::poll_cq_fn, decltype(ibv_context_ops::poll_cq)>);
static_assert(std::is_same_v<detail::notify_cq_fn, decltype(ibv_context_ops::req_notify_cq)>);

#define RDMADL_SAME_VALUE(ours, theirs)                                                            \
  static_assert(static_cast<long long>(ours) == static_cast<long long>(theirs), #ours)
RDMADL_SAME_VALUE(wr_opcode::rdma_write, IBV_WR_RDMA_WRITE);
RDMADL_SAME_VALUE(wr_opcode::rdma_write_imm, IBV_WR_RDMA_WRITE_WITH_IMM);
RDMADL_SAME_VALUE(wr_opcode::send, IBV_WR_SEND);
RDMADL_SAME_VALUE(wr_opcode::send_imm, IBV_WR_SEND_WITH_IMM);
RDMADL_SAME_VALUE(wr_opcode::rdma_read, IBV_WR_RDMA_READ);
RDMADL_SAME_VALUE(wr_opcode::comp_swap, IBV_WR_ATOMIC_CMP_AND_SWP);
RDMADL_SAME_VALUE(wr_opcode::fetch_add, IBV_WR_ATOMIC_FETCH_AND_ADD);
RDMADL_SAME_VALUE(send_flags::fence, IBV_SEND_FENCE);
RDMADL_SAME_VALUE(send_flags::signaled, IBV_SEND_SIGNALED);
RDMADL_SAME_VALUE(send_flags::solicited, IBV_SEND_SOLICITED);
RDMADL_SAME_VALUE(send_flags::inline_data, IBV_SEND_INLINE);
RDMADL_SAME_VALUE(wc_opcode::send, IBV_WC_SEND);
RDMADL_SAME_VALUE(wc_opcode::rdma_write, IBV_WC_RDMA_WRITE);
RDMADL_SAME_VALUE(wc_opcode::rdma_read, IBV_WC_RDMA_READ);
RDMADL_SAME_VALUE(wc_opcode::comp_swap, IBV_WC_COMP_SWAP);
RDMADL_SAME_VALUE(wc_opcode::fetch_add, IBV_WC_FETCH_ADD);
RDMADL_SAME_VALUE(wc_opcode::bind_mw, IBV_WC_BIND_MW);
RDMADL_SAME_VALUE(wc_opcode::local_inv, IBV_WC_LOCAL_INV);
RDMADL_SAME_VALUE(wc_opcode::tso, IBV_WC_TSO);
RDMADL_SAME_VALUE(wc_opcode::flush, IBV_WC_FLUSH);
RDMADL_SAME_VALUE(wc_opcode::atomic_write, IBV_WC_ATOMIC_WRITE);
RDMADL_SAME_VALUE(wc_opcode::recv, IBV_WC_RECV);
RDMADL_SAME_VALUE(wc_opcode::recv_rdma_with_imm, IBV_WC_RECV_RDMA_WITH_IMM);
RDMADL_SAME_VALUE(async_event_type::cq_err, IBV_EVENT_CQ_ERR);
RDMADL_SAME_VALUE(async_event_type::port_active, IBV_EVENT_PORT_ACTIVE);
RDMADL_SAME_VALUE(async_event_type::port_err, IBV_EVENT_PORT_ERR);
RDMADL_SAME_VALUE(async_event_type::device_fatal, IBV_EVENT_DEVICE_FATAL);
RDMADL_SAME_VALUE(async_event_type::srq_limit_reached, IBV_EVENT_SRQ_LIMIT_REACHED);
RDMADL_SAME_VALUE(async_event_type::device_speed_change, IBV_EVENT_DEVICE_SPEED_CHANGE);
static_assert(IBV_WC_WITH_IMM == 2, "completion::has_imm() tests bit 2");
RDMADL_SAME_VALUE(access::remote_write, IBV_ACCESS_REMOTE_WRITE);
RDMADL_SAME_VALUE(access::remote_read, IBV_ACCESS_REMOTE_READ);
RDMADL_SAME_VALUE(access::remote_atomic, IBV_ACCESS_REMOTE_ATOMIC);
// device::node() and transport_type() convert by value.
RDMADL_SAME_VALUE(node_type::ca, IBV_NODE_CA);
RDMADL_SAME_VALUE(node_type::sw, IBV_NODE_SWITCH);
RDMADL_SAME_VALUE(node_type::router, IBV_NODE_ROUTER);
RDMADL_SAME_VALUE(node_type::rnic, IBV_NODE_RNIC);
RDMADL_SAME_VALUE(node_type::usnic, IBV_NODE_USNIC);
RDMADL_SAME_VALUE(node_type::usnic_udp, IBV_NODE_USNIC_UDP);
RDMADL_SAME_VALUE(node_type::unspecified, IBV_NODE_UNSPECIFIED);
RDMADL_SAME_VALUE(transport::ib, IBV_TRANSPORT_IB + 1);
RDMADL_SAME_VALUE(transport::iwarp, IBV_TRANSPORT_IWARP + 1);
RDMADL_SAME_VALUE(transport::usnic, IBV_TRANSPORT_USNIC + 1);
RDMADL_SAME_VALUE(transport::usnic_udp, IBV_TRANSPORT_USNIC_UDP + 1);
RDMADL_SAME_VALUE(transport::unspecified, IBV_TRANSPORT_UNSPECIFIED + 1);
RDMADL_SAME_VALUE(node_type::unknown, 0);
RDMADL_SAME_VALUE(transport::unknown, 0);

} // namespace
} // namespace rdmadl

// SPDX-License-Identifier: MIT
// rdmadl/fwd.hpp - forward declarations of rdma-core's types (for
// native_handle()) and of rdmadl's classes. Includes no rdma-core header.
#ifndef RDMADL_FWD_HPP
#define RDMADL_FWD_HPP

extern "C" {
struct ibv_device;
struct ibv_context;
struct ibv_pd;
struct ibv_mr;
struct ibv_cq;
struct ibv_cq_ex;
struct ibv_comp_channel;
struct ibv_qp;
struct ibv_qp_ex;
struct ibv_srq;
struct ibv_ah;
struct rdma_event_channel;
struct rdma_cm_id;
}

namespace rdmadl {
class device;
class device_list;
class context;
class protection_domain;
class memory_region;
class completion_queue;
class completion_channel;
class queue_pair;
class shared_receive_queue;
class address_handle;
class send_batch;
} // namespace rdmadl

#endif // RDMADL_FWD_HPP

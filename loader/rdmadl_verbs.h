/* SPDX-License-Identifier: MIT */
/*
 * rdma-core's verbs and rdma_cm API for rdmadl's own implementation files
 * (src/, tools/): every ibv_* and rdma_* name is renamed to the loader's hidden
 * rdmadl_sym_* stub before rdma-core's headers are read, so the code reads
 * like ordinary verbs code, rdma-core's inline helpers (ibv_reg_mr,
 * ibv_query_port, ibv_query_gid_ex, ...) go through the dispatch table too,
 * and no object file references or exports an ibv_* and rdma_* symbol. The data
 * path (ibv_post_send, ibv_poll_cq, ibv_wr_*) stays inline: it calls the
 * provider's function pointers directly, as with rdma-core itself.
 *
 * Requires the bundled headers on the include path as a system directory
 * (target rdmadl::loader sets that up).
 */
#ifndef RDMADL_VERBS_H
#define RDMADL_VERBS_H

#include "rdmadl_rename.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "rdmadl/loader.h"

#endif /* RDMADL_VERBS_H */

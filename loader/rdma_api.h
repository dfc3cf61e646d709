/* SPDX-License-Identifier: MIT */
/*
 * Every bundled rdma-core header that declares a function of symbols.def:
 * libibverbs, librdmacm, the providers' direct-verbs libraries and
 * libibumad, plus the exported names no installed header declares any more
 * (extra_decls.h). What the stubs, hand*.c and the table-driven tests include.
 */
#ifndef RDMADL_RDMA_API_H
#define RDMADL_RDMA_API_H

#include <infiniband/efadv.h>
#include <infiniband/hnsdv.h>
#include <infiniband/ionic_dv.h>
#include <infiniband/manadv.h>
#include <infiniband/mlx4dv.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/umad.h>
#include <infiniband/umad_str.h>
#include <infiniband/umad_types.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "extra_decls.h"

#endif /* RDMADL_RDMA_API_H */

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-exports.sh DROPIN_SO SYMBOLS_TXT: the shared drop-in exports every
# function of the table (SYMBOLS_TXT: "name node", gen/rdmadl_symbols.txt) at
# its node, as the real libraries do (name@@node; ibv_register_driver only as
# the non-default name@IBVERBS_1.1; mlx5dv_init_obj also as libmlx5's old-ABI
# mlx5dv_init_obj@MLX5_1.0, loader/hand_compat.c), and no other ibv_/rdma_/provider/umad
# function: a program linked against rdma-core's -libverbs -lrdmacm -lmlx5
# -lefa ... -libumad finds each of its versioned references.
set -euo pipefail
so=${1:?usage: check-exports.sh DROPIN_SO SYMBOLS_TXT}
table=${2:?usage: check-exports.sh DROPIN_SO SYMBOLS_TXT}
want=$( (awk '{ print $1 ($1 == "ibv_register_driver" ? "@" : "@@") $2 }' "$table"
  echo "mlx5dv_init_obj@MLX5_1.0") | sort)
have=$(readelf --dyn-syms -W "$so" |
  awk '$7 != "UND" && $4 == "FUNC" && ($5 == "GLOBAL" || $5 == "WEAK") { print $8 }' |
  grep -v '^rdmadl_' | sort)
if [ "$want" != "$have" ]; then
  echo "check-exports: FAIL: $so's exports differ from the table (< table, > exported):" >&2
  diff <(echo "$want") <(echo "$have") | grep '^[<>]' | head -40 >&2
  exit 1
fi
echo "check-exports: $(echo "$have" | wc -l) functions, each at its node: ok"

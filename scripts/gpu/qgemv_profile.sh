#!/usr/bin/env bash
# Nsight Compute (--set full) on single launches of the quantized GEMV inside
# `cuda_kernel_bench --quant`, for one format x shape (QBENCH_ONLY, default "int4g128 gate").
# The bench's checks come first: launch 0 is m = 1 (default variant), 1 and 2 m = 1 at 1 and 4
# quads per iteration, 3 m = 8, 4 m = 33, 5 m = 64. LAUNCHES picks them (default "0 5").
# KERNEL (a regex, default quant_gemv_kernel) picks the kernel: quant_gemv_bulk_kernel for the bulk
# GEMV, whose launch 0 is its check at m = 1 (default shape) and 1 at m = 8.
#   bash scripts/gpu/qgemv_profile.sh        # needs build-gpu's cuda_kernel_bench
# Writes $OUT/ncu_qgemv_<launch>.txt and prints the headline metrics.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu"; exit 1; }
for l in ${LAUNCHES:-0 5}; do
  FRUGAL_QBENCH_ONLY="${QBENCH_ONLY:-int4g128 gate}" "$NCU" --set full -k regex:${KERNEL:-quant_gemv_kernel} -s "$l" -c 1 \
    "$BUILD_DIR/tests/cuda/cuda_kernel_bench" --quant >"$OUT/ncu_qgemv_$l.txt" 2>&1
  echo "== launch $l: ncu rc $?"
  grep -E "Duration|DRAM Throughput|L1/TEX Cache Throughput|Registers Per|Theoretical Occupancy|Achieved Occupancy|Issue Slots Busy|Eligible Warps|Grid Size|Block Size" \
    "$OUT/ncu_qgemv_$l.txt" | head -12
done

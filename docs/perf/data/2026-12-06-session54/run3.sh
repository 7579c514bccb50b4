#!/usr/bin/env bash
# Session 54, run 3: the warpgroup kernel with its x staging as fixed per-thread pointer steps
# (16 4-byte copies a thread and quad, each a pointer step: run 2 rebuilt every copy's indices),
# from 41 tokens. Tests (CudaQuantGemm.* now at 47 tokens too, CudaInt4Tiles8.*), the int4 gate /
# down kernels, Nsight Compute on the wg kernel (gate, m = 64: stalls, issue, per-instruction
# counts), 7B int4 at 64 / 48 sequences against the mma.sync kernel.
# Run as: run(command: "STOP=540 bash docs/perf/data/2026-12-06-session54/run3.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s3.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_kernel_bench"; build; unset TARGETS
(timeout 150 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaQuantGemm.*:CudaInt4Tiles8.*' >$L/ops.log 2>&1
 echo "ops tests rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED|tests ran|Failure" $L/ops.log | head -12 >>$S
grep -B2 -A8 "Failure" $L/ops.log | head -30 >>$S
for sh in "int4g128 gate" "int4g128 down"; do
  (FRUGAL_QBENCH_ONLY="$sh" timeout 100 build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/qb.log 2>&1; echo "qbench $sh rc $? ($((SECONDS-START)) s)" >>$S)
  grep CHECK $L/qb.log | grep -E "FAIL|slabwg m=(47|64)" | head -6 >>$S
  grep -E "qgemm-slab2ch m=64|qgemm-slabwg m=64" $L/qb.log | head -4 >>$S
  cat $L/qb.log >>$L/qb_all.log
done
B="--prefill-lens 0 --decode-prompt-len 512 --decode-tokens 64 --reps 2 --warmup 1"
e2e int4_b64_wg /tmp/q7b "FRUGAL_QSLAB_WG=1" $B --batches 64 --precision int4
e2e int4_b64_mma /tmp/q7b "FRUGAL_QSLAB_WG=0" $B --batches 64 --precision int4
e2e int4_b48_wg /tmp/q7b "FRUGAL_QSLAB_WG=1" $B --batches 48 --precision int4
e2e int4_b40 /tmp/q7b "" $B --batches 40 --precision int4
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout $(( $(left) - 30 )) $NCU --clock-control none -k "regex:quant_gemm_wg_kernel" \
   --launch-skip 12 --launch-count 1 --section SourceCounters --section WarpStateStats --section InstructionStats \
   --section SpeedOfLight --section SchedulerStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
   --import-source no -o $L/wg -f build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/ncu_run.log 2>&1
 echo "ncu rc $? ($((SECONDS-START)) s)" >>$S)
$NCU -i $L/wg.ncu-rep --page details >$L/details.txt 2>&1
grep -E "Grid Size|Registers Per|Duration|DRAM Throughput|Issued Instructions  |Warp Cycles Per Issued|Eligible Warps|Issued Warp|Stall|stall" $L/details.txt | head -30 >>$S
$NCU -i $L/wg.ncu-rep --page raw --csv >$L/raw.csv 2>&1
$NCU -i $L/wg.ncu-rep --page source --csv --print-source sass >$L/source.csv 2>$L/source.err
echo "source csv: $(wc -l <$L/source.csv) lines; $(head -c 200 $L/source.err)" >>$S
gzip -c $L/source.csv >$OUT/wg_source.csv.gz; gzip -c $L/details.txt >$OUT/wg_details.txt.gz; gzip -c $L/raw.csv >$OUT/wg_raw.csv.gz
finish 3

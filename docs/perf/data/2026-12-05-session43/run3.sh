#!/usr/bin/env bash
# Session 43, device call 3, on run 2's warm machine (an H100): Nsight Compute on the lean GEMV's
# first three launches of `cuda_kernel_bench --quant` for the int4 gate and down shapes (the
# default m = 1 launch first), stall reasons and instruction counts; and the SASS of
# quant_gemv.cu.o for counting a quad's instructions. Results: run3/ncu_lean_*.txt.gz (the SASS,
# 6.6 MB, was read here and not kept).
mkdir -p $OUT
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
M=$(for r in long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle barrier not_selected \
  selected dispatch_stall no_instruction branch_resolving tex_throttle drain imc_miss membar sleeping; do
  printf "smsp__average_warps_issue_stalled_%s_per_issue_active.ratio," $r; done)
M=${M}smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=${M},gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct
for sh in gate down; do
  FRUGAL_QBENCH_ONLY="int4g128 $sh" timeout 100 $NCU -k regex:quant_gemv_lean_kernel -c 3 --kill yes --section LaunchStats \
    --section Occupancy --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section SpeedOfLight --metrics $M build-gpu/tests/cuda/cuda_kernel_bench --quant >$OUT/ncu_lean_$sh.txt 2>&1
  echo "$sh rc $?"
done
O=$(find build-gpu -name 'quant_gemv.cu.o' | head -1)
/usr/local/cuda/bin/cuobjdump -sass $O | gzip >$OUT/quant_gemv.sass.gz

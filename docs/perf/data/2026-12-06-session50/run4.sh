#!/usr/bin/env bash
# Session 50, run 4: where the slab GEMM's time goes at m = 16 (issue 18.3's bound), H100.
# 1. Nsight Compute on the default slab kernel at m = 16 / 9 (int4 g128 gate 18944 x 3584, two
#    chains, MT = 2): speed of light, warp states, scheduler, occupancy, instruction mix.
# 2. The SASS of the int4 slab kernels and the quantized GEMVs (cuobjdump), for the instruction
#    count of a quad.
# Run as: run(command: "STOP=540 bash docs/perf/data/2026-12-06-session50/run4.sh", carry: [".devcarry"]).
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s4.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="cuda_kernel_bench"; build; unset TARGETS
O=build-gpu/src/backend/cuda/CMakeFiles/frugal_backend_cuda.dir
for f in quant_gemm_slab_int4 quant_gemv; do
  cuobjdump -sass $O/$f.cu.o 2>$L/$f.sass.err | gzip >$OUT/$f.sass.gz; echo "sass $f: $(zcat $OUT/$f.sass.gz | wc -l) lines" >>$S
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" >>$S
(FRUGAL_QBENCH_ONLY="int4g128 gate" timeout $(( $(left) - 20 )) $NCU --clock-control none \
   -k "regex:quant_gemm_slab_kernel<.*8, 1, 2, 2, false, 2>" --kernel-name-base demangled --launch-skip 50 --launch-count 2 \
   --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
   --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis \
   build-gpu/tests/cuda/cuda_kernel_bench --quant >$L/ncu.txt 2>&1
 echo "ncu rc $? ($((SECONDS-START)) s)" >>$S)
gzip -c $L/ncu.txt >$OUT/ncu.txt.gz
grep -E "quant_gemm_slab_kernel|Grid Size|Registers Per|Achieved Occupancy|DRAM Throughput|Memory Throughput|Duration|Issue Slots Busy|No Eligible|Executed Ipc A|Warp Cycles Per Issued|Block Limit|Shared Memory Configuration Size|Dynamic Shared" $L/ncu.txt | head -60 >>$S
finish 4

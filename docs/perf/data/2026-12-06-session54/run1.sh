#!/usr/bin/env bash
# Session 54, run 1: where each slab GEMM instruction goes at 16 sequences (issue 18.3's bound:
# ~310 issued instructions a warp-quad against ~110 of arithmetic, session 50), and the GPU tests
# session 53 left for 7883af0 (plain rope_kv_write with NoSplit).
# 1. cuda_harness_test (the op harness) and CudaFused.* on the landed tree.
# 2. The SASS of the default m = 9..16 int4-with-zero-points slab kernel (U 2, R 1, MT 2, two chains).
# 3. Nsight Compute with source counters on four slab launches of a real 7B int4 decode step at
#    16 sequences (qkv, o, gate_up, down of one layer), exported per SASS instruction (executed
#    count, stall samples), so the loop's bookkeeping can be read instruction by instruction.
# Run as: run(command: "STOP=420 bash docs/perf/data/2026-12-06-session54/run1.sh", carry: [".devcarry"])
source docs/perf/data/2026-12-05-session40/lib.sh
S=$OUT/s1.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>$S
export TARGETS="frugal cuda_ops_test cuda_harness_test"; build; unset TARGETS
(timeout 120 build-gpu/tests/cuda/cuda_harness_test >$L/harness.log 2>&1; echo "harness rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED|tests ran" $L/harness.log | head -8 >>$S
(timeout 120 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaFused.*:CudaOps.Rope*' >$L/fused.log 2>&1; echo "fused rc $? ($((SECONDS-START)) s)" >>$S)
grep -E "FAILED|PASSED|tests ran" $L/fused.log | head -8 >>$S
O=build-gpu/src/backend/cuda/CMakeFiles/frugal_backend_cuda.dir
F=_ZN6frugal4cuda4slab22quant_gemm_slab_kernelILNS0_4qmma5QKindE0ELi8ELi1ELi2ELi2ELb1ELi2EEEvNS1_9QSlabArgsE
cuobjdump -sass -fun $F $O/quant_gemm_slab_int4_zp.cu.o >$L/slab16.sass 2>$L/sass.err || cuobjdump -sass $O/quant_gemm_slab_int4_zp.cu.o >$L/slab16.sass 2>>$L/sass.err
echo "sass: $(wc -l <$L/slab16.sass) lines" >>$S; gzip -c $L/slab16.sass >$OUT/slab16.sass.gz
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
(timeout $(( $(left) - 40 )) $NCU --clock-control none -k "regex:quant_gemm_slab_kernel" --launch-skip 60 --launch-count 4 \
   --section SourceCounters --section WarpStateStats --section InstructionStats --section SpeedOfLight \
   --section SchedulerStats --section LaunchStats --import-source no -o $L/slab16 -f \
   build-gpu/src/cli/frugal bench offline --device cuda --dummy-weights /tmp/q7b/config.json --precision int4 \
   --prefill-lens 0 --decode-prompt-len 512 --decode-tokens 8 --reps 1 --warmup 0 --batches 16 >$L/ncu_run.log 2>&1
 echo "ncu rc $? ($((SECONDS-START)) s)" >>$S)
tail -3 $L/ncu_run.log >>$S
$NCU -i $L/slab16.ncu-rep --page details >$L/details.txt 2>&1
grep -E "quant_gemm_slab_kernel|Grid Size|Registers Per|Duration|DRAM Throughput|Issued Instructions  |Warp Cycles Per Issued|Eligible Warps" $L/details.txt | head -40 >>$S
$NCU -i $L/slab16.ncu-rep --page source --csv --print-source sass >$L/source.csv 2>$L/source.err
echo "source csv: $(wc -l <$L/source.csv) lines; $(head -c 300 $L/source.err)" >>$S
gzip -c $L/source.csv >$OUT/source.csv.gz; gzip -c $L/details.txt >$OUT/details.txt.gz
finish 1

#!/usr/bin/env bash
# Session 49, run 4a: what the last ~130 s of the session's device time could take: build
# cuda_ops_test and run the slab ring's bits test (CudaInt4Tiles8.*), its output straight to $OUT.
export OUT=${OUT:-/tmp/out}
START=$SECONDS
TARGETS="cuda_ops_test" bash scripts/gpu/check.sh build >$OUT/build_tail.log 2>&1
echo "build rc $? ($((SECONDS-START)) s)" >$OUT/s4a.txt
timeout $((125 - (SECONDS-START))) build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaInt4Tiles8.*' >$OUT/ring.log 2>&1
echo "ring test rc $? ($((SECONDS-START)) s)" >>$OUT/s4a.txt
grep -E "FAILED|Failure|PASSED|OK \]|bits differ" $OUT/ring.log | head >>$OUT/s4a.txt
cat $OUT/s4a.txt

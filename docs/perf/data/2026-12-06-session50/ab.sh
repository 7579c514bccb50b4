# Shared by run6.sh and run7.sh of session 50 (sourced after session 40's lib.sh): an A/B of two
# builds on one machine. The A side is a copy of this checkout in /tmp/old, made before the
# caller changes anything.
copy_tree() { mkdir -p /tmp/old && tar cf - --exclude=./build-gpu . | (cd /tmp/old && tar xf -); }
build_old() { # targets
  (cd /tmp/old && TARGETS="$1" bash scripts/gpu/check.sh build >$L/build_old.log 2>&1; echo "old build rc $? ($((SECONDS-START)) s)" >>$S)
}
quant_tests() { # the tiled / row-major bits and every format against the oracle, on the new tree
  (timeout 100 build-gpu/tests/cuda/cuda_ops_test --gtest_filter='CudaInt4Tiles8.*:CudaQuantGemm.*' >$L/tests.log 2>&1
   echo "tests rc $? ($((SECONDS-START)) s)" >>$S)
  grep -E "FAILED|Failure|PASSED|bits differ" $L/tests.log | head -8 >>$S
}
kbench_ab() { # row regex: the int4 gate's kernel rows of both builds
  local v bin
  for v in new old; do
    bin=build-gpu; [ $v = old ] && bin=/tmp/old/build-gpu
    FRUGAL_QBENCH_ONLY="int4g128 gate" timeout 60 $bin/tests/cuda/cuda_kernel_bench --quant >$L/kq_$v.txt 2>&1
    echo "kbench $v rc $? ($((SECONDS-START)) s)" >>$S
    grep -E "$1" $L/kq_$v.txt | head -3 | sed "s/^/$v /" >>$S
  done
}
e2eb() { # name bin args...: the 7B dummy config through one build's frugal
  local name=$1 bin=$2; shift 2
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  timeout $((l-2)) $bin/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights /tmp/q7b/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode" $L/$name.txt | tail -1 >>$S
}

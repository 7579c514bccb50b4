# Shared by run1..2.sh of session 40 (sourced): session 38's helpers plus trace(), which runs
# `frugal bench offline --kernel-trace` on one point and keeps the step accounting in the summary.
STOP=${STOP:-560}  # one call is at most 600 s
source docs/perf/data/2026-12-05-session38/lib.sh
trace() { # name cfg env args...: one timed + one traced repetition; the table's trace block into $S
  local name=$1 cfg=$2 envs=$3; shift 3
  local l=$(left); [ $l -gt 25 ] || { echo "$name: no time ($l s)" >>$S; return; }
  mkdir -p $OUT/traces
  env $envs timeout $((l-2)) build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights $cfg/config.json "$@" --kernel-trace $L/trace_$name --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S
  grep -E "^decode|^prefill" $L/$name.txt | tail -2 >>$S
  sed -n '/^kernel trace/,/^engine:/p' $L/$name.txt | grep -v "^engine:" | head -45 >>$S
  # The first replays as a Chrome trace, small enough to keep.
  for f in $L/trace_$name/*.trace.json; do [ -f "$f" ] && gzip -c "$f" >$OUT/traces/${name}_$(basename $f).gz; done
  for f in $L/trace_$name/*.svg; do [ -f "$f" ] && cp "$f" $OUT/traces/${name}_$(basename $f); done
}
# V2-Lite batch 1 (128 in / 256 out) under env (session 59 on): the decode line, the engine line and
# any mla_attention stamps (the backend prints them at exit) into the summary.
v2l_b1() { # name env
  local l=$(left); [ $l -gt 30 ] || { echo "$1: no time" >>$S; return; }
  env $2 timeout 75 build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights /tmp/v2l/config.json --prefill-lens 0 --decode-prompt-len 128 --decode-tokens 256 --reps 2 --warmup 1 \
    --batches 1 --json $L/$1.json >$L/$1.txt 2>&1
  echo "== $1 rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|mla_attention stamps|^  " $L/$1.txt | grep -v "^  kernel" | tail -9 >>$S
}
# One gtest binary of build-gpu under a filter and a time limit (session 63 on): its rc and the
# gtest result / failure lines into the summary, the log as $L/<name>.log.
gtests() { # name binary filter seconds [lines]
  timeout $4 build-gpu/tests/$2 --gtest_filter="$3" >$L/$1.log 2>&1
  echo "$1: rc $? ($((SECONDS-START)) s)" >>$S
  grep -E "^\[  (PASSED|FAILED) |Failure$" -A1 $L/$1.log | head -${5:-20} >>$S
}

# Shared by run1..3.sh of session 38 (sourced). Each run writes its summary to $OUT/s<N>.txt and its
# logs to $OUT/logs<N>.tgz; e2e() skips what would run past STOP seconds ("no time"; 480 by default,
# so three calls and their start-up fit the session's 30 device minutes).
set -uo pipefail
START=$SECONDS
export OUT=${OUT:-/tmp/out}
L=/tmp/logs; mkdir -p $L
STOP=${STOP:-480}
left() { echo $((STOP - (SECONDS-START))); }
build() {
  bash scripts/gpu/check.sh build >$L/build.log 2>&1
  echo "build rc $? ($((SECONDS-START)) s)" >>$S; grep -E "error|FAILED" $L/build.log | head -5 >>$S
}
source scripts/gpu/lib.sh
catalog_config deepseek-v2-lite /tmp/v2l >/dev/null 2>&1
catalog_config deepseek-r1-distill-qwen-7b /tmp/q7b >/dev/null 2>&1
e2e() { # name cfg env args...
  local name=$1 cfg=$2 envs=$3; shift 3
  local l=$(left); [ $l -gt 18 ] || { echo "$name: no time ($l s)" >>$S; return; }
  env $envs timeout $((l-2)) build-gpu/src/cli/frugal bench offline --device cuda --gpu h200 --ceiling-gbps 4259 --ceiling-tflops 790 \
    --dummy-weights $cfg/config.json "$@" --json $L/$name.json >$L/$name.txt 2>&1
  echo "== $name rc $? ($((SECONDS-START)) s)" >>$S; grep -E "^decode|^prefill|^throughput|output tok|engine:" $L/$name.txt | tail -4 >>$S
}
finish() { tar czf $OUT/logs$1.tgz -C $L --exclude='*.o' . 2>/dev/null; cat $S; }

#!/usr/bin/env bash
# Issue 15 on the GPU machine, one call: smoke runs of both scripts, then the reference model's
# training, then the PyTorch eval oracles. Everything that comes back is under $OUT, in at most
# 8 files of at most 15 MiB each:
#   $OUT/run.log                                  this script's whole output
#   $OUT/reference-qwen2-20m/model-*.safetensors  the bf16 weight shards (each <= 14e6 bytes)
#   $OUT/reference-meta.tar.gz                    every other file of the model directory
#                                                 (config, tokenizer, index, train_log, provenance,
#                                                 samples, README)
#   $OUT/eval_oracle.tar.gz                       eval_oracle/{ppl.json,mc.json,oracle_log.txt}
# Put it back into the repo with scripts/eval/install_reference.sh FILES_DIR (see its header).
#
#   OUT=... bash scripts/gpu/reference.sh [all|train|oracles]     (MINUTES=4: training wall budget)
# `train` = smoke runs + training (ships the model); `oracles` alone (a later call) uses MODEL, by
# default the model the `train` call left in /tmp/frugal-reference on the same warm machine, else
# models/reference-qwen2-20m (a model already in the repo). `all` = train + oracles (~8 min).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # the repository root as working directory; ROOT, OUT, BUILD_DIR
MINUTES="${MINUTES:-4}"
STAGE="${1:-all}"
# A fixed work dir, so that `oracles` in a later call on the same (warm) machine finds the model.
W="${WORK:-/tmp/frugal-reference}"
mkdir -p "$W"
T0=$(date +%s)
say() { echo "=== [$(( $(date +%s) - T0 ))s] $*"; }

pack() {
  say "packing into $OUT"
  if [ "$STAGE" = oracles ]; then
    :  # the model was shipped by the `train` call
  elif [ -f "$W/reference-qwen2-20m/config.json" ]; then
    mkdir -p "$OUT/reference-qwen2-20m"
    cp "$W"/reference-qwen2-20m/*.safetensors "$OUT/reference-qwen2-20m/" 2>/dev/null
    (cd "$W/reference-qwen2-20m" && ls | grep -v '\.safetensors$' | tar czf "$OUT/reference-meta.tar.gz" -T -)
  elif [ -f "$W/reference-qwen2-20m/train_log.txt" ]; then
    tar czf "$OUT/reference-meta.tar.gz" -C "$W/reference-qwen2-20m" .
  fi
  [ -d "$W/eval_oracle" ] && tar czf "$OUT/eval_oracle.tar.gz" -C "$W" eval_oracle
  local n=0 big=0
  while IFS= read -r f; do
    n=$((n + 1))
    local sz; sz=$(stat -c %s "$f")
    [ "$sz" -gt $((15 * 1024 * 1024)) ] && big=1 && echo "TOO LARGE: $f"
    printf '  %12d  %s  %s\n' "$sz" "$(sha256sum "$f" | cut -c1-16)" "${f#$OUT/}"
  done < <(find "$OUT" -type f | sort)
  say "$n files under \$OUT (limit 8)$([ $big = 1 ] && echo ', SOME OVER 15 MiB')"
  [ "$n" -le 8 ] || echo "WARNING: more than 8 files under \$OUT"
}
main() {
trap pack EXIT
say "reference.sh $STAGE (MINUTES=$MINUTES) in $ROOT, work dir $W"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
python3 -c 'import sys, torch, transformers, tokenizers, safetensors, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__, "tokenizers", tokenizers.__version__)' \
  || { echo "FATAL: python packages missing"; exit 1; }

rc_all=0
run() {  # run NAME CMD...: logs the exit status, keeps going
  local name="$1"; shift
  say "start $name: $*"
  "$@"; local rc=$?
  say "end $name: rc $rc"
  [ "$rc" -eq 0 ] || rc_all=1
  return "$rc"
}

case "$STAGE" in all|train|oracles) ;; *) echo "usage: reference.sh [all|train|oracles]"; exit 2 ;; esac
if [ "$STAGE" = all ] || [ "$STAGE" = train ]; then
  rm -rf "$W/smoke-model" "$W/smoke-oracle" "$W/reference-qwen2-20m" "$W/eval_oracle"
  run smoke-train python3 scripts/gpu/train_reference.py --smoke --out "$W/smoke-model" \
    || { say "smoke training failed: stopping"; exit 1; }
  run smoke-oracles python3 scripts/gpu/eval_oracles.py --smoke --model "$W/smoke-model" --out "$W/smoke-oracle" \
    || { say "smoke oracles failed: stopping"; exit 1; }
  run train python3 scripts/gpu/train_reference.py --out "$W/reference-qwen2-20m" --minutes "$MINUTES" \
    || { say "training failed: shipping its log"; exit 1; }
  MODEL="$W/reference-qwen2-20m"
fi
if [ "$STAGE" = all ] || [ "$STAGE" = oracles ]; then
  if [ -z "${MODEL:-}" ]; then
    MODEL=models/reference-qwen2-20m
    [ -f "$W/reference-qwen2-20m/config.json" ] && MODEL="$W/reference-qwen2-20m"
  fi
  rm -rf "$W/eval_oracle"
  run oracles python3 scripts/gpu/eval_oracles.py --model "$MODEL" --out "$W/eval_oracle"
fi
say "finished, rc $rc_all"
exit "$rc_all"
}
# The pipeline waits for tee, so run.log is complete when the call returns.
( main ) 2>&1 | tee "$OUT/run.log"
exit "${PIPESTATUS[0]}"

#!/usr/bin/env bash
# `frugal run --tensor-parallel-size N` starts N CPU ranks itself (through mpirun) and prints the
# same greedy tokens as one rank (which golden_test checks against transformers); a model whose
# heads cannot split fails with exit code 2 and a message naming num_attention_heads.
set -euo pipefail
frugal=$1 root=$2
export FRUGAL_THREADS=1
run() { "$frugal" run --model "$root/tests/data/golden/$1" --prompt-ids "1 2 3 4" --max-tokens 16 --temperature 0 \
          --raw-ids --ignore-eos "${@:2}"; }
one=$(run qwen2_tied)
for n in 2 4; do
  got=$(run qwen2_tied --tensor-parallel-size $n)
  [ "$got" = "$one" ] || { echo "tp=$n printed '$got', one rank '$one'"; exit 1; }
done
# Sampling without --seed: the ranks share the launcher's seed (else they would diverge and hang).
timeout 60 "$frugal" run --model "$root/tests/data/golden/qwen2_tied" --prompt-ids "1 2" --max-tokens 8 --temperature 1 \
  --raw-ids --ignore-eos --tp 2 > /dev/null
set +e
err=$(run qwen2 --tp 4 2>&1 >/dev/null); rc=$?
set -e
[ $rc -eq 2 ] || { echo "expected exit code 2 for 4 ranks over 3 heads, got $rc"; exit 1; }
grep -q "num_attention_heads 3" <<< "$err" || { echo "error does not name the heads: $err"; exit 1; }
# Several hosts: CPU ranks there are mpirun's job; node counts that do not fit are named.
expect_error() {  # expect_error TEXT ARGS...: exit code 2 and TEXT on stderr
  local want=$1
  shift
  set +e
  err=$(run qwen2_tied "$@" 2>&1 >/dev/null); rc=$?
  set -e
  [ $rc -eq 2 ] || { echo "expected exit code 2 for $*, got $rc: $err"; exit 1; }
  grep -qF -- "$want" <<< "$err" || { echo "error for $* does not say '$want': $err"; exit 1; }
}
expect_error "mpirun --hostfile" --tp 2 --nnodes 2 --master-addr 10.0.0.1
expect_error "does not split evenly over --nnodes 2" --tp 3 --nnodes 2 --master-addr 10.0.0.1
expect_error "--node-rank 2 is not in [0, --nnodes 2)" --tp 2 --nnodes 2 --node-rank 2 --master-addr 10.0.0.1
expect_error "needs --master-addr" --tp 2 --nnodes 2
echo "ok: tp 2 and 4 equal one rank: $one"

#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: installs what frugal needs, builds the `frugal`
# binary, and writes the cost-effectiveness report (docs/report.md) for the default model
# (models/reference-qwen2-20m) on this machine: quantizes it to each precision with frugal
# quantize (cached in report/checkpoints), measures every row, and prints where report.html is.
# Extra args go to
# `frugal report` (e.g. --price-per-hour 0.05 --purchase-usd 1200 --power-w 65 for the cost
# columns, --quick for a CI-sized run, --precisions bf16,int8).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
cuda=OFF
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && cuda=AUTO
build="${BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFRUGAL_TESTS=OFF -DFRUGAL_BENCHMARKS=OFF \
  -DFRUGAL_CUDA=$cuda >/dev/null
cmake --build "$build" --target frugal -j"$(nproc)"
device=cpu
[ "$cuda" = AUTO ] && device=cuda
# Quality columns by default: perplexity of held-out War and Peace text, the 20-question MMLU
# sample of the eval oracles (tiny: its stderr says so; pass --mc DIR for a real subset).
extra=()
[[ " $* " == *" --text "* ]] || extra+=(--text "$root/tests/data/report/war-and-peace-excerpt.txt")
[[ " $* " == *" --mc "* ]] || extra+=(--mc "$root/tests/data/eval/oracle-mmlu")
# AWQ's scale search and GPTQ's Hessians dominate the report's time on two cores: 512 calibration
# tokens (the AWQ search reads at most 512 anyway) unless --calib-tokens says otherwise.
[[ " $* " == *" --calib-tokens "* ]] || extra+=(--calib-tokens 512)
t0=$SECONDS
"$build/src/cli/frugal" report --device "$device" --out "${REPORT_DIR:-$root/report}" "${extra[@]}" "$@"
echo "report written in $((SECONDS - t0)) s"

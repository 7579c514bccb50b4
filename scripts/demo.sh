#!/usr/bin/env bash
# Installs what frugal needs, builds it, and generates a story with the embedded default model
# (stories260K, a real 260K-parameter Llama trained on TinyStories). Extra args go to `frugal run`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
# Build the CUDA backend only where a GPU is present (nvcc alone, as on CI machines, is not enough
# reason to compile four GPU architectures for a CPU demo).
cuda=OFF
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && cuda=AUTO
bash "$root/scripts/build.sh" -DFRUGAL_TESTS=OFF -DFRUGAL_BENCHMARKS=OFF -DFRUGAL_CUDA=$cuda >/dev/null
if [ $# -eq 0 ]; then set -- --prompt "Once upon a time" --max-tokens 200 --temperature 0.8 --top-p 0.9 --seed 42; fi
exec "${BUILD_DIR:-$root/build}/src/cli/frugal" run "$@"

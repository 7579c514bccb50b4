#!/usr/bin/env bash
# Installs what frugal needs, builds it, and generates a story with the embedded default model
# (stories260K, a real 260K-parameter Llama trained on TinyStories). Extra args go to `frugal run`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" -DFRUGAL_TESTS=OFF -DFRUGAL_BENCHMARKS=OFF >/dev/null
if [ $# -eq 0 ]; then set -- --prompt "Once upon a time" --max-tokens 200 --temperature 0; fi
exec "${BUILD_DIR:-$root/build}/src/cli/frugal" run "$@"

#!/usr/bin/env bash
# Installs dependencies, builds, fetches test oracles (npm, cached) and runs every test that
# needs no GPU. Usage: bash scripts/test.sh [extra ctest args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
# The CUDA backend is compiled (not run) in CI only when FRUGAL_CI_CUDA=1 (see docs/testing.md).
bash "$root/scripts/build.sh" -DFRUGAL_CUDA=${FRUGAL_CI_CUDA:-OFF} -DFRUGAL_TESTS=ON
if [ -x "$root/tests/oracles/setup.sh" ]; then bash "$root/tests/oracles/setup.sh"; fi
# A bounded libFuzzer run over the tokenizer, GGUF and chat-template parsers, the model
# directory loaders and the OpenAI server's request path (clang + ASan, build-fuzz/); a crash
# fails the run. 20 s a target keeps a fresh clone's whole run near 26 min on 2 cores (27 with
# 30 s); longer runs by hand: scripts/fuzz.sh SECONDS. FRUGAL_FUZZ_SECONDS=0 skips it.
if [ "${FRUGAL_FUZZ_SECONDS:-20}" != 0 ]; then bash "$root/scripts/fuzz.sh" "${FRUGAL_FUZZ_SECONDS:-20}"; fi
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure -LE cuda -j"$(nproc)" "$@"

#!/usr/bin/env bash
# Installs everything frugal needs to build and test on a fresh Debian 12 machine.
# Idempotent: packages already present are skipped quickly.
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config git
      libgtest-dev libgmock-dev libbenchmark-dev
      nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libboost1.81-dev
      libpcre2-dev libutf8proc-dev prometheus-cpp-dev
      clang libclang-rt-14-dev python3
      chromium python3-jsonschema  # report_test: headless rendering, JSON schema check
      libopenmpi-dev openmpi-bin)  # src/dist: CPU tensor-parallel ranks (tests run mpirun)
# Node.js + npm (test oracles): keep an existing install (e.g. nodesource), else Debian's.
command -v node >/dev/null && command -v npm >/dev/null || PKGS+=(nodejs npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

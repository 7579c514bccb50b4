#!/usr/bin/env bash
# Fills .devcarry/debs with the Debian packages the GPU machine lacks (PCRE2, utf8proc,
# prometheus-cpp): scripts/gpu/check.sh unpacks them there (device tool, carry: [".devcarry"]).
# Run here, once per checkout: bash scripts/gpu/fetch_debs.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
pkgs=(libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libpcre2-dev libutf8proc2 libutf8proc-dev
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprometheus-cpp-push1.0 prometheus-cpp-dev)
mkdir -p .devcarry/debs
cd .devcarry/debs
apt-get download "${pkgs[@]}" 2>/dev/null || { apt-get update -qq && apt-get download "${pkgs[@]}"; }
ls -1 *.deb | wc -l | xargs echo ".devcarry/debs: packages:"

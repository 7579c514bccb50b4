#!/usr/bin/env bash
# Puts what scripts/gpu/reference.sh brought back into the repository:
#   bash scripts/eval/install_reference.sh FILES_DIR
# FILES_DIR holds reference-qwen2-20m/model-*.safetensors, reference-meta.tar.gz and/or
# eval_oracle.tar.gz. Writes models/reference-qwen2-20m/ and tests/data/eval_oracle/{ppl,mc}.json.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SRC="$(cd "${1:?usage: install_reference.sh FILES_DIR}" && pwd)"
cd "$ROOT"
if [ -f "$SRC/reference-meta.tar.gz" ]; then
  D=models/reference-qwen2-20m
  rm -rf "$D" && mkdir -p "$D"
  tar xzf "$SRC/reference-meta.tar.gz" -C "$D"
  cp "$SRC"/reference-qwen2-20m/*.safetensors "$D/"
  python3 - "$D" <<'PY'
import json, os, sys
d = sys.argv[1]
idx = os.path.join(d, "model.safetensors.index.json")
files = set(json.load(open(idx))["weight_map"].values()) if os.path.exists(idx) else {"model.safetensors"}
missing = [f for f in files if not os.path.exists(os.path.join(d, f))]
if missing:
    sys.exit(f"{d}: missing shards {missing}")
print(f"{d}: {len(files)} shard(s), {sum(os.path.getsize(os.path.join(d, f)) for f in files):,} bytes")
PY
  chmod -R u+w "$D"
fi
if [ -f "$SRC/eval_oracle.tar.gz" ]; then
  T="$(mktemp -d)"
  tar xzf "$SRC/eval_oracle.tar.gz" -C "$T"
  cp "$T"/eval_oracle/ppl.json "$T"/eval_oracle/mc.json tests/data/eval_oracle/
  cp "$T"/eval_oracle/oracle_log.txt tests/data/eval_oracle/oracle_log.txt
  chmod u+w tests/data/eval_oracle/*.json tests/data/eval_oracle/oracle_log.txt
  rm -rf "$T"
  ls -la tests/data/eval_oracle
fi

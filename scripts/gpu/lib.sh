# Shared by the GPU machine scripts (source it).
# Sourcing it makes the repository root the working directory (ROOT) and sets OUT (default
# /tmp/frugal-out, created) and BUILD_DIR (default build-gpu) unless the caller set them.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-/tmp/frugal-out}"
mkdir -p "$OUT"
BUILD_DIR="${BUILD_DIR:-build-gpu}"
# catalog_config NAME DIR: DIR/config.json from data/catalog/models/NAME.json's "config".
catalog_config() {
  mkdir -p "$2"
  python3 -c "import json,sys; json.dump(json.load(open(sys.argv[1]))['config'], open(sys.argv[2],'w'), indent=1)" \
    "data/catalog/models/$1.json" "$2/config.json"
}

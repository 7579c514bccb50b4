# Shared by the GPU machine scripts (source it).
# catalog_config NAME DIR: DIR/config.json from data/catalog/models/NAME.json's "config".
catalog_config() {
  mkdir -p "$2"
  python3 -c "import json,sys; json.dump(json.load(open(sys.argv[1]))['config'], open(sys.argv[2],'w'), indent=1)" \
    "data/catalog/models/$1.json" "$2/config.json"
}

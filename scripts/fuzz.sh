#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang + ASan into build-fuzz/ and runs each for a
# bounded time. Usage: scripts/fuzz.sh [SECONDS_PER_TARGET=60] [TARGET...]
# Corpora live in build-fuzz/corpus/<target> (seeded from real files); crashes land in
# build-fuzz/crashes/ and make the script exit non-zero.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_tokenizer fuzz_gguf fuzz_chat_template fuzz_model_dir fuzz_openai_request)
build="$root/build-fuzz"
san="-fsanitize=address,fuzzer-no-link -fno-omit-frame-pointer -g"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRUGAL_CUDA=OFF \
  -DFRUGAL_FUZZ=ON -DFRUGAL_BENCHMARKS=OFF -DFRUGAL_TESTS=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" >/dev/null
cmake --build "$build" --target "${targets[@]}" -j"${FUZZ_JOBS:-2}"

shared="$root/tests/data/shared"
mkdir -p "$build/crashes"
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  case "$t" in
    fuzz_gguf)
      for f in "$shared"/tokenizers/gguf-vocab/*.gguf; do [ -f "$f" ] && cp -n "$f" "$corpus/" || true; done ;;
    fuzz_tokenizer)
      # Mode byte + text / tokenizer.json seeds.
      i=0
      for f in "$shared"/tokenizers/vectors/*.inp; do
        [ -f "$f" ] || continue
        for mode in 1 2; do printf "\\x0$mode" > "$corpus/seed_${mode}_$i"; head -c 2000 "$f" >> "$corpus/seed_${mode}_$i"; done
        i=$((i + 1))
      done
      printf '\x00' > "$corpus/seed_json"; cat "$root/models/stories260K/tokenizer.json" >> "$corpus/seed_json" ;;
    fuzz_model_dir)
      # [u16 LE config length][config.json][model.safetensors' header: u64 length + JSON] of each
      # golden and quantized fixture (the target writes the data section as zeros).
      for d in "$root"/tests/data/golden/* "$root"/tests/data/quant/*; do
        [ -f "$d/config.json" ] && [ -f "$d/model.safetensors" ] || continue
        n=$(stat -c %s "$d/config.json")
        [ "$n" -lt 65536 ] || continue
        h=$(od -An -t u8 -N8 "$d/model.safetensors" | tr -d ' ')
        seed="$corpus/seed_$(basename "$(dirname "$d")")_$(basename "$d")"
        { printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $((n >> 8)))"; cat "$d/config.json"; head -c $((8 + h)) "$d/model.safetensors"; } >"$seed"
      done ;;
    fuzz_chat_template)
      # The project's chat templates, alone (the target's fixed conversation) and with a messages array.
      for f in "$shared"/chat-templates/*.jinja; do
        [ -f "$f" ] || continue
        b=$(basename "$f" .jinja)
        cp "$f" "$corpus/$b"
        { cat "$f"; printf '\0[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]'; } > "$corpus/$b.msgs"
      done ;;
    fuzz_openai_request)
      # [mode byte][request body]: chat and completions bodies (mode bit 0), a 64-token context (bit 1).
      printf '\x00{"messages":[{"role":"user","content":"What is 2+2?"}],"stop":["4","\\n\\n"],"max_tokens":8}' >"$corpus/seed_chat"
      printf '\x02{"messages":[{"role":"system","content":"terse"},{"role":"user","content":"hi"},{"role":"assistant","content":"<think>x</think>yo","tool_calls":[{"type":"function","id":"c1","function":{"name":"f","arguments":"{\\"a\\":1}"}}]},{"role":"tool","content":"1","tool_call_id":"c1"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"n":2,"logprobs":true,"top_logprobs":3}' >"$corpus/seed_chat_tools"
      printf '\x05{"prompt":"Once upon a time","stop":["on a","e u"],"echo":true,"logprobs":2,"max_tokens":4}' >"$corpus/seed_completion"
      printf '\x1f{"prompt":[[9707,11,1879],[151643]],"max_tokens":3,"stop":"!"}' >"$corpus/seed_completion_ids"
      # Two stop strings completed by the same token: the earlier-starting one must win.
      printf '\x01{"prompt":"hello","stop":["o","llo"],"max_tokens":2}' >"$corpus/seed_two_stops"
      # A short stop complete while a longer one that starts earlier is still a prefix: the longer
      # one must win (this crashed the stop check, 2026-12-07).
      printf '\x01{"prompt":"hellconto","stop":["o","hellconto","stollo"],"max_tokens":2}' >"$corpus/seed_long_stop_pending"
      # A stream that ends inside a character (byte token 163), and U+FFFD as the stop.
      printf '\x01{"prompt":[[9,163]],"stop":["\\ufffd"],"max_tokens":2}' >"$corpus/seed_fffd" ;;
  esac
  echo "== $t: ${secs}s"
  log="$build/crashes/$t.log"
  set +e
  (cd "$build/crashes" && ASAN_OPTIONS=detect_leaks=1 "$build/tests/fuzz/$t" "$corpus" \
      -max_total_time="$secs" -max_len=65536 -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 >"$log" 2>&1)
  rc=$?
  set -e
  grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY)" "$log" || true
  if [ "$rc" -ne 0 ]; then echo "$t: FAILED (exit $rc), see $build/crashes"; status=1; else echo "$t: no crash"; fi
done
exit $status

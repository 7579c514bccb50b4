// libFuzzer target for a model directory as downloaded: config.json (architecture, rope scaling,
// quantization_config of every format frugal loads) and a model.safetensors header. Any input
// either loads and runs one token, or gives an error; it never reads out of bounds, divides by
// zero or allocates without limit.
//
// Input: [u16 little-endian n][n bytes of config.json][the safetensors header: u64 length + JSON].
// The data section is not in the input (so mutations land on what the loaders parse): the file is
// written with zero bytes up to the largest data_offsets end the header names (capped at 16 MiB;
// a header that does not parse gets none). scripts/fuzz.sh seeds it from tests/data/golden and
// tests/data/quant.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/kv_storage.h"
#include "model/model.h"
#include "ops/ref_backend.h"

namespace {

constexpr uint64_t kMaxData = 16ull << 20;

const std::string& work_dir() {
  static const std::string dir = [] {
    const char* shm = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string d = std::string(shm) + "/frugal_fuzz_model_" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  static const bool cleanup = [] {
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(work_dir(), ec);
    });
    return true;
  }();
  (void)cleanup;
  return dir;
}

void write_file(const std::string& path, const uint8_t* p, size_t n, uint64_t zeros) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
  static const std::vector<char> block(1 << 16, 0);
  while (zeros > 0) {
    const uint64_t w = std::min<uint64_t>(zeros, block.size());
    f.write(block.data(), static_cast<std::streamsize>(w));
    zeros -= w;
  }
}

// The data bytes the header asks for: the largest data_offsets end, 0 when it does not parse.
uint64_t data_bytes(const uint8_t* p, size_t n) {
  if (n < 8) return 0;
  uint64_t len = 0;
  std::memcpy(&len, p, 8);
  if (len > n - 8) return 0;
  const auto j = nlohmann::json::parse(p + 8, p + 8 + len, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return 0;
  uint64_t end = 0;
  for (const auto& [name, v] : j.items()) {
    if (!v.is_object() || !v.contains("data_offsets")) continue;
    const auto& o = v["data_offsets"];
    if (o.is_array() && o.size() == 2 && o[1].is_number_unsigned()) end = std::max(end, o[1].get<uint64_t>());
  }
  return std::min(end, kMaxData);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace frugal;
  if (size < 2) return 0;
  const size_t n = std::min<size_t>(static_cast<size_t>(data[0]) | static_cast<size_t>(data[1]) << 8, size - 2);
  const uint8_t* config = data + 2;
  const uint8_t* st = config + n;
  const size_t st_size = size - 2 - n;
  const std::string dir = work_dir();
  write_file(dir + "/config.json", config, n, 0);
  write_file(dir + "/model.safetensors", st, st_size, data_bytes(st, st_size));
  static auto backend = ops::make_ref_backend();
  auto m = model::Model::load(dir, backend.get(), {.max_logit_rows = 1});
  if (!m.is_ok()) return 0;
  model::Model& model = **m;
  // Loaded: one token through the whole model (zero weights: whatever the values, no fault).
  auto kv = model::KvStorage::create(model.backend(), model.local_config(), {.n_blocks = 1, .block_size = 4});
  if (!kv.is_ok()) return 0;
  const std::vector<int32_t> tok = {0}, pos = {0}, q_start = {0, 1}, ctx = {1}, table = {0}, slots = {0}, rows = {0};
  std::vector<float> logits(static_cast<size_t>(model.config().vocab_size));
  (void)model.forward({.tokens = tok, .positions = pos, .q_start = q_start, .ctx_len = ctx, .block_tables = table,
                       .max_blocks_per_seq = 1, .slot_mapping = slots, .logits_rows = rows},
                      **kv, logits.data());
  return 0;
}

#include "model/model.h"

#include <algorithm>
#include <filesystem>

#include "model/families.h"

namespace frugal::model {
namespace {

// max_position_embeddings, or for dynamic NTK scaling (which exists to run past it) that
// times the scaling factor.
int32_t default_max_context(const ModelConfig& c) {
  double n = static_cast<double>(c.max_position_embeddings);
  if (c.rope_scaling.type == RopeScalingType::kDynamic) n *= std::max(1.0, c.rope_scaling.factor);
  if (n <= 0) n = 4096;
  return static_cast<int32_t>(std::min(n, static_cast<double>(INT32_MAX)));
}

}  // namespace

FamilyFactory family_factory(Family f) {
  switch (f) {
    case Family::kLlama: return &make_llama_model;
    case Family::kDeepseek: return nullptr;
  }
  return nullptr;
}

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::load(const std::string& path, ops::Backend* backend,
                                           const LoadOptions& opts) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  if (!is_dir && !opts.dummy_weights)
    return invalid_argument(path + ": not a model directory (a config.json alone needs --dummy-weights)");
  const std::string dir = is_dir ? path : fs::path(path).parent_path().string();
  const std::string config_file = is_dir ? path + "/config.json" : path;
  ModelParts parts;
  FRUGAL_ASSIGN_OR_RETURN(parts.config, load_model_config(config_file));
  FRUGAL_ASSIGN_OR_RETURN(const ArchInfo* arch, arch_for(parts.config, config_file));
  FamilyFactory factory = family_factory(arch->family);
  if (!arch->runnable || !factory)
    return unsupported(config_file + ": architecture " + std::string(arch->hf_class) +
                       " is described but not supported yet (no forward pass)");
  if (parts.config.hidden_act != "silu")
    return unsupported(config_file + ": field 'hidden_act': '" + parts.config.hidden_act + "' is not supported (silu only)");
  if (parts.config.rope_scaling.type == RopeScalingType::kYarn)
    return unsupported(config_file + ": field 'rope_scaling': yarn is not supported for " + std::string(arch->hf_class));
  if (opts.max_batch_tokens <= 0 || opts.max_seqs <= 0 || opts.max_logit_rows <= 0 || opts.block_size <= 0)
    return invalid_argument("load options: max_batch_tokens, max_seqs, max_logit_rows and block_size must be positive");
  const auto specs = tensor_specs(parts.config);
  if (opts.dummy_weights) {
    FRUGAL_ASSIGN_OR_RETURN(parts.weights, WeightStore::dummy(specs, {.dtype = parts.config.torch_dtype, .seed = opts.seed}, backend));
  } else {
    FRUGAL_ASSIGN_OR_RETURN(parts.weights, WeightStore::load(dir, specs, backend));
  }
  FRUGAL_ASSIGN_OR_RETURN(parts.generation, load_generation_config(dir, parts.config));
  parts.opts = opts;
  parts.backend = backend;
  parts.max_context = opts.max_context > 0 ? opts.max_context : default_max_context(parts.config);
  return factory(std::move(parts));
}

const std::vector<float>* Model::tap(const std::string& name) const {
  auto it = taps_.find(name);
  return it == taps_.end() ? nullptr : &it->second;
}

Status Model::record_tap(const std::string& name, const void* data, int64_t rows, int64_t width, int64_t ld) {
  const DType act = backend_->activation_dtype();
  const int64_t row_bytes = dtype_bytes(act, ld);
  tap_staging_.resize(static_cast<size_t>(row_bytes * rows));
  FRUGAL_RETURN_IF_ERROR(backend_->download(tap_staging_.data(), data, tap_staging_.size()));
  auto& out = taps_[name];
  out.resize(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r)
    convert_to_f32(act, tap_staging_.data() + r * row_bytes, out.data() + r * width, width);
  return {};
}

Status Model::validate(const ForwardBatch& b, const KvStorage& kv) const {
  auto bad = [](const std::string& m) { return invalid_argument("forward batch: " + m); };
  const int64_t n = b.n_tokens(), n_seqs = b.n_seqs();
  if (n <= 0) return bad("no tokens");
  if (n > opts_.max_batch_tokens) return bad("n_tokens " + std::to_string(n) + " exceeds max_batch_tokens " + std::to_string(opts_.max_batch_tokens));
  if (n_seqs <= 0 || n_seqs > opts_.max_seqs) return bad("n_seqs " + std::to_string(n_seqs) + " not in [1, max_seqs " + std::to_string(opts_.max_seqs) + "]");
  if (static_cast<int64_t>(b.positions.size()) != n || static_cast<int64_t>(b.slot_mapping.size()) != n)
    return bad("positions and slot_mapping must have n_tokens entries");
  if (static_cast<int64_t>(b.q_start.size()) != n_seqs + 1 || b.q_start[0] != 0 || b.q_start[static_cast<size_t>(n_seqs)] != n)
    return bad("q_start must have n_seqs + 1 entries from 0 to n_tokens");
  if (b.logits_rows.size() > static_cast<size_t>(opts_.max_logit_rows))
    return bad("logits_rows has " + std::to_string(b.logits_rows.size()) + " entries, max_logit_rows is " + std::to_string(opts_.max_logit_rows));
  if (b.max_blocks_per_seq <= 0 || b.block_tables.size() != static_cast<size_t>(n_seqs * b.max_blocks_per_seq))
    return bad("block_tables must hold n_seqs * max_blocks_per_seq entries");
  const int64_t table_cap = static_cast<int64_t>(opts_.max_seqs) * ((max_context_ + opts_.block_size - 1) / opts_.block_size);
  if (static_cast<int64_t>(b.block_tables.size()) > table_cap) return bad("block_tables larger than the model's preallocated capacity");
  for (int32_t t : b.tokens)
    if (t < 0 || t >= config_.vocab_size) return bad("token id " + std::to_string(t) + " out of range [0, vocab_size " + std::to_string(config_.vocab_size) + ")");
  for (int32_t r : b.logits_rows)
    if (r < 0 || r >= n) return bad("logits_rows entry " + std::to_string(r) + " out of range");
  const int64_t n_slots = static_cast<int64_t>(kv.n_blocks()) * kv.block_size();
  for (int64_t i = 0; i < n; ++i) {
    if (b.positions[static_cast<size_t>(i)] < 0) return bad("negative position");
    if (b.slot_mapping[static_cast<size_t>(i)] >= n_slots) return bad("slot_mapping entry " + std::to_string(b.slot_mapping[static_cast<size_t>(i)]) + " past the KV storage");
  }
  for (int64_t s = 0; s < n_seqs; ++s) {
    const int32_t nq = b.q_start[static_cast<size_t>(s + 1)] - b.q_start[static_cast<size_t>(s)];
    const int32_t ctx = b.ctx_len[static_cast<size_t>(s)];
    if (nq < 0 || ctx < nq) return bad("sequence " + std::to_string(s) + ": ctx_len smaller than its new tokens");
    if (ctx > max_context_) return bad("sequence " + std::to_string(s) + ": ctx_len " + std::to_string(ctx) + " exceeds the context " + std::to_string(max_context_));
    const int64_t used = (ctx + kv.block_size() - 1) / kv.block_size();
    if (used > b.max_blocks_per_seq) return bad("sequence " + std::to_string(s) + ": block table too short for ctx_len");
    for (int64_t j = 0; j < used; ++j) {
      const int32_t blk = b.block_tables[static_cast<size_t>(s * b.max_blocks_per_seq + j)];
      if (blk < 0 || blk >= kv.n_blocks()) return bad("sequence " + std::to_string(s) + ": block id " + std::to_string(blk) + " out of range");
    }
  }
  return {};
}

}  // namespace frugal::model

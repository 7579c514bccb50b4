#include "model/model.h"

#include <algorithm>
#include <filesystem>

#include "core/log.h"
#include "core/mapped_file.h"
#include "dist/communicator.h"
#include "model/families.h"

#include <nlohmann/json.hpp>

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

// The unit the intermediate dimension splits in over tensor-parallel ranks: the scale group of
// quantized linears (dummy --precision or the checkpoint's quantization_config), else 1.
int64_t inter_split_unit(const std::string& dir, const LoadOptions& opts) {
  if (opts.dummy_weights) {
    switch (opts.dummy_precision) {
      case DummyPrecision::kInt4: case DummyPrecision::kFp8: return 128;
      case DummyPrecision::kNf4: return 64;
      case DummyPrecision::kDense: case DummyPrecision::kInt8: case DummyPrecision::kFp8Channel: return 1;
    }
    return 1;
  }
  Result<std::string> text = read_file(dir + "/config.json");
  if (!text) return 1;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("quantization_config") || !j["quantization_config"].is_object()) return 1;
  const auto& q = j["quantization_config"];
  int64_t unit = 1;
  if (q.contains("group_size") && q["group_size"].is_number_integer()) unit = std::max<int64_t>(unit, q["group_size"].get<int64_t>());
  if (q.contains("dynamic") && q["dynamic"].is_object())  // GPTQModel's per-module group sizes
    for (const auto& r : q["dynamic"])
      if (r.is_object() && r.contains("group_size") && r["group_size"].is_number_integer())
        unit = std::max<int64_t>(unit, r["group_size"].get<int64_t>());
  if (q.contains("weight_block_size") && q["weight_block_size"].is_array())
    for (const auto& b : q["weight_block_size"])
      if (b.is_number_integer()) unit = std::max<int64_t>(unit, b.get<int64_t>());
  return unit;
}

}  // namespace

FamilyFactory family_factory(Family f) {
  switch (f) {
    case Family::kLlama: return &make_llama_family;
    case Family::kDeepseek: return &make_deepseek_family;
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
  auto m = std::unique_ptr<Model>(new Model());
  FRUGAL_ASSIGN_OR_RETURN(m->config_, load_model_config(config_file));
  if (opts.kv_window < 0 || opts.kv_sinks < 0)
    return invalid_argument("load options: kv_window and kv_sinks must be >= 0");
  if (opts.kv_sinks > 0 && opts.kv_window == 0)
    return invalid_argument("load options: kv_sinks " + std::to_string(opts.kv_sinks) + " needs a kv_window");
  if (opts.kv_window > 0) {
    if (m->config_.use_sliding_window) {
      FRUGAL_LOG_WARN("{}: the model has its own sliding window ({}); --kv-window/--kv-sinks ignored", config_file,
                      m->config_.sliding_window);
    } else {  // every layer: the window from the first one on
      m->config_.use_sliding_window = true;
      m->config_.sliding_window = opts.kv_window;
      m->config_.max_window_layers = 0;
      m->config_.attention_sink_tokens = opts.kv_sinks;
    }
  }
  const ModelConfig& config = m->config_;
  FRUGAL_ASSIGN_OR_RETURN(const ArchInfo* arch, arch_for(config, config_file));
  if (arch->family == Family::kLlama && config.use_sliding_window && config.max_window_layers == 0)
    m->all_layers_window_ = static_cast<int32_t>(config.sliding_window);
  FamilyFactory factory = family_factory(arch->family);
  if (!arch->runnable || !factory)
    return unsupported(config_file + ": architecture " + std::string(arch->hf_class) +
                       " is described but not supported yet (no forward pass)");
  if (config.hidden_act != "silu")
    return unsupported(config_file + ": field 'hidden_act': '" + config.hidden_act + "' is not supported (silu only)");
  if (opts.max_batch_tokens <= 0 || opts.max_seqs <= 0 || opts.max_logit_rows <= 0 || opts.block_size <= 0)
    return invalid_argument("load options: max_batch_tokens, max_seqs, max_logit_rows and block_size must be positive");
  const auto specs = tensor_specs(config);
  const int world = opts.comm ? opts.comm->world_size() : 1;
  std::vector<TensorShard> shards;
  m->local_config_ = config;
  m->layout_ = RankLayout{.rank = 0, .world = 1, .heads = {0, config.num_attention_heads},
                          .kv_heads = {0, config.num_key_value_heads}, .inter = {0, config.intermediate_size},
                          .vocab = {0, config.vocab_size}, .vocab_pad = config.vocab_size};
  if (world > 1) {
    auto where = [&](const Status& st) { return Status(st.code(), config_file + ": " + st.message()); };
    Result<RankLayout> l = model::rank_layout(config, opts.comm->rank(), world, inter_split_unit(dir, opts));
    if (!l) return where(l.status());
    m->layout_ = *l;
    Result<std::vector<TensorShard>> sh = shard_tensors(config, specs, m->layout_);
    if (!sh) return where(sh.status());
    shards = std::move(*sh);
    m->local_config_ = model::local_config(config, m->layout_);
  }
  if (opts.dummy_lm_head != DummyPrecision::kDense && config.tie_word_embeddings)
    return invalid_argument(config_file + ": --lm-head " + dummy_precision_name(opts.dummy_lm_head) +
                            ": the model ties lm_head to the embedding table (tie_word_embeddings), so it has no "
                            "lm_head of its own to store in another format");
  if (opts.dummy_lm_head != DummyPrecision::kDense && !opts.dummy_weights)
    return invalid_argument(config_file + ": --lm-head applies to --dummy-weights; a checkpoint's lm_head loads in "
                            "the format it is stored in");
  if (opts.dummy_weights) {
    FRUGAL_ASSIGN_OR_RETURN(m->weights_, WeightStore::dummy(specs, {.dtype = config.torch_dtype, .seed = opts.seed,
                                                                        .precision = opts.dummy_precision,
                                                                        .lm_head = opts.dummy_lm_head},
                                                                 backend, shards));
  } else {
    FRUGAL_ASSIGN_OR_RETURN(m->weights_, WeightStore::load(dir, specs, backend, shards));
  }
  FRUGAL_ASSIGN_OR_RETURN(m->generation_, load_generation_config(dir, config));
  m->opts_ = opts;
  m->backend_ = backend;
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<ForwardFamily> family,
                          factory(FamilyInputs{.config = m->local_config_, .arch = *arch, .weights = *m->weights_,
                                               .backend = backend, .full = &m->config_, .layout = &m->layout_,
                                               .comm = world > 1 ? opts.comm : nullptr}));
  const RunnerLimits limits{.max_batch_tokens = opts.max_batch_tokens,
                            .max_seqs = opts.max_seqs,
                            .max_logit_rows = opts.max_logit_rows,
                            .max_context = opts.max_context > 0 ? opts.max_context : default_max_context(config),
                            .block_size = opts.block_size};
  FRUGAL_ASSIGN_OR_RETURN(m->runner_, ModelRunner::create(backend, config, limits, std::move(family)));
  return m;
}

}  // namespace frugal::model

#include "plan/weights.h"

#include <cmath>
#include <map>

#include "model/shard.h"
#include "ops/weight_format.h"

namespace frugal::plan {
namespace {

using model::TensorRole;

constexpr int64_t kBf16Bytes = 2;
constexpr int64_t kF32Bytes = 4;

// A linear stored in an engine weight format (ops/weight_format.h): the bytes the loaded
// engine holds for it (codes with rows padded to 32, f32 scales, offsets), so plan and the
// engine agree.
StoredTensor quantized(const model::TensorSpec& t, const ops::WeightFormat& f, const std::string& label) {
  return {label, ops::weight_bytes(f, t.shape[0], t.shape[1])};
}

std::string group_label(const ops::WeightFormat& f) {
  return f.group_k > 0 ? " g" + std::to_string(f.group_k) : " per channel";
}

StoredTensor int8_per_channel(const model::TensorSpec& t) {
  return quantized(t, ops::quant_format(ops::WeightScheme::kInt8, t.shape[1], 0, false, 1), "int8 + f32 scale/row");
}

StoredTensor int4_grouped(const model::TensorSpec& t, const QuantOptions& q) {
  const ops::WeightFormat f = ops::quant_format(ops::WeightScheme::kInt4, t.shape[1], static_cast<int32_t>(q.group_size),
                                                q.int4_zero_point, 1);
  return quantized(t, f, "int4" + group_label(f) + (q.int4_zero_point ? " + f32 scale + f32 zero" : " + f32 scale"));
}

StoredTensor nf4(const model::TensorSpec& t) {
  const ops::WeightFormat f = ops::quant_format(ops::WeightScheme::kNf4, t.shape[1], 64, false, 1);
  return quantized(t, f, "nf4" + group_label(f) + " + f32 absmax");
}

StoredTensor fp8(const model::TensorSpec& t, const QuantOptions& q) {
  if (q.fp8_block <= 0)
    return quantized(t, ops::quant_format(ops::WeightScheme::kFp8, t.shape[1], 0, false, 0), "fp8 e4m3 + f32 scale/tensor");
  const auto b = static_cast<int32_t>(q.fp8_block);
  const ops::WeightFormat f = ops::quant_format(ops::WeightScheme::kFp8, t.shape[1], b, false, b);
  return quantized(t, f, "fp8 e4m3 + f32 scale/" + std::to_string(b) + "x" + std::to_string(f.group_k > 0 ? f.group_k : t.shape[1]));
}

}  // namespace

const char* precision_name(WeightPrecision p) {
  switch (p) {
    case WeightPrecision::kBf16: return "bf16";
    case WeightPrecision::kFp8: return "fp8";
    case WeightPrecision::kInt8: return "int8";
    case WeightPrecision::kInt4: return "int4";
    case WeightPrecision::kNf4: return "nf4";
  }
  return "?";
}

Result<WeightPrecision> parse_precision(const std::string& s) {
  if (s == "bf16") return WeightPrecision::kBf16;
  if (s == "fp8") return WeightPrecision::kFp8;
  if (s == "int8") return WeightPrecision::kInt8;
  if (s == "int4") return WeightPrecision::kInt4;
  if (s == "nf4") return WeightPrecision::kNf4;
  return invalid_argument("--precision: unknown '" + s + "' (expected bf16, fp8, int8, int4 or nf4)");
}

StoredTensor stored_tensor(const model::TensorSpec& t, const QuantOptions& q) {
  const int64_t n = t.shape.numel();
  const bool matrix = t.shape.ndim == 2;
  if (t.role == TensorRole::kLmHead && q.lm_head_int8 && matrix) {
    return int8_per_channel(t);
  }
  if (t.role != TensorRole::kLinear || !matrix) return {"bf16", n * kBf16Bytes};
  switch (q.precision) {
    case WeightPrecision::kBf16: return {"bf16", n * kBf16Bytes};
    case WeightPrecision::kInt8: return int8_per_channel(t);
    case WeightPrecision::kInt4: return int4_grouped(t, q);
    case WeightPrecision::kFp8: return fp8(t, q);
    case WeightPrecision::kNf4: return nf4(t);
  }
  return {"bf16", n * kBf16Bytes};
}

double WeightSummary::expected_distinct_experts(int64_t batch) const {
  if (n_routed_experts == 0) return 0;
  const double n = static_cast<double>(n_routed_experts);
  const double k = static_cast<double>(experts_per_token);
  return n * (1.0 - std::pow(1.0 - k / n, static_cast<double>(batch)));
}

double WeightSummary::active_params_per_token() const {
  double p = static_cast<double>(total_params - embedding_params - routed_expert_params);
  if (n_routed_experts > 0) {
    p += static_cast<double>(routed_expert_params) * static_cast<double>(experts_per_token) /
         static_cast<double>(n_routed_experts);
  }
  return p;
}

double WeightSummary::step_weight_bytes(int64_t batch) const {
  double b = static_cast<double>(total_bytes - embedding_bytes - routed_expert_bytes);
  if (n_routed_experts > 0) {
    b += static_cast<double>(routed_expert_bytes) * expected_distinct_experts(batch) /
         static_cast<double>(n_routed_experts);
  }
  return b;
}

Result<WeightSummary> summarize_weights(const model::ModelConfig& c, const QuantOptions& q) {
  if (q.precision == WeightPrecision::kInt4 && q.group_size <= 0) {
    return invalid_argument("--group-size: expected a positive group size, got " +
                            std::to_string(q.group_size));
  }
  const auto specs = model::tensor_specs(c);
  if (specs.empty()) {
    return unsupported("model '" + c.architecture + "': no tensor layout known for this architecture");
  }
  if (q.lm_head_int8 && c.tie_word_embeddings) {
    return invalid_argument("--lm-head int8: the model ties lm_head to the embedding table (tie_word_embeddings), so "
                            "it has no lm_head of its own to store in int8 (the engine refuses it too)");
  }
  WeightSummary s;
  std::map<std::pair<std::string, std::string>, WeightGroup> groups;
  for (const model::TensorSpec& t : specs) {
    const StoredTensor st = stored_tensor(t, q);
    const int64_t n = t.shape.numel();
    std::string role = model::tensor_role_name(t.role);
    if (t.expert >= 0) role = "routed expert linear";
    WeightGroup& g = groups[{role, st.format}];
    g.role = role;
    g.format = st.format;
    g.n_tensors += 1;
    g.params += n;
    g.bytes += st.bytes;
    s.total_params += n;
    s.total_bytes += st.bytes;
    if (t.role == TensorRole::kEmbedding) {
      s.embedding_params += n;
      s.embedding_bytes += st.bytes;
    }
    if (t.role == TensorRole::kLmHead) s.lm_head_params += n;
    if (t.expert >= 0) {
      s.routed_expert_params += n;
      s.routed_expert_bytes += st.bytes;
    }
  }
  // Tied embeddings: the one table is also the lm_head, so a decode step reads it.
  if (c.tie_word_embeddings) {
    s.lm_head_params = s.embedding_params;
    s.embedding_params = 0;
    s.embedding_bytes = 0;
  }
  if (c.is_moe()) {
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) s.n_moe_layers += model::is_moe_layer(c, l) ? 1 : 0;
    s.n_routed_experts = c.moe.n_routed_experts;
    s.experts_per_token = c.moe.num_experts_per_tok;
  }
  for (auto& [key, g] : groups) s.groups.push_back(g);
  return s;
}

Result<int64_t> rank_weight_bytes(const model::ModelConfig& c, const QuantOptions& q, int rank, int world) {
  const auto specs = model::tensor_specs(c);
  if (specs.empty()) return unsupported("model '" + c.architecture + "': no tensor layout known for this architecture");
  // The intermediate dimension splits at the quantization group (the engine's rule).
  int64_t unit = 1;
  if (q.precision == WeightPrecision::kInt4) unit = q.group_size;
  if (q.precision == WeightPrecision::kFp8 && q.fp8_block > 0) unit = q.fp8_block;
  if (q.precision == WeightPrecision::kNf4) unit = 64;
  FRUGAL_ASSIGN_OR_RETURN(const model::RankLayout l, model::rank_layout(c, rank, world, unit));
  FRUGAL_ASSIGN_OR_RETURN(const std::vector<model::TensorShard> shards, model::shard_tensors(c, specs, l));
  int64_t bytes = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (shards[i].skip) continue;  // another rank's routed expert
    model::TensorSpec local = specs[i];
    local.shape = model::shard_shape(local.shape, shards[i]);
    bytes += stored_tensor(local, q).bytes;
  }
  return bytes;
}

Result<int64_t> per_gpu_weight_bytes(const model::ModelConfig& c, const QuantOptions& q, int world) {
  int64_t most = 0;
  for (int r = 0; r < world; ++r) {
    FRUGAL_ASSIGN_OR_RETURN(const int64_t b, rank_weight_bytes(c, q, r, world));
    most = std::max(most, b);
  }
  return most;
}

}  // namespace frugal::plan

// An f32 forward of one dense Llama/Qwen2 decoder layer, for calibration: it yields the
// input of every linear (q/k/v, o, gate/up, down) on the calibration tokens, one layer at a time
// so memory stays at one layer's weights plus [n_tokens, width] activations. Matches
// transformers' LlamaDecoderLayer / Qwen2DecoderLayer (checked against the golden fixtures'
// hidden states in tests/quantize).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "quantize/math.h"

namespace frugal::quantize {

// f32 dot product in eight interleaved partial sums (a fixed order: the host calibration and
// host_math() give the same bits for the same inputs).
float dot_f32(const float* a, const float* b, int64_t n);

struct LinearF32 {
  std::string name;       // "model.layers.3.self_attn.q_proj"
  int64_t out = 0;
  int64_t in = 0;
  std::vector<float> w;   // [out, in]
  std::vector<float> b;   // [out] or empty
};

// The four groups of linears that share an input.
enum class Stage { kQkv, kO, kGateUp, kDown };
constexpr int kNumStages = 4;
const char* stage_name(Stage s);

struct LayerF32 {
  int64_t index = 0;
  std::vector<float> norm_in;    // [hidden] input_layernorm
  std::vector<float> norm_post;  // [hidden] post_attention_layernorm
  LinearF32 q, k, v, o, gate, up, down;

  // The linears a stage's input feeds.
  std::vector<LinearF32*> stage_linears(Stage s);
};

// Reads layer `i` (f32) from the checkpoint; errors name the missing tensor.
Result<LayerF32> read_layer(const model::SafetensorsSet& st, int64_t i);

// y [t, l.out] = x [t, l.in] . l.w^T + l.b (host_math: threaded loops).
void linear_forward(const float* x, int64_t t, const LinearF32& l, float* y, QuantMath& m = host_math());

// Calibration state: the residual stream of n_seqs sequences of seq_len tokens.
class HostCalibration {
 public:
  // Errors for configs the host forward does not cover (MoE, MLA, non-SiLU).
  static Result<HostCalibration> create(const model::ModelConfig& c, const model::SafetensorsSet& st,
                                        const std::vector<int32_t>& tokens, int64_t seq_len);

  int64_t n_tokens() const { return n_tokens_; }
  // Where the layers' linears run (default host_math(); the norms, RoPE and attention stay on
  // the host: they are a small part of a layer's work).
  void set_math(QuantMath& m) { math_ = &m; }
  const std::vector<float>& hidden() const { return h_; }  // [n_tokens, hidden]

  // Called with each stage's input [n_tokens, width] before that stage's linears run; it may
  // change the layer's weights (GPTQ quantizes them in place: later stages then see the
  // quantized outputs, as GPTQ's true-sequential mode does).
  using StageHook = std::function<Status(Stage, const std::vector<float>& x, LayerF32& layer)>;
  // Runs `layer` on the residual stream (updating it) calling hook per stage.
  Status run_layer(LayerF32& layer, const StageHook& hook);
  // A copy of the residual stream after the final norm (for tests).
  std::vector<float> final_norm(const std::vector<float>& norm_weight) const;

 private:
  model::ModelConfig c_;
  int64_t n_tokens_ = 0;
  int64_t seq_len_ = 0;
  std::vector<float> inv_freq_;
  std::vector<float> h_;
  QuantMath* math_ = &host_math();
};

}  // namespace frugal::quantize

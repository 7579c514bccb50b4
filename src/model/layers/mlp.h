// Gated SiLU MLP (Llama, Qwen2, DeepSeek dense layers and experts).
#pragma once

#include "model/weights.h"
#include "ops/backend.h"

namespace frugal::model::layers {

struct MlpWeights {
  Linear gate;  // [inter, hidden]
  Linear up;    // [inter, hidden]
  Linear down;  // [hidden, inter]
};

// residual[n, hidden] += down(silu(gate(x)) * up(x)); gate_buf / up_buf: [n, inter] scratch
// (the product is written over gate_buf).
inline Status gated_mlp(ops::Backend* b, DType act, const MlpWeights& w, int64_t n, const void* x,
                        void* residual, void* gate_buf, void* up_buf) {
  const int64_t hidden = w.gate.in, inter = w.gate.out;
  Status st = b->matmul(ops::MatmulParams{.x = x, .x_dtype = act, .ld_x = hidden, .w = w.gate.weight,
      .w_dtype = w.gate.dtype, .bias = w.gate.bias, .bias_dtype = w.gate.bias_dtype, .y = gate_buf,
      .y_dtype = act, .ld_y = inter, .m = n, .n = inter, .k = hidden, .accumulate = false});
  if (!st) return st;
  st = b->matmul(ops::MatmulParams{.x = x, .x_dtype = act, .ld_x = hidden, .w = w.up.weight,
      .w_dtype = w.up.dtype, .bias = w.up.bias, .bias_dtype = w.up.bias_dtype, .y = up_buf,
      .y_dtype = act, .ld_y = inter, .m = n, .n = inter, .k = hidden, .accumulate = false});
  if (!st) return st;
  st = b->silu_mul(ops::SiluMulParams{.gate = gate_buf, .up = up_buf, .out = gate_buf, .act_dtype = act,
      .n_tokens = n, .dim = inter, .ld_gate = inter, .ld_up = inter, .ld_out = inter});
  if (!st) return st;
  return b->matmul(ops::MatmulParams{.x = gate_buf, .x_dtype = act, .ld_x = inter, .w = w.down.weight,
      .w_dtype = w.down.dtype, .bias = w.down.bias, .bias_dtype = w.down.bias_dtype, .y = residual,
      .y_dtype = act, .ld_y = hidden, .m = n, .n = hidden, .k = inter, .accumulate = true});
}

}  // namespace frugal::model::layers

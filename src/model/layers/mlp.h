// Gated SiLU MLP (Llama, Qwen2, DeepSeek dense layers and experts).
#pragma once

#include <cstdint>
#include <optional>

#include "model/layers/linear.h"
#include "model/weights.h"
#include "ops/backend.h"

namespace frugal::model::layers {

struct MlpWeights {
  Linear gate;  // [inter, hidden]
  Linear up;    // [inter, hidden]
  Linear down;  // [hidden, inter]
  std::optional<Linear> gate_up;  // gate and up back to back in memory: one matmul (fuse_rows)
};

// residual[n, hidden] += down(silu(gate(x)) * up(x)). Scratch: gate_buf [n, 2 inter] (gate,
// or with gate_up both side by side), up_buf [n, inter] (up, or the product with gate_up;
// without gate_up the product is written over gate_buf). accumulate false: residual is
// overwritten with down's output (a tensor-parallel rank's partial sum, before its all-reduce).
// With `norm` (whose y is x) the block's input norm runs here too: with FP8 gate_up and down
// weights as one fused op with the gate_up projection (rms_norm_matmul: a backend may normalize
// inside its W8A8 activation quantization; mlp_norm_with_gate_up), otherwise first. With
// `post_norm` (whose x is residual: the next block's input norm) it runs with the down projection
// as one fused op (matmul_rms_norm), on the plain down path (not with FP8 down weights).
inline bool mlp_norm_with_gate_up(const MlpWeights& w) {
  return w.gate_up && w.gate_up->weight.format.scheme == ops::WeightScheme::kFp8 &&
         w.down.weight.format.scheme == ops::WeightScheme::kFp8;
}

inline Status gated_mlp(ops::Backend* b, DType act, const MlpWeights& w, int64_t n, const void* x,
                        void* residual, void* gate_buf, void* up_buf, bool accumulate = true,
                        const ops::RmsNormParams* norm = nullptr, const ops::RmsNormParams* post_norm = nullptr) {
  const int64_t hidden = w.gate.in, inter = w.gate.out;
  const bool norm_with_gate_up = norm && mlp_norm_with_gate_up(w);
  if (norm && !norm_with_gate_up) FRUGAL_RETURN_IF_ERROR(b->rms_norm(*norm));
  const void* prod = gate_buf;
  const ops::MatmulParams down = linear_params(w.down, act, up_buf, inter, residual, hidden, n, accumulate);
  if (w.gate_up && w.down.weight.format.scheme == ops::WeightScheme::kFp8) {
    // An FP8 down projection may quantize its input itself (W8A8): silu_mul goes with it
    // (silu_mul_matmul), so a backend can quantize silu(gate) * up without writing the product.
    // Other formats keep silu_mul with gate_up (matmul_silu_mul: a GEMV's epilogue can take it).
    const ops::MatmulParams gate_up = linear_params(*w.gate_up, act, x, hidden, gate_buf, 2 * inter, n, false);
    if (norm_with_gate_up) FRUGAL_RETURN_IF_ERROR(b->rms_norm_matmul(ops::RmsNormMatmulParams{.norm = *norm, .mm = gate_up}));
    else FRUGAL_RETURN_IF_ERROR(b->matmul(gate_up));  // the norm (if any) ran above
    FRUGAL_RETURN_IF_ERROR(b->silu_mul_matmul(ops::SiluMulMatmulParams{
        .act = {.gate = gate_buf, .up = static_cast<uint8_t*>(gate_buf) + dtype_bytes(act, inter), .out = up_buf,
                .act_dtype = act, .n_tokens = n, .dim = inter, .ld_gate = 2 * inter, .ld_up = 2 * inter, .ld_out = inter},
        .mm = down}));
    return post_norm ? b->rms_norm(*post_norm) : Status::ok();
  }
  if (w.gate_up) {
    // One op: a backend may compute the product in the gate_up matmul's epilogue (gate_buf unwritten).
    Status st = b->matmul_silu_mul(ops::MatmulSiluMulParams{
        .mm = linear_params(*w.gate_up, act, x, hidden, gate_buf, 2 * inter, n, false),
        .act = {.gate = gate_buf, .up = static_cast<uint8_t*>(gate_buf) + dtype_bytes(act, inter), .out = up_buf,
                .act_dtype = act, .n_tokens = n, .dim = inter, .ld_gate = 2 * inter, .ld_up = 2 * inter, .ld_out = inter}});
    if (!st) return st;
    prod = up_buf;
  } else {
    Status st = linear(b, w.gate, act, x, hidden, gate_buf, inter, n, false);
    if (!st) return st;
    st = linear(b, w.up, act, x, hidden, up_buf, inter, n, false);
    if (!st) return st;
    st = b->silu_mul(ops::SiluMulParams{.gate = gate_buf, .up = up_buf, .out = gate_buf, .act_dtype = act,
        .n_tokens = n, .dim = inter, .ld_gate = inter, .ld_up = inter, .ld_out = inter});
    if (!st) return st;
  }
  ops::MatmulParams d = down;
  d.x = prod;
  if (post_norm) return b->matmul_rms_norm(ops::MatmulRmsNormParams{.mm = d, .norm = *post_norm});
  return b->matmul(d);
}

}  // namespace frugal::model::layers

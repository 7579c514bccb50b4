// What `frugal quantize` can produce: target formats, methods, and the checkpoint layout each
// (format, method) pair writes. See docs/quantize.md.
//
//   format  method        layout written (quantization_config.quant_method)
//   int4    rtn | gptq    GPTQ packing (gptq, checkpoint_format "gptq"), g_idx
//   int4    awq           AutoAWQ GEMM packing (awq, version "gemm", zero points)
//   int8    rtn           compressed-tensors int-quantized W8A16, per output channel
//   int8    gptq          GPTQ packing, 8 bits
//   int8    smoothquant   compressed-tensors int-quantized W8A8 (dynamic per-token activations)
//   fp8     rtn           compressed-tensors float-quantized (tensor | channel scales), or
//                         DeepSeek-V3 fp8 with 128x128 block scales (weight_scale_inv)
//   nf4     rtn           bitsandbytes 4-bit NF4, blocksize 64
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace frugal::quantize {

enum class Format { kInt8, kInt4, kFp8, kNf4 };
enum class Method { kRtn, kAwq, kGptq, kSmoothQuant };
enum class Fp8Scale { kTensor, kChannel, kBlock };
enum class Layout { kGptq, kAwqGemm, kCtInt8, kCtInt8W8A8, kCtFp8, kFp8Block, kBnbNf4 };

Result<Format> parse_format(const std::string& s);
Result<Method> parse_method(const std::string& s);
Result<Fp8Scale> parse_fp8_scale(const std::string& s);
const char* format_name(Format f);
const char* method_name(Method m);
const char* layout_name(Layout l);
// Whether the layout's loaders take a quantized lm_head (GPTQ's "lm_head": true, compressed-
// tensors without lm_head in "ignore"); AutoAWQ, bitsandbytes and DeepSeek-FP8 expect it dense.
bool layout_stores_lm_head(Layout l);

struct QuantizeOptions {
  Format format = Format::kInt4;
  Method method = Method::kRtn;
  int64_t group_size = 0;  // 0: the layout's default (128 int4/GPTQ, 64 nf4); -1: per output channel
  bool sym = false;        // int4/GPTQ: symmetric (no stored zero points used)
  bool act_order = false;  // GPTQ: columns in decreasing Hessian diagonal order (desc_act, g_idx)
  bool static_groups = false;  // GPTQ: group scales from the unquantized weights, before updates
  Fp8Scale fp8_scale = Fp8Scale::kBlock;
  double damp_percent = 0.01;  // GPTQ: damping = damp_percent * mean(diag(H))
  int64_t gptq_block = 128;    // GPTQ: columns per lazy block update
  int32_t awq_grid = 20;       // AWQ: alpha in {0, 1/grid, ..., (grid-1)/grid}
  bool awq_clip = true;        // AWQ: per-group clipping search after scaling
  double smooth_alpha = 0.5;   // SmoothQuant migration strength
  std::vector<std::string> keep;  // extra modules kept unquantized (names or name suffixes)
  // The untied lm_head quantized too, round-to-nearest in the layout's format (GPTQModel's
  // "lm_head": true; compressed-tensors without lm_head in "ignore"). GPTQ and compressed-tensors
  // layouts only: AutoAWQ, bitsandbytes and DeepSeek-FP8 loaders expect a dense lm_head.
  bool lm_head = false;
  // GPTQ layout: the lm_head's bits (4 or 8) when they differ from --format's, written as a
  // GPTQModel "dynamic" rule ({"+:^lm_head$": {"bits": 8}}), as llama.cpp keeps its output tensor
  // at more bits than the body. 0: the layout's. Implies lm_head.
  int32_t lm_head_bits = 0;
};

// The layout `o` writes, or an error naming the unsupported flag combination.
Result<Layout> choose_layout(const QuantizeOptions& o);
// Group size actually used (resolves 0 to the layout default). -1 means per channel.
int64_t effective_group_size(const QuantizeOptions& o, Layout l);
// Whether the method needs calibration activations.
bool needs_calibration(Method m);

}  // namespace frugal::quantize

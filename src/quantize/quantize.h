// `frugal quantize` as a library: reads a bf16/f16/f32 HF directory, quantizes every linear of
// the decoder layers with the chosen method, and writes a HF-style directory atomically
// (into OUT.tmp-XXXXXX, renamed to OUT when complete). See docs/quantize.md.
//
//   QuantizeRequest r{.model_dir = "models/x", .out_dir = "/tmp/x-awq",
//                     .options = {.format = Format::kInt4, .method = Method::kAwq}};
//   auto report = quantize_model(r);   // per-linear output errors of the method and of RTN
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "quantize/formats.h"
#include "quantize/math.h"

namespace frugal::quantize {

// The version of what quantize_model writes: raised by every change that alters the written
// tensors for the same input and options (an algorithm, a rounding rule, a layout). Caches of
// quantized checkpoints (frugal report's --quant-cache) key on it, so a changed quantizer never
// reuses a stale checkpoint; a change that leaves the output bit-identical keeps it.
inline constexpr int kQuantizerOutputVersion = 1;

struct QuantizeRequest {
  std::string model_dir;
  std::string out_dir;
  QuantizeOptions options;
  std::string calib_file;               // text; empty: default_calib_file
  std::string default_calib_file;       // the bundled calibration text
  std::vector<int32_t> calib_ids;       // token ids used instead of a text (tests, golden models)
  int64_t calib_tokens = 2048;          // at most this many calibration tokens
  int64_t seq_len = 512;                // calibration sequences are cut to this length
  int64_t min_calib_tokens = 128;       // fewer is "too short"
  int64_t max_shard_bytes = int64_t{4} << 30;
  bool progress = false;                // progress bar on stderr (only when it is a terminal)
  bool keep_dequantized = false;        // fill QuantizeReport::dequantized (tests)
  // Where calibration and the methods' products run: null is host_math(); the CLI passes the
  // CUDA implementation (quantize/cuda) for --device cuda.
  QuantMath* math = nullptr;
};

struct LinearReport {
  std::string name;       // "model.layers.0.self_attn.q_proj"
  int64_t out = 0;
  int64_t in = 0;
  bool kept = false;
  // Relative output error |xW^T - x'W'^T|^2 / |xW^T|^2 on the calibration inputs (W8A8 layouts
  // quantize x too); NaN without calibration. err_rtn: plain RTN of the same weight and format.
  double err = 0;
  double err_rtn = 0;
  double weight_err = 0;  // |W - W'|^2 / |W|^2 (in the weight's own basis after folding)
};

struct QuantizeReport {
  Layout layout = Layout::kGptq;
  int64_t calib_tokens = 0;
  int64_t out_bytes = 0;
  double seconds = 0;
  std::string device = "host";  // QuantMath::name() of the implementation used
  std::vector<LinearReport> linears;
  // With keep_dequantized: the weight each loader must reconstruct, f32 [out, in], by tensor
  // prefix, plus the folded (AWQ / SmoothQuant) norm weights by tensor name.
  std::map<std::string, std::vector<float>> dequantized;
};

Result<QuantizeReport> quantize_model(const QuantizeRequest& r);

// The summary table (one row per linear and a per-layer total).
std::string format_report(const QuantizeReport& r, Method m);

}  // namespace frugal::quantize

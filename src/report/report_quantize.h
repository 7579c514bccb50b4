// The quantized rows of a report: which `frugal quantize` settings make each precision, and a
// cache of quantized checkpoints keyed by everything that determines their bytes (docs/report.md,
// "Quantize (or reuse)").
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "quantize/formats.h"

namespace frugal::report {

// The frugal quantize settings of a report precision (not bf16):
//   fp8        fp8 RTN, 128x128 block scales (DeepSeek-V3 layout)
//   int8       int8 RTN, per output channel (compressed-tensors W8A16)
//   int4-awq   int4 AWQ (scale search + clipping), group `group_size` (AutoAWQ GEMM)
//   int4-gptq  int4 GPTQ, group `group_size`, act-order off (GPTQ layout)
//   int4-rtn   int4 RTN, group `group_size` (GPTQ layout)
//   nf4        nf4, blocks of 64 (bitsandbytes)
// The three int4 rows share one group size so their KLD compares the methods alone.
// lm_head_int8: the untied lm_head quantized to 8 bits too, in the precisions whose layouts store
// it so (lm_head_storable): int8 (compressed-tensors), int4-gptq and int4-rtn (GPTQ, the lm_head's
// 8 bits by a GPTQModel "dynamic" rule; GPTQ on its inputs for int4-gptq). Elsewhere it is ignored.
Result<quantize::QuantizeOptions> quantize_options_for(const std::string& precision, int64_t group_size,
                                                       bool lm_head_int8 = false);

// Whether the checkpoint layout of a report precision stores a quantized lm_head (AutoAWQ,
// bitsandbytes and DeepSeek-FP8 loaders expect a dense one).
bool lm_head_storable(const std::string& precision);

// One line naming the method, format and group ("int4 AWQ g128", "int8 RTN per channel", ...).
std::string describe_quantization(const quantize::QuantizeOptions& o);

struct QuantizeRowOptions {
  std::string model_dir;      // the bf16/f16/f32 source
  std::string precision;      // a report precision other than bf16
  std::string cache_dir;      // checkpoints live in cache_dir/<precision>-<key>
  std::string calib_file;     // empty: default_calib_file
  std::string default_calib_file;
  int64_t calib_tokens = 2048;
  int64_t group_size = 128;
  bool lm_head_int8 = false;  // quantize_options_for
};

struct QuantizedCheckpoint {
  std::string dir;
  bool reused = false;        // found in the cache, not quantized by this run
  std::string description;    // describe_quantization
  int64_t calib_tokens = 0;   // used (0 for methods without calibration); from the stamp when reused
  double seconds = 0;         // quantization time (of the run that made it, when reused)
};

// The cache key: FNV-1a 64 of the quantizer's output version (quantize::kQuantizerOutputVersion),
// the source's config.json bytes and its weight files' names, sizes and modification times, the calibration text's bytes (calibrated methods only), the calibration
// token count and every quantize option. Hex, 16 digits.
Result<std::string> quantize_cache_key(const QuantizeRowOptions& o, const quantize::QuantizeOptions& q);

// Reuses cache_dir/<precision>-<key> when it holds a complete checkpoint (the stamp file
// report-quantize.json written after quantization), else quantizes into it with
// quantize::quantize_model (atomic: a failed or interrupted run leaves no directory). Errors are
// the quantizer's, prefixed with what was being made.
Result<QuantizedCheckpoint> quantize_or_reuse(const QuantizeRowOptions& o);

}  // namespace frugal::report

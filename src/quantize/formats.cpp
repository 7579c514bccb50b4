#include "quantize/formats.h"

namespace frugal::quantize {

Result<Format> parse_format(const std::string& s) {
  if (s == "int8") return Format::kInt8;
  if (s == "int4") return Format::kInt4;
  if (s == "fp8") return Format::kFp8;
  if (s == "nf4") return Format::kNf4;
  return invalid_argument("--format: \"" + s + "\" is not one of int8, int4, fp8, nf4");
}

Result<Method> parse_method(const std::string& s) {
  if (s == "rtn") return Method::kRtn;
  if (s == "awq") return Method::kAwq;
  if (s == "gptq") return Method::kGptq;
  if (s == "smoothquant") return Method::kSmoothQuant;
  return invalid_argument("--method: \"" + s + "\" is not one of rtn, awq, gptq, smoothquant");
}

Result<Fp8Scale> parse_fp8_scale(const std::string& s) {
  if (s == "tensor") return Fp8Scale::kTensor;
  if (s == "channel") return Fp8Scale::kChannel;
  if (s == "block") return Fp8Scale::kBlock;
  return invalid_argument("--fp8-scale: \"" + s + "\" is not one of tensor, channel, block");
}

const char* format_name(Format f) {
  switch (f) {
    case Format::kInt8: return "int8";
    case Format::kInt4: return "int4";
    case Format::kFp8: return "fp8";
    case Format::kNf4: return "nf4";
  }
  return "?";
}

const char* method_name(Method m) {
  switch (m) {
    case Method::kRtn: return "rtn";
    case Method::kAwq: return "awq";
    case Method::kGptq: return "gptq";
    case Method::kSmoothQuant: return "smoothquant";
  }
  return "?";
}

bool layout_stores_lm_head(Layout l) {
  return l == Layout::kGptq || l == Layout::kCtInt8 || l == Layout::kCtInt8W8A8 || l == Layout::kCtFp8;
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kGptq: return "gptq";
    case Layout::kAwqGemm: return "awq-gemm";
    case Layout::kCtInt8: return "compressed-tensors int8 (W8A16)";
    case Layout::kCtInt8W8A8: return "compressed-tensors int8 (W8A8)";
    case Layout::kCtFp8: return "compressed-tensors fp8";
    case Layout::kFp8Block: return "fp8 128x128 blocks";
    case Layout::kBnbNf4: return "bitsandbytes nf4";
  }
  return "?";
}

bool needs_calibration(Method m) { return m != Method::kRtn; }

namespace {
Status unsupported_pair(const QuantizeOptions& o, const std::string& why) {
  return invalid_argument(std::string("--format ") + format_name(o.format) + " with --method " +
                          method_name(o.method) + " is not supported: " + why);
}
}  // namespace

Result<Layout> choose_layout(const QuantizeOptions& o) {
  Layout l = Layout::kGptq;
  switch (o.format) {
    case Format::kInt4:
      if (o.method == Method::kSmoothQuant) return unsupported_pair(o, "SmoothQuant is W8A8 (use --format int8)");
      l = o.method == Method::kAwq ? Layout::kAwqGemm : Layout::kGptq;
      break;
    case Format::kInt8:
      if (o.method == Method::kAwq) return unsupported_pair(o, "the AutoAWQ layout is 4-bit only (use --format int4)");
      l = o.method == Method::kGptq ? Layout::kGptq
          : o.method == Method::kSmoothQuant ? Layout::kCtInt8W8A8 : Layout::kCtInt8;
      break;
    case Format::kFp8:
      if (o.method != Method::kRtn) return unsupported_pair(o, "fp8 takes absmax scales (use --method rtn)");
      l = o.fp8_scale == Fp8Scale::kBlock ? Layout::kFp8Block : Layout::kCtFp8;
      break;
    case Format::kNf4:
      if (o.method != Method::kRtn) return unsupported_pair(o, "nf4 takes absmax block scales (use --method rtn)");
      l = Layout::kBnbNf4;
      break;
  }
  if (o.act_order && o.method != Method::kGptq) return invalid_argument("--act-order applies to --method gptq only");
  if (o.static_groups && o.method != Method::kGptq) return invalid_argument("--static-groups applies to --method gptq only");
  if (o.sym && l != Layout::kGptq) {
    return invalid_argument(std::string("--sym applies to the GPTQ layout only (") + layout_name(l) +
                            (l == Layout::kAwqGemm ? " stores zero points)" : " is symmetric already)"));
  }
  const bool grouped = l == Layout::kGptq || l == Layout::kAwqGemm || l == Layout::kBnbNf4;
  if (o.group_size != 0 && !grouped) {
    return invalid_argument(std::string("--group-size does not apply to ") + layout_name(l) +
                            " (per-channel, per-tensor or 128x128 block scales)");
  }
  if (o.group_size < -1 || (grouped && o.group_size > 0 && o.group_size % 8 != 0 && l != Layout::kBnbNf4)) {
    return invalid_argument("--group-size " + std::to_string(o.group_size) + ": expected -1 (per channel) or a positive multiple of 8");
  }
  if (o.group_size == -1 && l != Layout::kGptq) {
    return invalid_argument(std::string("--group-size -1 (per channel) is for the GPTQ layout only, not ") + layout_name(l));
  }
  if (l == Layout::kBnbNf4 && o.group_size > 0 && o.group_size % 2 != 0) {
    return invalid_argument("--group-size " + std::to_string(o.group_size) + ": nf4 blocks must hold an even count");
  }
  if (o.damp_percent <= 0 || o.damp_percent >= 1) return invalid_argument("damp_percent must be in (0, 1)");
  if (o.smooth_alpha < 0 || o.smooth_alpha > 1) return invalid_argument("smoothquant alpha must be in [0, 1]");
  if (o.awq_grid < 1) return invalid_argument("awq grid must be >= 1");
  if (o.gptq_block < 1) return invalid_argument("gptq block must be >= 1");
  return l;
}

int64_t effective_group_size(const QuantizeOptions& o, Layout l) {
  if (o.group_size != 0) return o.group_size;
  switch (l) {
    case Layout::kGptq:
    case Layout::kAwqGemm: return 128;
    case Layout::kBnbNf4: return 64;
    case Layout::kCtInt8:
    case Layout::kCtInt8W8A8:
    case Layout::kCtFp8:
    case Layout::kFp8Block: return -1;
  }
  return -1;
}

}  // namespace frugal::quantize

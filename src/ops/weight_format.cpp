#include "ops/weight_format.h"

#include "ops/weight_format_check.h"

namespace frugal::ops {
namespace {

const char* packing_name(WeightPacking p) {
  switch (p) {
    case WeightPacking::kNone: return "none";
    case WeightPacking::kBlock32Nibbles: return "block32_nibbles";
  }
  return "?";
}

const char* layout_name(WeightLayout l) {
  switch (l) {
    case WeightLayout::kOutIn: return "out_in";
    case WeightLayout::kOutInTiles8: return "out_in_tiles8";
  }
  return "?";
}

const char* zero_name(ZeroPoint z) {
  switch (z) {
    case ZeroPoint::kNone: return "none";
    case ZeroPoint::kOffset: return "offset";
  }
  return "?";
}

const char* act_quant_name(ActivationQuant a) {
  switch (a) {
    case ActivationQuant::kNone: return "none";
    case ActivationQuant::kDynamicPerToken: return "dynamic_per_token";
    case ActivationQuant::kDynamicPerGroup: return "dynamic_per_group";
  }
  return "?";
}

bool is_dense_dtype(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

}  // namespace

const char* weight_scheme_name(WeightScheme s) {
  switch (s) {
#define FRUGAL_WEIGHT_SCHEME_NAME_(Name, str) \
  case WeightScheme::k##Name: return str;
    FRUGAL_WEIGHT_SCHEMES(FRUGAL_WEIGHT_SCHEME_NAME_)
#undef FRUGAL_WEIGHT_SCHEME_NAME_
  }
  return nullptr;
}

std::string weight_format_name(const WeightFormat& f) {
  const char* scheme = weight_scheme_name(f.scheme);
  std::string s = scheme ? scheme : "scheme#" + std::to_string(static_cast<int>(f.scheme));
  s += std::string(" ") + dtype_name(f.dtype);
  WeightFormat d = dense_format(f.dtype);
  d.scheme = f.scheme;
  if (is_quant_scheme(f.scheme)) d.group_n = 1;  // per output row unless said otherwise
  if (f.packing != d.packing && !(f.packing == WeightPacking::kBlock32Nibbles && f.dtype == DType::kI4))
    s += std::string(" packing=") + packing_name(f.packing);
  if (f.layout != d.layout) s += std::string(" layout=") + layout_name(f.layout);
  if (f.group_k != d.group_k) s += " group_k=" + std::to_string(f.group_k);
  if (f.group_n != d.group_n) s += " group_n=" + std::to_string(f.group_n);
  if (f.scale_dtype != d.scale_dtype) s += std::string(" scales=") + dtype_name(f.scale_dtype);
  if (f.zero != d.zero) s += std::string(" zero=") + zero_name(f.zero) + "(" + dtype_name(f.zero_dtype) + ")";
  if (f.act_order) s += " act_order";
  if (f.act_quant != d.act_quant) s += std::string(" act_quant=") + act_quant_name(f.act_quant);
  return s;
}

namespace {

// "<what>: weight format '<name>'", built only on the error paths (matmuls call the checks).
std::string prefix(const char* what, const WeightFormat& f) {
  return std::string(what) + ": weight format '" + weight_format_name(f) + "'";
}

}  // namespace

Status check_weight_format(const WeightFormat& f, const char* what) {
  switch (f.scheme) {
    case WeightScheme::kDense: {
      if (!is_dense_dtype(f.dtype)) return unsupported(prefix(what, f) + ": dense weights are f32, f16 or bf16");
      const WeightFormat d = dense_format(f.dtype);
      // scale_dtype and zero_dtype mean nothing without scales and zero points.
      if (f.packing != d.packing || f.layout != d.layout || f.group_k != d.group_k || f.group_n != d.group_n ||
          f.zero != d.zero || f.act_order != d.act_order || f.act_quant != d.act_quant)
        return invalid_argument(prefix(what, f) +
                                ": dense weights have no packing, groups, zero points, act order or activation quantization");
      return {};
    }
    case WeightScheme::kInt8:
    case WeightScheme::kInt4:
    case WeightScheme::kNf4:
    case WeightScheme::kFp8: {
      const bool four = f.scheme == WeightScheme::kInt4 || f.scheme == WeightScheme::kNf4;
      const DType want = four ? DType::kI4 : f.scheme == WeightScheme::kInt8 ? DType::kI8 : DType::kF8E4M3;
      if (f.dtype != want)
        return unsupported(prefix(what, f) + ": " + weight_scheme_name(f.scheme) + " codes are " + dtype_name(want));
      if (f.packing != (four ? WeightPacking::kBlock32Nibbles : WeightPacking::kNone))
        return invalid_argument(prefix(what, f) + ": " + (four ? "4-bit codes are packed block32_nibbles"
                                                                 : "8-bit codes are not packed"));
      if (f.layout != WeightLayout::kOutIn &&
          !(f.layout == WeightLayout::kOutInTiles8 && (f.scheme == WeightScheme::kInt4 || f.scheme == WeightScheme::kInt8) &&
            !f.act_order))
        return invalid_argument(prefix(what, f) + ": layout must be out_in (out_in_tiles8: int4 / int8 without act order only)");
      if (f.group_k < 0 || f.group_k % kQuantBlock != 0)
        return invalid_argument(prefix(what, f) + ": group_k must be 0 (all of k) or a multiple of 32");
      if (f.scheme == WeightScheme::kFp8 ? f.group_n < 0 : f.group_n != 1)
        return invalid_argument(prefix(what, f) + (f.scheme == WeightScheme::kFp8
                                                       ? ": group_n must be 0 (all of n) or positive"
                                                       : ": integer and nf4 scales are per output row (group_n = 1)"));
      if (f.scale_dtype != DType::kF32) return unsupported(prefix(what, f) + ": scales must be f32");
      const bool offsets_ok = f.scheme == WeightScheme::kInt8 || f.scheme == WeightScheme::kInt4;
      if (f.zero != ZeroPoint::kNone && (!offsets_ok || f.zero != ZeroPoint::kOffset || f.zero_dtype != DType::kF32))
        return invalid_argument(prefix(what, f) + ": zero points are f32 offsets of int8 / int4 only");
      if (f.act_order && !offsets_ok)
        return invalid_argument(prefix(what, f) + ": act order (k_perm) is for int8 / int4 (GPTQ) only");
      if (f.act_quant != ActivationQuant::kNone)
        return unsupported(prefix(what, f) + ": activation quantization is a kernel choice, not stored (use none)");
      return {};
    }
  }
  std::string known;
#define FRUGAL_WEIGHT_SCHEME_LIST_(Name, str) known += std::string(known.empty() ? "" : ", ") + str;
  FRUGAL_WEIGHT_SCHEMES(FRUGAL_WEIGHT_SCHEME_LIST_)
#undef FRUGAL_WEIGHT_SCHEME_LIST_
  return invalid_argument(prefix(what, f) + ": unknown weight scheme " + std::to_string(static_cast<int>(f.scheme)) +
                          " (known: " + known + ")");
}

Status check_weight_view(const WeightView& w, const char* what) {
  FRUGAL_RETURN_IF_ERROR(check_weight_format(w.format, what));
  if (!w.data) return invalid_argument(std::string(what) + ": w.data is null");
  switch (w.format.scheme) {
    case WeightScheme::kDense:
      if (w.scales || w.zeros || w.k_perm)
        return invalid_argument(prefix(what, w.format) + ": dense weights take no scales, zeros or k_perm");
      return {};
    case WeightScheme::kInt8:
    case WeightScheme::kInt4:
    case WeightScheme::kNf4:
    case WeightScheme::kFp8:
      if (!w.scales) return invalid_argument(prefix(what, w.format) + ": scales are null");
      if ((w.format.zero == ZeroPoint::kOffset) != (w.zeros != nullptr))
        return invalid_argument(prefix(what, w.format) + (w.zeros ? ": zeros given for a format without zero points"
                                                                  : ": zeros (offsets) are null"));
      if (w.format.act_order != (w.k_perm != nullptr))
        return invalid_argument(prefix(what, w.format) + (w.k_perm ? ": k_perm given without act_order"
                                                                   : ": act_order needs k_perm"));
      return {};
  }
  return {};  // unreachable: check_weight_format refused the scheme
}

}  // namespace frugal::ops

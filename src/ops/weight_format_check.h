// Names and consistency checks of weight formats (host side; ops/weight_format.h is the POD).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "ops/weight_format.h"

namespace frugal::ops {

// "dense bf16"; fields a scheme does not default are appended ("... group_k=128 zero=stored").
// A scheme outside FRUGAL_WEIGHT_SCHEMES prints as "scheme#<value>".
std::string weight_format_name(const WeightFormat& f);

// Whether f is a format frugal defines (any backend may still lack kernels for it): a known
// scheme with the dtype, packing, layout, groups and zero points that scheme allows. Errors
// name the format: invalid_argument for an unknown scheme or inconsistent fields, unsupported
// for a dtype the scheme does not take. `what` prefixes the message ("cpu matmul").
Status check_weight_format(const WeightFormat& f, const char* what);

// check_weight_format, plus the view's side tensors present exactly where its format needs them.
Status check_weight_view(const WeightView& w, const char* what);

}  // namespace frugal::ops

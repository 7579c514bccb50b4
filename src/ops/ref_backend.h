// A Backend that runs ops::ref on host memory: slow, exact (double accumulation), used as the
// oracle end to end (model tests) and while a fast backend lacks an op.
#pragma once

#include <memory>

#include "ops/backend.h"

namespace frugal::ops {

// `activation` is the dtype activations and the KV cache are stored in (f32, or bf16 to
// reproduce a bf16 device backend's roundings with exact arithmetic in between).
std::unique_ptr<Backend> make_ref_backend(DType activation = DType::kF32);

}  // namespace frugal::ops

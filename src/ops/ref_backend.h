// A Backend that runs ops::ref on host memory: slow, exact (double accumulation), used as the
// oracle end to end (model tests) and while a fast backend lacks an op.
#pragma once

#include <memory>

#include "ops/backend.h"

namespace frugal::ops {

std::unique_ptr<Backend> make_ref_backend();

}  // namespace frugal::ops

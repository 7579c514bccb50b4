// Backends by name for tests and tools: "ref", "cpu", and "cuda" when built with CUDA.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "ops/backend.h"

namespace frugal::testing {

Result<std::unique_ptr<ops::Backend>> make_backend_by_name(const std::string& name);

}  // namespace frugal::testing

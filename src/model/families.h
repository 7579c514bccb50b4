// The forward-pass families and their one registration point (used by Model::load).
#pragma once

#include <memory>

#include "model/family.h"

namespace frugal::model {

using FamilyFactory = Result<std::unique_ptr<ForwardFamily>> (*)(const FamilyInputs& in);

// Llama and Qwen2 (src/model/llama.cpp).
Result<std::unique_ptr<ForwardFamily>> make_llama_family(const FamilyInputs& in);

// DeepSeek-V2 and V3 (src/model/deepseek.cpp).
Result<std::unique_ptr<ForwardFamily>> make_deepseek_family(const FamilyInputs& in);

// nullptr when the family has no forward pass yet.
FamilyFactory family_factory(Family f);

}  // namespace frugal::model

// The forward-pass families and their one registration point (used by Model::load).
#pragma once

#include <memory>

#include "model/model.h"

namespace frugal::model {

// Everything a family needs to build itself; it takes ownership.
struct ModelParts {
  ModelConfig config;
  GenerationConfig generation;
  LoadOptions opts;
  ops::Backend* backend = nullptr;
  std::unique_ptr<WeightStore> weights;
  int32_t max_context = 0;
};

using FamilyFactory = Result<std::unique_ptr<Model>> (*)(ModelParts parts);

// Llama and Qwen2 (src/model/llama.cpp).
Result<std::unique_ptr<Model>> make_llama_model(ModelParts parts);

// nullptr when the family has no forward pass yet.
FamilyFactory family_factory(Family f);

}  // namespace frugal::model

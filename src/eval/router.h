// Router agreement (`frugal eval router`, docs/eval.md): how often a model's MoE routers pick the
// same experts as a reference model's (a quantized checkpoint against its bf16 original, or one
// device / activation dtype against another) on the same tokens. Each chunk of tokens runs
// teacher-forced through both models (one step each, the routers' taps on); per MoE layer and
// token the two top_k sets are compared: exact (the same set) and overlap (|A and B| / top_k).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "ops/backend.h"

namespace frugal::eval {

struct RouterLayerAgreement {
  int64_t layer = 0;
  int64_t decisions = 0;  // tokens routed
  int64_t exact = 0;      // tokens whose top_k sets are equal
  double overlap = 0;     // mean |A and B| / top_k
};

struct RouterReport {
  int64_t top_k = 0;
  int64_t n_chunks = 0;
  int64_t decisions = 0;
  int64_t exact = 0;
  double overlap = 0;
  std::vector<RouterLayerAgreement> layers;
};

// `tokens` in chunks of `ctx` (the last one shorter); both models load on `backend`. Errors: a
// model without MoE layers, or MoE shapes (layers, experts, top_k) that differ.
Result<RouterReport> run_router_agreement(const std::string& model_dir, const std::string& reference_dir,
                                          ops::Backend* backend, const std::vector<int32_t>& tokens, int32_t ctx,
                                          const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace frugal::eval

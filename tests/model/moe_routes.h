// Router decisions and their margins, for tests that compare a bf16 run's routes with an fp32
// oracle's. A route flips under rounding only where the fp32 decision was a near tie; these
// helpers say how near: for a token's f32 router logits (and V3's e_score_correction_bias),
// the chosen experts (as transformers' DeepseekV2Moe / DeepseekV3MoE choose them) and the
// smallest gap of any decision taken on the way:
//   greedy                 softmax scores: k-th minus (k+1)-th score
//   group_limited_greedy   group score = the group's best; topk_group-th minus next group score,
//                          then the expert gap inside the kept groups
//   noaux_tc               scores sigmoid(l) + bias; group score = the sum of the group's best two
// A flip of a decision with gap g needs the scores to move by g / 2 (two experts) or g / 4 (two
// groups of two), so a flip is explained by rounding when g <= 4 * max_e |s_bf16 - s_f32|.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/config.h"

namespace frugal::testing {

struct RouteDecision {
  std::vector<int> experts;  // sorted by id
  double margin = 0;         // the smallest gap of the decisions taken
  std::vector<double> score; // the ranking scores (softmax, or sigmoid + bias)
};

inline RouteDecision route_decision(const model::MoeConfig& m, const float* logits, const float* bias, int E) {
  RouteDecision r;
  r.score.resize(static_cast<size_t>(E));
  if (m.scoring_func == "sigmoid") {
    for (int e = 0; e < E; ++e) r.score[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
  } else {
    double mx = logits[0], sum = 0;
    for (int e = 1; e < E; ++e) mx = std::max(mx, static_cast<double>(logits[e]));
    for (int e = 0; e < E; ++e) sum += r.score[e] = std::exp(logits[e] - mx);
    for (auto& s : r.score) s /= sum;
  }
  std::vector<double> choice = r.score;
  if (bias)
    for (int e = 0; e < E; ++e) choice[e] += bias[e];
  const int K = static_cast<int>(m.num_experts_per_tok);
  std::vector<char> kept(static_cast<size_t>(E), 1);
  r.margin = INFINITY;
  if (m.topk_method != "greedy" && m.n_group > 1) {
    const int G = static_cast<int>(m.n_group), per = E / G;
    std::vector<double> gs(static_cast<size_t>(G));
    for (int g = 0; g < G; ++g) {
      std::vector<double> c(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::sort(c.rbegin(), c.rend());
      gs[g] = m.topk_method == "noaux_tc" ? c[0] + (per > 1 ? c[1] : 0.0) : c[0];
    }
    std::vector<int> order(static_cast<size_t>(G));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return gs[a] > gs[b]; });
    const int TG = static_cast<int>(m.topk_group);
    if (TG < G) r.margin = gs[order[TG - 1]] - gs[order[TG]];
    for (int j = TG; j < G; ++j)
      for (int e = 0; e < per; ++e) kept[order[j] * per + e] = 0;
  }
  std::vector<int> order;
  for (int e = 0; e < E; ++e)
    if (kept[e]) order.push_back(e);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return choice[a] > choice[b]; });
  if (K < static_cast<int>(order.size())) r.margin = std::min(r.margin, choice[order[K - 1]] - choice[order[K]]);
  r.experts.assign(order.begin(), order.begin() + K);
  std::sort(r.experts.begin(), r.experts.end());
  return r;
}

// max_e |a.score[e] - b.score[e]|: how far rounding moved this token's router scores.
inline double score_shift(const RouteDecision& a, const RouteDecision& b) {
  double d = 0;
  for (size_t e = 0; e < a.score.size(); ++e) d = std::max(d, std::fabs(a.score[e] - b.score[e]));
  return d;
}

}  // namespace frugal::testing

// ---- A teacher-forced DeepSeek run with the router taps, and the route comparison. ----
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "model/model.h"
#include "model/safetensors.h"

namespace frugal::testing {

struct TapsRun {
  model::ModelConfig config;
  std::vector<float> logits;                       // [T, vocab]
  std::map<int64_t, std::vector<float>> router_logits;  // MoE layer -> [T, E] f32
  std::map<int64_t, std::vector<float>> router_weights; // MoE layer -> [T, E], 0 where not chosen
};

// Teacher-forced forward of all of `ids` in one step on `backend`, taps on. Empty config.vocab_size on failure.
inline Status teacher_forced_run(const std::string& dir, ops::Backend* backend, const std::vector<int32_t>& ids, TapsRun& out) {
  const int32_t T = static_cast<int32_t>(ids.size());
  FRUGAL_ASSIGN_OR_RETURN(auto m, model::Model::load(dir, backend, {.max_logit_rows = T}));
  out.config = m->config();
  const auto& c = out.config;
  FRUGAL_ASSIGN_OR_RETURN(auto kv, model::KvStorage::create(backend, c, {.n_blocks = (T + 15) / 16, .block_size = 16}));
  std::vector<int32_t> pos(ids.size()), table;
  for (int32_t i = 0; i < T; ++i) pos[static_cast<size_t>(i)] = i;
  for (int32_t b = 0; b < (T + 15) / 16; ++b) table.push_back(b);
  const std::vector<int32_t> q_start = {0, T}, ctx = {T};
  out.logits.resize(static_cast<size_t>(T * c.vocab_size));
  m->set_taps_enabled(true);
  FRUGAL_RETURN_IF_ERROR(m->forward({.tokens = ids, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                                     .block_tables = table, .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                                     .slot_mapping = pos, .logits_rows = pos}, *kv, out.logits.data()));
  for (int64_t l = c.moe.first_k_dense_replace; l < c.num_hidden_layers; ++l) {
    const auto* lg = m->tap("blk." + std::to_string(l) + ".router_logits");
    const auto* w = m->tap("blk." + std::to_string(l) + ".router");
    if (!lg || !w) return internal_error("no router taps for layer " + std::to_string(l));
    out.router_logits[l] = *lg;
    out.router_weights[l] = *w;
  }
  return Status::ok();
}

// e_score_correction_bias of MoE layer `l` as f32, or empty when the model has none.
inline std::vector<float> router_bias(const std::string& dir, int64_t l) {
  auto st = model::SafetensorsSet::open_dir(dir);
  if (!st.is_ok()) return {};
  const model::TensorEntry* b = (*st)->find("model.layers." + std::to_string(l) + ".mlp.gate.e_score_correction_bias");
  if (!b) return {};
  std::vector<float> v(static_cast<size_t>(b->shape.numel()));
  convert_to_f32(b->dtype, b->data, v.data(), b->shape.numel());
  return v;
}

struct RouteComparison {
  int decisions = 0;          // (layer, token) pairs
  int flips = 0;              // routes that differ from the fp32 oracle's
  int unexplained = 0;        // flips whose fp32 gap exceeds 4 x the score shift
  int own_mismatch = 0;       // routes that differ from what the run's own f32 logits choose
  std::vector<char> flipped;  // per token: some layer flipped (explained)
  std::string report;
};

// Routes of `run` (bf16) against `oracle` (fp32) per MoE layer and token (see the top of the file).
inline RouteComparison compare_routes(const std::string& dir, const TapsRun& oracle, const TapsRun& run, int32_t T) {
  const auto& c = oracle.config;
  const int E = static_cast<int>(c.moe.n_routed_experts);
  RouteComparison r;
  r.flipped.assign(static_cast<size_t>(T), 0);
  char line[256];
  for (const auto& [l, lg0] : oracle.router_logits) {
    const auto bias = router_bias(dir, l);
    const auto& lg1 = run.router_logits.at(l);
    const auto& w1 = run.router_weights.at(l);
    for (int32_t t = 0; t < T; ++t) {
      ++r.decisions;
      const auto d0 = route_decision(c.moe, lg0.data() + t * E, bias.empty() ? nullptr : bias.data(), E);
      const auto d1 = route_decision(c.moe, lg1.data() + t * E, bias.empty() ? nullptr : bias.data(), E);
      std::vector<int> got;
      for (int e = 0; e < E; ++e)
        if (w1[static_cast<size_t>(t * E + e)] != 0.0f) got.push_back(e);
      if (got != d1.experts) {
        ++r.own_mismatch;
        std::snprintf(line, sizeof line, "  layer %lld token %d: routed differently from its own f32 logits\n",
                      static_cast<long long>(l), t);
        r.report += line;
      }
      if (got == d0.experts) continue;
      ++r.flips;
      const double shift = score_shift(d0, d1);
      const bool explained = d0.margin <= 4 * shift;
      if (explained) r.flipped[static_cast<size_t>(t)] = 1;
      else ++r.unexplained;
      std::snprintf(line, sizeof line, "  layer %lld token %d: route flip, fp32 gap %.3g, bf16 score shift %.3g: %s\n",
                    static_cast<long long>(l), t, d0.margin, shift, explained ? "a near tie" : "NOT explained by rounding");
      r.report += line;
    }
  }
  return r;
}

}  // namespace frugal::testing

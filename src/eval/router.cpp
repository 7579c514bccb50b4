#include "eval/router.h"

#include <algorithm>

#include "model/model.h"

namespace frugal::eval {
namespace {

struct Loaded {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<model::KvStorage> kv;
};

Result<Loaded> load(const std::string& dir, ops::Backend* backend, int32_t ctx) {
  Loaded l;
  FRUGAL_ASSIGN_OR_RETURN(l.model, model::Model::load(dir, backend, {.max_batch_tokens = ctx, .max_logit_rows = 1}));
  const auto& c = l.model->config();
  if (c.moe.n_routed_experts <= 0 || c.moe.first_k_dense_replace >= c.num_hidden_layers)
    return invalid_argument(dir + ": not a mixture-of-experts model (no routed experts): nothing to compare");
  const int32_t bs = 16;
  FRUGAL_ASSIGN_OR_RETURN(l.kv, model::KvStorage::create(backend, c, {.n_blocks = (ctx + bs - 1) / bs, .block_size = bs}));
  l.model->set_taps_enabled(true);
  return l;
}

// The chosen experts (sorted) of each token of MoE layer `layer` after a forward.
Result<std::vector<std::vector<int32_t>>> routes(const model::Model& m, int64_t layer, int32_t n) {
  const int64_t E = m.config().moe.n_routed_experts;
  const auto* w = m.tap("blk." + std::to_string(layer) + ".router");
  if (!w) return internal_error("no router tap for layer " + std::to_string(layer));
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
  for (int32_t t = 0; t < n; ++t)
    for (int64_t e = 0; e < E; ++e)
      if ((*w)[static_cast<size_t>(t * E + e)] != 0.0f) out[static_cast<size_t>(t)].push_back(static_cast<int32_t>(e));
  return out;
}

}  // namespace

Result<RouterReport> run_router_agreement(const std::string& model_dir, const std::string& reference_dir,
                                          ops::Backend* backend, const std::vector<int32_t>& tokens, int32_t ctx,
                                          const std::function<void(int64_t, int64_t)>& progress) {
  if (ctx <= 0) return invalid_argument("router agreement: --ctx must be positive");
  if (tokens.empty()) return invalid_argument("router agreement: no tokens");
  FRUGAL_ASSIGN_OR_RETURN(Loaded a, load(model_dir, backend, ctx));
  FRUGAL_ASSIGN_OR_RETURN(Loaded b, load(reference_dir, backend, ctx));
  const auto &ca = a.model->config(), &cb = b.model->config();
  if (ca.num_hidden_layers != cb.num_hidden_layers || ca.moe.n_routed_experts != cb.moe.n_routed_experts ||
      ca.moe.num_experts_per_tok != cb.moe.num_experts_per_tok || ca.moe.first_k_dense_replace != cb.moe.first_k_dense_replace ||
      ca.moe.moe_layer_freq != cb.moe.moe_layer_freq)
    return invalid_argument(model_dir + " and " + reference_dir + ": different MoE shapes (layers, experts, top_k), cannot compare routers");
  for (int32_t tkn : tokens)
    if (tkn < 0 || tkn >= std::min(ca.vocab_size, cb.vocab_size))
      return out_of_range("router agreement: token id " + std::to_string(tkn) + " outside the vocabulary");
  RouterReport r;
  r.top_k = ca.moe.num_experts_per_tok;
  const int64_t n_chunks = (static_cast<int64_t>(tokens.size()) + ctx - 1) / ctx;
  r.n_chunks = n_chunks;
  std::vector<RouterLayerAgreement> acc;
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    const int64_t begin = ch * ctx;
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(ctx, static_cast<int64_t>(tokens.size()) - begin));
    std::vector<int32_t> ids(tokens.begin() + begin, tokens.begin() + begin + n), pos(static_cast<size_t>(n)), table;
    for (int32_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = i;
    for (int32_t blk = 0; blk < (n + 15) / 16; ++blk) table.push_back(blk);
    const std::vector<int32_t> q_start = {0, n}, ctx_len = {n}, rows = {n - 1};
    std::vector<float> logits(static_cast<size_t>(std::max(ca.vocab_size, cb.vocab_size)));
    for (Loaded* l : {&a, &b})
      FRUGAL_RETURN_IF_ERROR(l->model->forward({.tokens = ids, .positions = pos, .q_start = q_start, .ctx_len = ctx_len,
                                                .block_tables = table, .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                                                .slot_mapping = pos, .logits_rows = rows}, *l->kv, logits.data()));
    for (int64_t layer = 0; layer < ca.num_hidden_layers; ++layer) {
      if (!a.model->tap("blk." + std::to_string(layer) + ".router")) continue;  // a dense layer
      FRUGAL_ASSIGN_OR_RETURN(auto ra, routes(*a.model, layer, n));
      FRUGAL_ASSIGN_OR_RETURN(auto rb, routes(*b.model, layer, n));
      auto it = std::find_if(acc.begin(), acc.end(), [&](const RouterLayerAgreement& x) { return x.layer == layer; });
      if (it == acc.end()) it = acc.insert(acc.end(), RouterLayerAgreement{.layer = layer});
      for (int32_t t = 0; t < n; ++t) {
        const auto &x = ra[static_cast<size_t>(t)], &y = rb[static_cast<size_t>(t)];
        std::vector<int32_t> both;
        std::set_intersection(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(both));
        ++it->decisions;
        it->exact += x == y ? 1 : 0;
        it->overlap += static_cast<double>(both.size()) / static_cast<double>(r.top_k);
      }
    }
    if (progress) progress(ch + 1, n_chunks);
  }
  double overlap_sum = 0;
  for (auto& l : acc) {
    r.decisions += l.decisions;
    r.exact += l.exact;
    overlap_sum += l.overlap;
    l.overlap = l.decisions ? l.overlap / static_cast<double>(l.decisions) : 0;
  }
  r.overlap = r.decisions ? overlap_sum / static_cast<double>(r.decisions) : 0;
  r.layers = std::move(acc);
  return r;
}

}  // namespace frugal::eval

#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/log.h"
#include "eval/kld.h"
#include "eval/logits_file.h"

namespace frugal::eval {
namespace fs = std::filesystem;

Result<ChunkPlan> plan_chunks(int64_t n_tokens, int32_t ctx, int32_t stride, const std::string& source) {
  if (ctx < 4) return invalid_argument("--ctx " + std::to_string(ctx) + ": must be at least 4");
  if (stride == 0) stride = ctx;
  if (stride < 0 || stride > ctx || (stride < ctx && stride > ctx / 2))
    return invalid_argument("--stride " + std::to_string(stride) + ": must be the context (" + std::to_string(ctx) +
                            ", non-overlapping) or at most half of it (" + std::to_string(ctx / 2) +
                            "), so that no token is scored twice");
  if (n_tokens < ctx)
    return invalid_argument(source + ": the text is " + std::to_string(n_tokens) +
                            " tokens, shorter than one chunk of --ctx " + std::to_string(ctx) + " tokens");
  ChunkPlan p{.ctx = ctx, .stride = stride, .first = stride == ctx ? ctx / 2 : ctx - 1 - stride, .n_chunks = 0};
  p.n_chunks = (n_tokens - ctx) / stride + 1;
  return p;
}

std::vector<int32_t> chunk_input(std::span<const int32_t> tokens, const ChunkPlan& plan, int64_t chunk, int32_t bos) {
  const auto b = tokens.begin() + plan.start(chunk);
  std::vector<int32_t> in(b, b + plan.ctx);
  if (bos >= 0) in[0] = bos;
  return in;
}

Result<ScoringModel> load_scoring_model(const std::string& model_dir, const std::string& device, int32_t threads,
                                        int32_t ctx) {
  ScoringModel m;
  m.ctx = ctx;
  FRUGAL_ASSIGN_OR_RETURN(m.backend, runtime::make_backend(device, threads));
  constexpr int32_t kBlock = 16;
  const int32_t n_blocks = (ctx + kBlock - 1) / kBlock;
  model::LoadOptions lo{.max_batch_tokens = ctx, .max_seqs = 1, .max_logit_rows = ctx,
                        .max_context = n_blocks * kBlock, .block_size = kBlock};
  FRUGAL_ASSIGN_OR_RETURN(m.model, model::Model::load(model_dir, m.backend.backend.get(), lo));
  // Allowed (dynamic RoPE scaling is made for it), but rarely meant.
  if (m.model->config().max_position_embeddings < ctx)
    FRUGAL_LOG_WARN("eval: --ctx {} is longer than {}'s max_position_embeddings ({})", ctx, model_dir,
                    m.model->config().max_position_embeddings);
  FRUGAL_ASSIGN_OR_RETURN(m.kv, model::KvStorage::create(m.backend.backend.get(), m.model->config(),
                                                         {.n_blocks = n_blocks, .block_size = kBlock}));
  return m;
}

Status score_sequence(ScoringModel& m, std::span<const int32_t> tokens, int32_t first, const RowFn& on_row) {
  const auto n = static_cast<int32_t>(tokens.size());
  if (n > m.ctx || n < 2 || first < 0 || first >= n - 1)
    return internal_error("score_sequence: " + std::to_string(n) + " tokens, first row " + std::to_string(first));
  const int32_t bs = m.kv->block_size();
  std::vector<int32_t> pos(static_cast<size_t>(n)), slots(static_cast<size_t>(n)), rows;
  std::vector<int32_t> table(static_cast<size_t>((n + bs - 1) / bs));
  for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<int32_t>(b);
  for (int32_t i = 0; i < n; ++i) {
    pos[static_cast<size_t>(i)] = i;
    slots[static_cast<size_t>(i)] = i;  // blocks 0.. in order: slot = position
  }
  for (int32_t j = first; j < n - 1; ++j) rows.push_back(j);
  const int32_t q_start[2] = {0, n};
  const int32_t ctx_len[1] = {n};
  model::ForwardBatch fb{.tokens = tokens, .positions = pos, .q_start = q_start, .ctx_len = ctx_len,
                         .block_tables = table, .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                         .slot_mapping = slots, .logits_rows = rows};
  const auto vocab = static_cast<size_t>(m.model->config().vocab_size);
  std::vector<float> logits(rows.size() * vocab);
  FRUGAL_RETURN_IF_ERROR(m.model->forward(fb, *m.kv, logits.data()));
  std::vector<float> lp;
  for (size_t r = 0; r < rows.size(); ++r) {
    log_softmax(std::span<const float>(logits.data() + r * vocab, vocab), lp);
    FRUGAL_RETURN_IF_ERROR(on_row(rows[r], lp));
  }
  return Status::ok();
}

Result<PplReport> run_ppl(ScoringModel& m, std::span<const int32_t> tokens, int32_t bos, const ChunkPlan& plan,
                          const PplOptions& opts, const ChunkProgress& progress) {
  PplReport rep{.plan = plan, .n_tokens = static_cast<int64_t>(tokens.size()), .bos = bos};
  std::unique_ptr<LogitsWriter> writer;
  const int32_t vocab = static_cast<int32_t>(m.model->config().vocab_size);
  if (!opts.save_logits.empty()) {
    if (opts.top_k <= 0 || opts.top_k > vocab)
      return invalid_argument("--top-k " + std::to_string(opts.top_k) + ": must be in [1, vocab " + std::to_string(vocab) + "]");
    LogitsHeader h{.model_hash = opts.model_hash, .vocab = vocab, .ctx = plan.ctx, .stride = plan.stride,
                   .top_k = opts.top_k, .first = plan.first, .bos = bos, .n_chunks = plan.n_chunks,
                   .n_tokens = rep.n_tokens, .n_scored = plan.n_chunks * plan.scored_per_chunk(), .tokens_hash = 0};
    std::vector<int32_t> ids(tokens.begin(), tokens.end());
    FRUGAL_ASSIGN_OR_RETURN(writer, LogitsWriter::open(opts.save_logits, h, ids));
  }
  std::vector<double> nll;
  for (int64_t c = 0; c < plan.n_chunks; ++c) {
    const std::vector<int32_t> in = chunk_input(tokens, plan, c, bos);
    double chunk_sum = 0;
    FRUGAL_RETURN_IF_ERROR(score_sequence(m, in, plan.first, [&](int32_t j, std::span<const float> lp) -> Status {
      const int32_t next = in[static_cast<size_t>(j) + 1];
      rep.logprobs.push_back(lp[static_cast<size_t>(next)]);
      nll.push_back(-static_cast<double>(lp[static_cast<size_t>(next)]));
      chunk_sum += nll.back();
      if (writer) return writer->add(compress_topk(lp, next, opts.top_k));
      return Status::ok();
    }));
    rep.chunk_ppl.push_back(std::exp(chunk_sum / static_cast<double>(plan.scored_per_chunk())));
    if (progress) progress(c + 1, plan.n_chunks);
  }
  if (writer) FRUGAL_RETURN_IF_ERROR(writer->close());
  rep.nll = mean_se(nll);
  rep.ppl = std::exp(rep.nll.mean);
  rep.ppl_se = rep.ppl * rep.nll.se;
  return rep;
}

Result<KldReport> run_kld(ScoringModel& m, const LogitsFile& ref, const std::string& ref_path,
                          std::vector<KldSample>* samples_out, const ChunkProgress& progress) {
  const LogitsHeader& h = ref.header;
  const int64_t vocab = m.model->config().vocab_size;
  if (vocab != h.vocab)
    return invalid_argument(ref_path + ": the reference has a vocabulary of " + std::to_string(h.vocab) +
                            " tokens, this model " + std::to_string(vocab) + ": not the same tokenizer");
  if (h.ctx > m.ctx) return internal_error("run_kld: model loaded for a shorter context than the reference's");
  FRUGAL_ASSIGN_OR_RETURN(ChunkPlan plan, plan_chunks(h.n_tokens, h.ctx, h.stride, ref_path));
  if (plan.first != h.first || plan.n_chunks != h.n_chunks || plan.n_chunks * plan.scored_per_chunk() != h.n_scored)
    return corrupt(ref_path + ": the header's chunk layout (first " + std::to_string(h.first) + ", " +
                   std::to_string(h.n_chunks) + " chunks, " + std::to_string(h.n_scored) +
                   " records) does not follow from its ctx/stride/tokens");
  std::vector<KldSample> samples;
  samples.reserve(static_cast<size_t>(h.n_scored));
  size_t r = 0;
  for (int64_t c = 0; c < plan.n_chunks; ++c) {
    const std::vector<int32_t> in = chunk_input(ref.tokens, plan, c, h.bos);
    FRUGAL_RETURN_IF_ERROR(score_sequence(m, in, plan.first, [&](int32_t j, std::span<const float> lp) -> Status {
      const TopK& t = ref.records[r];
      if (t.next != in[static_cast<size_t>(j) + 1])
        return corrupt(ref_path + ": record " + std::to_string(r) + " is for token " + std::to_string(t.next) +
                       ", the text has " + std::to_string(in[static_cast<size_t>(j) + 1]) + " there");
      samples.push_back(kld_sample(t, lp));
      ++r;
      return Status::ok();
    }));
    if (progress) progress(c + 1, plan.n_chunks);
  }
  KldReport rep = summarize_kld(samples);
  if (samples_out) *samples_out = std::move(samples);
  return rep;
}

uint64_t model_hash(const std::string& model_dir) {
  std::string dir = model_dir;
  std::string config = dir + "/config.json";
  if (fs::is_regular_file(dir)) {
    config = dir;
    dir = fs::path(dir).parent_path().string();
  }
  std::ifstream f(config, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string c = ss.str();
  uint64_t h = fnv1a64(c.data(), c.size());
  std::vector<std::pair<std::string, uint64_t>> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") files.emplace_back(e.path().filename().string(), e.file_size(ec));
  std::sort(files.begin(), files.end());
  for (const auto& [name, size] : files) {
    h = fnv1a64(name.data(), name.size(), h);
    h = fnv1a64(&size, sizeof(size), h);
  }
  return h;
}

}  // namespace frugal::eval

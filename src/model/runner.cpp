#include "model/runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "model/rope.h"

namespace frugal::model {
namespace {

int32_t max_ctx_of(const ForwardBatch& b) { return *std::max_element(b.ctx_len.begin(), b.ctx_len.end()); }

int64_t align256(int64_t n) { return (n + 255) / 256 * 256; }

// dst = the batch and its sampling parameters (vector assigns: no allocation once warm).
void copy_batch(const ForwardBatch& b, const SamplingBatch& s, StepBatch& dst) {
  dst.tokens.assign(b.tokens.begin(), b.tokens.end());
  dst.positions.assign(b.positions.begin(), b.positions.end());
  dst.q_start.assign(b.q_start.begin(), b.q_start.end());
  dst.ctx_len.assign(b.ctx_len.begin(), b.ctx_len.end());
  dst.block_tables.assign(b.block_tables.begin(), b.block_tables.end());
  dst.max_blocks_per_seq = b.max_blocks_per_seq;
  dst.slot_mapping.assign(b.slot_mapping.begin(), b.slot_mapping.end());
  dst.logits_rows.assign(b.logits_rows.begin(), b.logits_rows.end());
  dst.temperature.assign(s.temperature.begin(), s.temperature.end());
  dst.top_k.assign(s.top_k.begin(), s.top_k.end());
  dst.top_p.assign(s.top_p.begin(), s.top_p.end());
  dst.seeds.assign(s.seeds.begin(), s.seeds.end());
}

// Pads a decode batch of n one-token sequences (logits row i = token i) to `bucket`
// sequences with block tables `width` wide. Padded sequences hold one token at position 0,
// write no KV (slot -1), read block 0 (ctx 1) and sample greedily; their ids are dropped.
void pad_decode_batch(StepBatch& b, int32_t bucket, int32_t width) {
  const int32_t n = b.n_tokens(), old = b.max_blocks_per_seq;
  const auto nb = static_cast<size_t>(bucket);
  b.tokens.resize(nb, 0);
  b.positions.resize(nb, 0);
  b.slot_mapping.resize(nb, -1);
  b.q_start.resize(nb + 1);
  for (int32_t i = 0; i <= bucket; ++i) b.q_start[static_cast<size_t>(i)] = i;
  b.ctx_len.resize(nb, 1);
  // Re-stride the tables from `old` to `width` entries per row, last row first (width >= old,
  // so no row overwrites one not yet moved).
  b.block_tables.resize(nb * static_cast<size_t>(width), 0);
  int32_t* t = b.block_tables.data();
  for (int32_t i = n - 1; i >= 0; --i) {
    int32_t* row = t + static_cast<int64_t>(i) * width;
    std::memmove(row, t + static_cast<int64_t>(i) * old, static_cast<size_t>(old) * sizeof(int32_t));
    std::fill(row + old, row + width, 0);
  }
  std::fill(t + static_cast<int64_t>(n) * width, t + static_cast<int64_t>(bucket) * width, 0);
  b.max_blocks_per_seq = width;
  b.logits_rows.resize(nb);
  for (int32_t i = 0; i < bucket; ++i) b.logits_rows[static_cast<size_t>(i)] = i;
  b.temperature.resize(nb, 0.f);
  b.top_k.resize(nb, 0);
  b.top_p.resize(nb, 1.f);
  b.seeds.resize(nb, 0);
}

}  // namespace

ModelRunner::ModelRunner(ops::Backend* backend, const ModelConfig& config, const RunnerLimits& limits,
                         std::unique_ptr<ForwardFamily> family)
    : backend_(backend), config_(config), limits_(limits), family_(std::move(family)), taps_(backend) {}

Result<std::unique_ptr<ModelRunner>> ModelRunner::create(ops::Backend* backend, const ModelConfig& config,
                                                         const RunnerLimits& limits,
                                                         std::unique_ptr<ForwardFamily> family) {
  if (limits.max_batch_tokens <= 0 || limits.max_seqs <= 0 || limits.max_logit_rows <= 0 || limits.block_size <= 0 ||
      limits.max_context <= 0)
    return invalid_argument("runner limits: max_batch_tokens, max_seqs, max_logit_rows, max_context and block_size must be positive");
  if (config.vocab_size <= 0) return invalid_argument("runner: vocab_size must be positive");
  auto r = std::unique_ptr<ModelRunner>(new ModelRunner(backend, config, limits, std::move(family)));
  FRUGAL_RETURN_IF_ERROR(r->allocate());
  return r;
}

int64_t ModelRunner::table_capacity() const {
  return static_cast<int64_t>(limits_.max_seqs) * ((limits_.max_context + limits_.block_size - 1) / limits_.block_size);
}

// Room in ints_ (int32 units) for one step's packed inputs: tokens, positions, slots,
// logits rows, q_start, ctx_len, block tables, sampling parameters and ids, each 16-byte aligned.
int64_t ModelRunner::ints_capacity() const {
  const int64_t T = limits_.max_batch_tokens, R = limits_.max_logit_rows, S = limits_.max_seqs;
  return 3 * T + R + (S + 1) + S + table_capacity() + 7 * R + 12 * 4;
}

// One arena: the family's buffers in the order it asked, then logits, step inputs, inv_freq;
// each 256-byte aligned.
Status ModelRunner::allocate() {
  const std::vector<BufferRequest> req = family_->workspace(limits_, backend_->activation_dtype());
  const int64_t n_rot = rotary_dim(config_) / 2;
  std::vector<int64_t> sizes;
  for (const auto& r : req) {
    if (r.bytes < 0) return internal_error("runner: workspace buffer '" + r.name + "' has negative size");
    sizes.push_back(r.bytes);
  }
  sizes.push_back(static_cast<int64_t>(limits_.max_logit_rows) * config_.vocab_size * 4);
  sizes.push_back(ints_capacity() * 4);
  sizes.push_back(std::max<int64_t>(n_rot, 0) * 4);
  int64_t total = 0;
  for (int64_t s : sizes) total += align256(s);
  FRUGAL_ASSIGN_OR_RETURN(arena_, ops::DeviceBuffer::create(backend_, static_cast<size_t>(total)));
  workspace_bytes_ = total;
  std::vector<void*> ptrs;
  uint8_t* p = arena_.as<uint8_t>();
  for (int64_t s : sizes) {
    ptrs.push_back(p);
    p += align256(s);
  }
  const size_t nf = req.size();
  family_->bind_workspace(std::span<void* const>(ptrs.data(), nf));
  logits_ = static_cast<float*>(ptrs[nf]);
  ints_ = static_cast<int32_t*>(ptrs[nf + 1]);
  inv_freq_ = static_cast<float*>(ptrs[nf + 2]);
  if (n_rot <= 0) return Status::ok();
  inv_freq_host_ = rope_inv_freq(config_, 0);
  return backend_->upload(inv_freq_, inv_freq_host_.data(), inv_freq_host_.size() * sizeof(float));
}

Status ModelRunner::validate(const ForwardBatch& b, const KvStorage& kv) const {
  auto bad = [](const std::string& m) { return invalid_argument("forward batch: " + m); };
  const int64_t n = b.n_tokens(), n_seqs = b.n_seqs();
  const RunnerLimits& L = limits_;
  if (n <= 0) return bad("no tokens");
  if (n > L.max_batch_tokens) return bad("n_tokens " + std::to_string(n) + " exceeds max_batch_tokens " + std::to_string(L.max_batch_tokens));
  if (n_seqs <= 0 || n_seqs > L.max_seqs) return bad("n_seqs " + std::to_string(n_seqs) + " not in [1, max_seqs " + std::to_string(L.max_seqs) + "]");
  if (static_cast<int64_t>(b.positions.size()) != n || static_cast<int64_t>(b.slot_mapping.size()) != n)
    return bad("positions and slot_mapping must have n_tokens entries");
  if (static_cast<int64_t>(b.q_start.size()) != n_seqs + 1 || b.q_start[0] != 0 || b.q_start[static_cast<size_t>(n_seqs)] != n)
    return bad("q_start must have n_seqs + 1 entries from 0 to n_tokens");
  if (b.logits_rows.size() > static_cast<size_t>(L.max_logit_rows))
    return bad("logits_rows has " + std::to_string(b.logits_rows.size()) + " entries, max_logit_rows is " + std::to_string(L.max_logit_rows));
  if (b.max_blocks_per_seq <= 0 || b.block_tables.size() != static_cast<size_t>(n_seqs * b.max_blocks_per_seq))
    return bad("block_tables must hold n_seqs * max_blocks_per_seq entries");
  if (static_cast<int64_t>(b.block_tables.size()) > table_capacity()) return bad("block_tables larger than the model's preallocated capacity");
  for (int32_t t : b.tokens)
    if (t < 0 || t >= config_.vocab_size) return bad("token id " + std::to_string(t) + " out of range [0, vocab_size " + std::to_string(config_.vocab_size) + ")");
  for (int32_t r : b.logits_rows)
    if (r < 0 || r >= n) return bad("logits_rows entry " + std::to_string(r) + " out of range");
  const int64_t n_slots = static_cast<int64_t>(kv.n_blocks()) * kv.block_size();
  for (int64_t i = 0; i < n; ++i) {
    if (b.positions[static_cast<size_t>(i)] < 0) return bad("negative position");
    if (b.slot_mapping[static_cast<size_t>(i)] >= n_slots) return bad("slot_mapping entry " + std::to_string(b.slot_mapping[static_cast<size_t>(i)]) + " past the KV storage");
  }
  for (int64_t s = 0; s < n_seqs; ++s) {
    const int32_t nq = b.q_start[static_cast<size_t>(s + 1)] - b.q_start[static_cast<size_t>(s)];
    const int32_t ctx = b.ctx_len[static_cast<size_t>(s)];
    if (nq < 0 || ctx < nq) return bad("sequence " + std::to_string(s) + ": ctx_len smaller than its new tokens");
    if (ctx > L.max_context) return bad("sequence " + std::to_string(s) + ": ctx_len " + std::to_string(ctx) + " exceeds the context " + std::to_string(L.max_context));
    const int64_t used = (ctx + kv.block_size() - 1) / kv.block_size();
    if (used > b.max_blocks_per_seq) return bad("sequence " + std::to_string(s) + ": block table too short for ctx_len");
    // Every layer windowed (--kv-window): blocks no query of the sequence sees (no sink, wholly
    // behind the first query's window) may have gone back to the pool (-1, kv::kNoBlock).
    int64_t sink_blocks = used, window_block = 0;
    if (config_.use_sliding_window && config_.max_window_layers == 0 && config_.sliding_window > 0) {
      const int64_t lo = std::max<int64_t>(0, int64_t{ctx} - nq - config_.sliding_window + 1);
      sink_blocks = (std::min<int64_t>(config_.attention_sink_tokens, lo) + kv.block_size() - 1) / kv.block_size();
      window_block = lo / kv.block_size();
    }
    for (int64_t j = 0; j < used; ++j) {
      const int32_t blk = b.block_tables[static_cast<size_t>(s * b.max_blocks_per_seq + j)];
      if (blk == -1 && j >= sink_blocks && j < window_block) continue;
      if (blk < 0 || blk >= kv.n_blocks()) return bad("sequence " + std::to_string(s) + ": block id " + std::to_string(blk) + " out of range");
    }
  }
  return {};
}

// The padded batch size a decode step replays at, or 0 to run it eagerly.
int32_t ModelRunner::graph_bucket(const ForwardBatch& b) const {
  if (!graphs_enabled_ || taps_.enabled() || !backend_->supports_graphs()) return 0;
  const int32_t n = b.n_tokens();
  if (n != b.n_seqs() || static_cast<int32_t>(b.logits_rows.size()) != n) return 0;
  for (int32_t i = 0; i < n; ++i)
    if (b.logits_rows[static_cast<size_t>(i)] != i) return 0;
  const int32_t limit = std::min({limits_.max_seqs, limits_.max_batch_tokens, limits_.max_logit_rows});
  if (n > limit) return 0;
  static constexpr int32_t kBuckets[] = {1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256,
                                         320, 384, 448, 512};
  for (int32_t c : kBuckets)
    if (c >= n) return std::min(c, limit);
  return 0;
}

// The block-table width a graph of this batch is recorded at: a power of two from 16, capped
// at the context's blocks, never narrower than the batch's tables.
int32_t ModelRunner::graph_table_width(const ForwardBatch& b, int32_t block_size) const {
  const int32_t cap_blocks = (limits_.max_context + block_size - 1) / block_size;
  int32_t mb = 16;
  while (mb < b.max_blocks_per_seq) mb *= 2;
  mb = std::min(mb, cap_blocks);
  return std::max(mb, b.max_blocks_per_seq);
}

Status ModelRunner::forward(const ForwardBatch& b, KvStorage& kv, float* logits) {
  FRUGAL_RETURN_IF_ERROR(validate(b, kv));
  FRUGAL_ASSIGN_OR_RETURN(StepBuffers sb, upload_step(b, nullptr, max_ctx_of(b)));
  FRUGAL_RETURN_IF_ERROR(family_->forward(sb.ctx, kv));
  ++eager_steps_;
  const int64_t rows = sb.ctx.n_logits_rows;
  if (rows == 0) return backend_->synchronize();
  FRUGAL_RETURN_IF_ERROR(backend_->download(logits, logits_, static_cast<size_t>(rows * config_.vocab_size) * sizeof(float)));
  return backend_->synchronize();
}

Status ModelRunner::forward_sample(StepBatch& batch, KvStorage& kv, int32_t* ids, std::span<const int32_t> host_rows,
                                   float* host_logits) {
  return sample_step(batch.view(), batch.sampling(), &batch, kv, ids, host_rows, host_logits);
}

Status ModelRunner::forward_sample(const ForwardBatch& batch, KvStorage& kv, const SamplingBatch& sampling, int32_t* ids,
                                   std::span<const int32_t> host_rows, float* host_logits) {
  return sample_step(batch, sampling, nullptr, kv, ids, host_rows, host_logits);
}

// `b` and `s` view `*owner` when owner is set: padding it in place invalidates them.
Status ModelRunner::sample_step(const ForwardBatch& b, const SamplingBatch& s, StepBatch* owner, KvStorage& kv,
                                int32_t* ids, std::span<const int32_t> host_rows, float* host_logits) {
  const auto t0 = std::chrono::steady_clock::now();
  auto prepared = [&] { prepare_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  FRUGAL_RETURN_IF_ERROR(validate(b, kv));
  const size_t R = b.logits_rows.size();
  if (s.temperature.size() != R || s.top_k.size() != R || s.top_p.size() != R || s.seeds.size() != R)
    return invalid_argument("forward_sample: sampling arrays must have one entry per logits row (" + std::to_string(R) + ")");
  for (int32_t h : host_rows)
    if (h < 0 || static_cast<size_t>(h) >= R) return invalid_argument("forward_sample: host row " + std::to_string(h) + " out of range");
  const int32_t bucket = graph_bucket(b);
  if (bucket == 0) {
    FRUGAL_ASSIGN_OR_RETURN(StepBuffers sb, upload_step(b, &s, max_ctx_of(b)));
    prepared();
    FRUGAL_RETURN_IF_ERROR(family_->forward(sb.ctx, kv));
    FRUGAL_RETURN_IF_ERROR(enqueue_sample(sb));
    ++eager_steps_;
    return finish_sample(sb, R, ids, host_rows, host_logits);
  }
  const int32_t bs = kv.block_size();
  const int32_t width = graph_table_width(b, bs);
  StepBatch* pb = owner;
  if (pb == nullptr) {
    copy_batch(b, s, padded_);
    pb = &padded_;
  }
  pad_decode_batch(*pb, bucket, width);
  const SamplingBatch ps = pb->sampling();
  FRUGAL_ASSIGN_OR_RETURN(StepBuffers sb, upload_step(pb->view(), &ps, width * bs));
  prepared();
  const uint64_t key = (static_cast<uint64_t>(bucket) << 32) | static_cast<uint32_t>(width);
  // Captures by value: a step of the same key has the same device pointers.
  auto record = [this, sb, kvp = &kv]() -> Status {
    FRUGAL_RETURN_IF_ERROR(family_->forward(sb.ctx, *kvp));
    return enqueue_sample(sb);
  };
  if (backend_->has_graph(key)) {
    FRUGAL_RETURN_IF_ERROR(backend_->replay_graph(key));
    ++graph_replays_;
  } else {
    // First step of this shape: run it eagerly (which also grows any scratch the ops need),
    // then record it for the next steps of the same shape.
    FRUGAL_RETURN_IF_ERROR(record());
    ++eager_steps_;
    FRUGAL_RETURN_IF_ERROR(backend_->capture_graph(key, record));
  }
  return finish_sample(sb, R, ids, host_rows, host_logits);
}

Status ModelRunner::enqueue_sample(const StepBuffers& sb) {
  if (sb.ctx.n_logits_rows == 0) return Status::ok();
  return backend_->sample(ops::SampleParams{
      .logits = logits_, .logits_dtype = DType::kF32, .ld_logits = config_.vocab_size,
      .n_rows = static_cast<int32_t>(sb.ctx.n_logits_rows), .vocab = static_cast<int32_t>(config_.vocab_size),
      .temperature = sb.temperature, .top_k = sb.top_k, .top_p = sb.top_p, .seeds = sb.seeds, .out_ids = sb.ids});
}

// One copy of the ids (the first n_rows of the step), plus the logits rows sampled on the host.
Status ModelRunner::finish_sample(const StepBuffers& sb, size_t n_rows, int32_t* ids, std::span<const int32_t> host_rows,
                                  float* host_logits) {
  if (n_rows > 0) FRUGAL_RETURN_IF_ERROR(backend_->download(ids, sb.ids, n_rows * sizeof(int32_t)));
  const int64_t vocab = config_.vocab_size;
  for (size_t i = 0; i < host_rows.size(); ++i)
    FRUGAL_RETURN_IF_ERROR(backend_->download(host_logits + static_cast<int64_t>(i) * vocab,
                                              logits_ + static_cast<int64_t>(host_rows[i]) * vocab,
                                              static_cast<size_t>(vocab) * sizeof(float)));
  return backend_->synchronize();
}

// Packs the batch's int arrays (and sampling parameters) into one host buffer and copies it
// to ints_ in one upload; the offsets depend only on the batch's sizes, so a replayed graph
// of the same sizes reads this step's values. For dynamic NTK rope, also this step's inv_freq.
Result<ModelRunner::StepBuffers> ModelRunner::upload_step(const ForwardBatch& b, const SamplingBatch* s,
                                                          int32_t max_ctx_len) {
  std::vector<int32_t>& h = host_ints_;
  h.clear();
  auto put = [&](const void* src, size_t n_ints) {
    const size_t off = h.size();
    h.resize(off + (n_ints + 3) / 4 * 4, 0);
    if (n_ints > 0 && src != nullptr) std::memcpy(h.data() + off, src, n_ints * sizeof(int32_t));
    return off;
  };
  const size_t o_tokens = put(b.tokens.data(), b.tokens.size());
  const size_t o_pos = put(b.positions.data(), b.positions.size());
  const size_t o_slots = put(b.slot_mapping.data(), b.slot_mapping.size());
  const size_t o_rows = put(b.logits_rows.data(), b.logits_rows.size());
  const size_t o_qs = put(b.q_start.data(), b.q_start.size());
  const size_t o_ctx = put(b.ctx_len.data(), b.ctx_len.size());
  const size_t o_tab = put(b.block_tables.data(), b.block_tables.size());
  size_t o_temp = 0, o_topk = 0, o_topp = 0, o_seeds = 0, o_ids = 0;
  if (s != nullptr) {
    o_temp = put(s->temperature.data(), s->temperature.size());
    o_topk = put(s->top_k.data(), s->top_k.size());
    o_topp = put(s->top_p.data(), s->top_p.size());
    o_seeds = put(s->seeds.data(), s->seeds.size() * 2);
    o_ids = put(nullptr, b.logits_rows.size());
  }
  if (static_cast<int64_t>(h.size()) > ints_capacity())
    return internal_error("forward: step inputs (" + std::to_string(h.size()) + " ints) exceed the workspace");
  FRUGAL_RETURN_IF_ERROR(backend_->upload(ints_, h.data(), h.size() * sizeof(int32_t)));
  if (rope_depends_on_position(config_)) {
    const int32_t max_pos = *std::max_element(b.positions.begin(), b.positions.end());
    inv_freq_host_ = rope_inv_freq(config_, max_pos);
    FRUGAL_RETURN_IF_ERROR(backend_->upload(inv_freq_, inv_freq_host_.data(), inv_freq_host_.size() * sizeof(float)));
  }
  int32_t* d = ints_;
  StepBuffers sb;
  sb.ctx.backend = backend_;
  sb.ctx.act = backend_->activation_dtype();
  sb.ctx.in = layers::StepInputs{
      .n_tokens = b.n_tokens(), .n_seqs = b.n_seqs(), .positions = d + o_pos, .slot_mapping = d + o_slots,
      .q_start = d + o_qs, .ctx_len = d + o_ctx, .block_tables = d + o_tab,
      .max_blocks_per_seq = b.max_blocks_per_seq, .max_ctx_len = max_ctx_len, .inv_freq = inv_freq_};
  // Leading one-token sequences (the scheduler puts decodes first): a hint for mixed steps.
  int32_t n_dec = 0, dec_ctx = 0;
  while (n_dec < b.n_seqs() && b.q_start[static_cast<size_t>(n_dec) + 1] - b.q_start[static_cast<size_t>(n_dec)] == 1) {
    dec_ctx = std::max(dec_ctx, b.ctx_len[static_cast<size_t>(n_dec)]);
    ++n_dec;
  }
  sb.ctx.in.n_decode_seqs = n_dec;
  sb.ctx.in.decode_max_ctx_len = dec_ctx;
  sb.ctx.tokens = d + o_tokens;
  sb.ctx.logits_rows = d + o_rows;
  sb.ctx.n_logits_rows = static_cast<int64_t>(b.logits_rows.size());
  sb.ctx.logits = logits_;
  sb.ctx.taps = &taps_;
  if (s != nullptr) {
    sb.temperature = reinterpret_cast<const float*>(d + o_temp);
    sb.top_k = d + o_topk;
    sb.top_p = reinterpret_cast<const float*>(d + o_topp);
    sb.seeds = reinterpret_cast<const uint64_t*>(d + o_seeds);
    sb.ids = d + o_ids;
  }
  return sb;
}

}  // namespace frugal::model

// The CUDA backend's fused ops (ops/op_list.h FRUGAL_FUSED_OPS) against the same op run as its
// sequence of kernels (CudaBackend::set_fuse_*(false)), bit for bit, eagerly and replayed from a
// captured graph, on the 7B decode layout (28 q heads, 4 kv heads of 128). The op harness
// (cuda_harness_test) checks both paths against ops::ref on odd shapes; this test checks the
// fused kernels really ran (the backend's counters) and equal what the unfused kernels give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace frugal::cuda::testing {
namespace {

// Runs `op` on fresh copies of `inputs` (uploaded before each run) fused and unfused, eagerly and
// (fused) from a graph, and compares every tensor of `inputs` afterwards byte for byte.
void expect_fused_equals_sequence(const std::vector<Tensor*>& inputs, const std::function<Status()>& op,
                                  const std::function<void(bool)>& set_fused, const std::function<int64_t()>& fused_calls,
                                  const std::string& what) {
  auto run = [&](bool fused, bool graph) {
    for (Tensor* t : inputs) t->to_device();
    set_fused(fused);
    const int64_t before = fused_calls();
    if (graph) {
      static uint64_t key = 0x5EED0000;
      ++key;
      EXPECT_TRUE(backend()->capture_graph(key, op).is_ok()) << what;
      for (Tensor* t : inputs) t->to_device();  // capture enqueues nothing: the replay runs it
      EXPECT_TRUE(backend()->replay_graph(key).is_ok()) << what;
    } else {
      EXPECT_TRUE(op().is_ok()) << what;
    }
    EXPECT_TRUE(backend()->synchronize().is_ok());
    EXPECT_EQ(fused_calls() > before, fused) << what << (fused ? ": the fused kernel did not run" : ": fused while off");
    std::vector<std::vector<uint8_t>> out(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) inputs[i]->from_device(&out[i], what);
    return out;
  };
  const auto seq = run(false, false), fused = run(true, false), graph = run(true, true);
  set_fused(true);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_TRUE(seq[i] == fused[i]) << what << ": tensor " << i << " differs between the fused and unfused paths";
    EXPECT_TRUE(seq[i] == graph[i]) << what << ": tensor " << i << " differs in the graph replay";
  }
}

TEST(CudaFused, RopeKvWriteEqualsRopeThenKvWrite) {
  const int n_head = 28, n_kv = 4, hd = 128, bs = 16, n_blocks = 8;
  const int64_t q_dim = int64_t{n_head} * hd, kv_dim = int64_t{n_kv} * hd, ld = q_dim + 2 * kv_dim;
  const int64_t n_slots = int64_t{n_blocks} * bs;
  for (DType cache_t : {DType::kBF16, DType::kF8E4M3, DType::kI8})
    for (int rot : {128, 64})
      for (int64_t n_tok : {1, 3}) {
        const std::string what = std::string("rope_kv_write cache=") + dtype_name(cache_t) + " rotary_dim=" +
                                 std::to_string(rot) + " n_tokens=" + std::to_string(n_tok);
        std::mt19937 rng(static_cast<unsigned>(rot + n_tok));
        Tensor qkv(DType::kBF16, n_tok * ld), kc(cache_t, n_slots * kv_dim), vc(cache_t, n_slots * kv_dim);
        Tensor ks(DType::kF32, n_slots * n_kv), vs(DType::kF32, n_slots * n_kv);
        qkv.fill_uniform(rng, -4, 4);
        for (Tensor* t : {&kc, &vc, &ks, &vs}) std::fill(t->host.begin(), t->host.end(), uint8_t{0x11});
        std::vector<int32_t> pos, slots;
        for (int64_t t = 0; t < n_tok; ++t) {
          pos.push_back(static_cast<int32_t>(1000 + 977 * t));
          slots.push_back(t == 1 ? -1 : static_cast<int32_t>((37 * t + 5) % n_slots));
        }
        std::vector<float> inv(static_cast<size_t>(rot / 2));
        for (int i = 0; i < rot / 2; ++i) inv[static_cast<size_t>(i)] = std::pow(1e6f, -2.f * i / rot);
        DevInts di;
        auto* q = static_cast<uint8_t*>(qkv.dev);
        const bool int8 = cache_t == DType::kI8, fp8 = cache_t == DType::kF8E4M3;
        const ops::RopeKvWriteParams p{
            .rope = {.q = q, .k = q + 2 * q_dim, .act_dtype = DType::kBF16, .positions = di(pos), .inv_freq = di.floats(inv),
                     .n_tokens = n_tok, .ld_q = ld, .ld_k = ld, .n_head = n_head, .n_head_kv = n_kv, .head_dim = hd,
                     .rotary_dim = rot, .attention_factor = 1.f},
            .kv = {.cache = {.k_cache = kc.dev, .v_cache = vc.dev, .cache_dtype = cache_t, .n_blocks = n_blocks,
                             .block_size = bs, .n_head_kv = n_kv, .head_dim = hd,
                             .k_scales = int8 ? static_cast<float*>(ks.dev) : nullptr,
                             .v_scales = int8 ? static_cast<float*>(vs.dev) : nullptr,
                             .k_scale = fp8 ? 0.05f : 1.f, .v_scale = fp8 ? 0.02f : 1.f},
                   .k = q + 2 * q_dim, .v = q + 2 * (q_dim + kv_dim), .act_dtype = DType::kBF16, .ld_k = ld, .ld_v = ld,
                   .slot_mapping = di(slots), .n_tokens = n_tok}};
        expect_fused_equals_sequence(
            {&qkv, &kc, &vc, &ks, &vs}, [&] { return backend()->rope_kv_write(p); },
            [](bool on) { backend()->set_fuse_rope_kv(on); }, [] { return backend()->fused_rope_kv_calls(); }, what);
      }
}

}  // namespace
}  // namespace frugal::cuda::testing

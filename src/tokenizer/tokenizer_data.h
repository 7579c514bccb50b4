// Internal state of a loaded Tokenizer, filled by the tokenizer.json and GGUF loaders.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/pipeline.h"

namespace frugal::tok {

// Pre-tokenized word -> ids. Sharded so concurrent encoders rarely contend; a shard is simply
// cleared when it fills up (words follow a Zipf law, the frequent ones come right back).
class WordCache {
 public:
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxPerShard = 1 << 14;
  static constexpr size_t kMaxWordBytes = 128;
  bool lookup(std::string_view word, std::vector<int32_t>& out) const;
  void insert(std::string_view word, const int32_t* ids, size_t n) const;

 private:
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };
  mutable std::array<Shard, kShards> shards_;
};

struct TokenizerData {
  std::string source;  // file or directory, for messages
  BpeModel model;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Decoder decoder;
  std::vector<AddedToken> added;
  AddedTokenMatcher raw_matcher, normalized_matcher;
  std::vector<int32_t> added_index;  // id -> index into `added`, or -1
  std::vector<std::string> pieces;   // id -> token_to_piece
  TokenMap added_ids;                // content -> id

  int32_t vocab_size = 0;
  int32_t bos_id = -1, eos_id = -1, pad_id = -1;
  bool add_bos_token = false;
  // Post-processor template for one sequence: ids before and after it (add_bos).
  bool has_template = false;
  std::vector<int32_t> template_before, template_after;
  std::string chat_template;

  WordCache cache;

  // Fills added_index, pieces, matchers and vocab_size once the parts above are set.
  Status finalize();
};

}  // namespace frugal::tok

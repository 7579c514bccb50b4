// The BPE model: vocabulary, merge ranks and the merge loop. Two merge orders:
//  - kMerges: HF BPE, the adjacent pair with the lowest merge rank first (ties: leftmost);
//  - kScores: SentencePiece/llama.cpp SPM, the adjacent pair whose concatenation is the vocab
//    entry with the highest score first (ties: leftmost).
// Both use a linked list of symbols and a priority queue, so a word costs O(n log n).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace frugal::tok {

// Transparent hash so string_view lookups need no temporary std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

enum class MergeOrder { kMerges, kScores };

struct BpeOptions {
  MergeOrder order = MergeOrder::kMerges;
  bool byte_level = false;     // words arrive as raw bytes; symbols start as GPT-2 byte chars
  bool ignore_merges = false;  // a word that is itself a vocab entry becomes that one token
  bool byte_fallback = false;  // unknown chars become <0xXX> byte tokens
  bool fuse_unk = false;       // consecutive unknowns collapse into one unk token
  int32_t unk_id = -1;         // -1: unknown chars are dropped (HF behaviour without unk_token)
};

// Open-addressing map from a (left id, right id) pair to its merge (rank, merged id).
class PairMap {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static constexpr uint64_t kEmpty = ~0ull;
  void reserve(size_t n);
  // Keeps the first (lowest-rank) merge for a repeated pair, as HF does.
  void insert(int32_t left, int32_t right, int32_t rank, int32_t merged);
  const Entry* find(int32_t left, int32_t right) const;
  size_t size() const { return size_; }

 private:
  static uint64_t key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  std::vector<Entry> slots_;
  size_t size_ = 0;
};

class BpeModel {
 public:
  BpeModel() = default;
  // `tokens[id]` is the vocab string (an empty string for an id with no entry).
  void set_vocab(std::vector<std::string> tokens, std::vector<float> scores);
  Status add_merge(std::string_view left, std::string_view right, int32_t rank);
  Status finish(const BpeOptions& options);

  // Appends the ids of one pre-tokenized word (model alphabet, or raw bytes when byte_level).
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  int32_t token_id(std::string_view token) const;
  const std::vector<std::string>& tokens() const { return tokens_; }
  const BpeOptions& options() const { return options_; }
  size_t n_merges() const { return merges_.size(); }

 private:
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    uint32_t begin, len;  // byte span in the word (kScores)
  };
  void initial_symbols(std::string_view word, std::vector<Symbol>& syms) const;
  void merge_by_rank(std::vector<Symbol>& syms) const;
  void merge_by_score(std::string_view word, std::vector<Symbol>& syms) const;
  void emit_score_symbols(std::string_view word, const std::vector<Symbol>& syms,
                          std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  TokenMap vocab_;
  PairMap merges_;
  BpeOptions options_;
  int32_t byte_ids_[256];      // byte-level char id per byte, or <0xXX> id with byte_fallback
};

}  // namespace frugal::tok

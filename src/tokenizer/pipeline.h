// The stages of HF's encode/decode pipeline that tokenizer.json configures, each parsed from its
// JSON object (the `path` argument names the field in errors) and flattened into a list of steps:
// normalizer -> pre-tokenizer -> (model) ; decoder. A type or option we do not implement is a
// load error naming it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace frugal::tok {

// ---- normalizers --------------------------------------------------------------------------
struct NormalizerStep {
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kPrepend, kReplace, kStrip };
  Kind kind;
  std::string text{};       // kPrepend: prefix; kReplace: replacement content
  std::string literal{};    // kReplace with a String pattern
  bool use_regex = false;   // kReplace with a Regex pattern
  Regex regex{};
  bool left = false, right = false;  // kStrip
};

class Normalizer {
 public:
  static Result<Normalizer> parse(const nlohmann::json& j, const std::string& path);
  bool empty() const { return steps_.empty(); }
  std::string apply(std::string_view text) const;
  void add(NormalizerStep step) { steps_.push_back(std::move(step)); }

 private:
  Status parse_into(const nlohmann::json& j, const std::string& path);
  std::vector<NormalizerStep> steps_;
};

std::string replace_all_literal(std::string_view text, std::string_view from, std::string_view to);

// ---- pre-tokenizers -----------------------------------------------------------------------
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace, kDigits, kPunctuation };
  Kind kind;
  Regex regex{};                                  // kSplit, kDigits, kPunctuation, kByteLevel
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;                  // kByteLevel
  bool use_regex = false;                         // kByteLevel
  std::string replacement{};                      // kMetaspace
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;                              // kMetaspace
};

class PreTokenizer {
 public:
  static Result<PreTokenizer> parse(const nlohmann::json& j, const std::string& path);
  // Splits one normalized segment into words and hands each to `sink` as it is found (no list
  // of words is built). `at_start`: the segment begins the input (prepend_scheme "first").
  using WordSink = std::function<void(std::string_view)>;
  void apply(std::string_view segment, bool at_start, const WordSink& sink) const;
  // True when the chain ends in ByteLevel: words stay raw bytes and the model maps them.
  bool byte_level() const { return byte_level_; }
  void add(PreTokenizerStep step) { steps_.push_back(std::move(step)); }
  void set_byte_level(bool on) { byte_level_ = on; }

 private:
  Status parse_into(const nlohmann::json& j, const std::string& path);
  void run(size_t step, std::string_view piece, bool first, const WordSink& sink) const;
  std::vector<PreTokenizerStep> steps_;
  bool byte_level_ = false;
};

// Splits `text` at the regex matches according to `behavior` (HF's Split semantics); `out`
// receives the non-empty pieces as [begin, end) ranges, `scratch` is working space.
void split_by_regex(std::string_view text, const Regex& re, SplitBehavior behavior, bool invert,
                    std::vector<std::pair<size_t, size_t>>& out,
                    std::vector<std::pair<size_t, size_t>>& scratch);

// ---- decoders -----------------------------------------------------------------------------
struct DecoderStep {
  enum class Kind { kByteLevel, kByteFallback, kFuse, kReplace, kStrip, kMetaspace };
  Kind kind;
  std::string from{}, to{}; // kReplace; kMetaspace: from = replacement char
  std::string content{};    // kStrip: the char to strip
  size_t start = 0, stop = 0;
  bool prepend_first = true;  // kMetaspace: strip the space it prepended to the first token
};

class Decoder {
 public:
  static Result<Decoder> parse(const nlohmann::json& j, const std::string& path);
  // Runs the chain over token strings and concatenates: valid UTF-8 out.
  std::string decode(std::vector<std::string> tokens) const;
  void add(DecoderStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }

 private:
  Status parse_into(const nlohmann::json& j, const std::string& path);
  std::vector<DecoderStep> steps_;
};

// ---- added tokens -------------------------------------------------------------------------
struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false, rstrip = false, single_word = false;
};

// Leftmost-longest matcher over added tokens (HF's AhoCorasick with MatchKind::LeftmostLongest).
class AddedTokenMatcher {
 public:
  void build(const std::vector<AddedToken>& tokens, bool normalized);
  struct Piece {
    size_t begin, end;
    int32_t token;  // index into the token list, or -1 for plain text
  };
  // Splits `text` into plain pieces and added-token pieces; `parse_special` false ignores
  // special tokens (they stay plain text).
  void split(std::string_view text, bool parse_special, std::vector<Piece>& out) const;
  bool empty() const { return patterns_.empty(); }

 private:
  const std::vector<AddedToken>* tokens_ = nullptr;
  std::vector<int32_t> patterns_;                  // indices of tokens this matcher handles
  std::vector<std::vector<int32_t>> by_first_byte_;  // longest first
};

}  // namespace frugal::tok

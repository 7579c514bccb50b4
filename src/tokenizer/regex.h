// PCRE2 (UTF + UCP + JIT) wrapper for pre-tokenizer patterns. Patterns written for Oniguruma
// (what HF tokenizers uses) are adapted where the two engines differ: `\s`/`\S` follow Unicode
// White_Space (Oniguruma includes U+0085, PCRE2's \s does not).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace frugal::tok {

class Regex {
 public:
  // `name` is for error messages ("pre_tokenizer.pretokenizers[0].pattern").
  static Result<Regex> compile(const std::string& pattern, const std::string& name);
  // Escapes a literal string for use as a pattern.
  static std::string quote(std::string_view literal);

  // Non-empty, non-overlapping matches as [begin, end) byte ranges, left to right.
  // Thread-safe (match data is per thread).
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

// Rewrites Oniguruma-style \s, \S inside and outside classes into explicit White_Space sets.
std::string adapt_onig_pattern(std::string_view pattern);

}  // namespace frugal::tok

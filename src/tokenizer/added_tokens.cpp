// Added-token matching: leftmost-longest over the token contents, then HF's single_word, lstrip
// and rstrip rules (AddedVocabulary::find_matches).
#include <algorithm>
#include <cstring>

#include "tokenizer/pipeline.h"
#include "tokenizer/unicode_text.h"

namespace frugal::tok {

namespace {

uint32_t last_code_point(std::string_view s) {
  size_t b = s.size() - 1;
  while (b > 0 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80) --b;
  return next_code_point(s, b);
}

uint32_t first_code_point(std::string_view s) {
  size_t i = 0;
  return next_code_point(s, i);
}

}  // namespace

void AddedTokenMatcher::build(const std::vector<AddedToken>& tokens, bool normalized) {
  tokens_ = &tokens;
  patterns_.clear();
  by_first_byte_.assign(256, {});
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].content.empty()) continue;
    if (tokens[i].normalized != normalized) continue;
    patterns_.push_back(static_cast<int32_t>(i));
    by_first_byte_[static_cast<uint8_t>(tokens[i].content[0])].push_back(static_cast<int32_t>(i));
  }
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](int32_t a, int32_t b) {
      return tokens[a].content.size() > tokens[b].content.size();
    });
  }
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special, std::vector<Piece>& out) const {
  size_t plain_from = 0;  // start of the pending plain-text piece
  size_t i = 0;
  while (i < text.size()) {
    int32_t hit = -1;
    if (!by_first_byte_.empty()) {
      for (int32_t t : by_first_byte_[static_cast<uint8_t>(text[i])]) {
        const AddedToken& tok = (*tokens_)[t];
        if (!parse_special && tok.special) continue;
        if (text.size() - i < tok.content.size() ||
            std::memcmp(text.data() + i, tok.content.data(), tok.content.size()) != 0) continue;
        hit = t;
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = (*tokens_)[hit];
    size_t b = i, e = i + tok.content.size();
    if (tok.single_word) {
      const bool start_ok = b == 0 || !is_word_char(last_code_point(text.substr(0, b)));
      const bool stop_ok = e == text.size() || !is_word_char(first_code_point(text.substr(e)));
      if (!start_ok || !stop_ok) {
        i = e;  // leftmost-longest consumed this match; HF moves on past it
        continue;
      }
    }
    if (tok.lstrip) {
      while (b > plain_from) {
        size_t s = b - 1;
        while (s > plain_from && (static_cast<uint8_t>(text[s]) & 0xC0) == 0x80) --s;
        size_t k = s;
        if (!is_whitespace(next_code_point(text, k))) break;
        b = s;
      }
    }
    if (tok.rstrip) {
      while (e < text.size()) {
        size_t k = e;
        if (!is_whitespace(next_code_point(text, k))) break;
        e = k;
      }
    }
    if (b > plain_from) out.push_back(Piece{plain_from, b, -1});
    out.push_back(Piece{b, e, hit});
    plain_from = e;
    i = e;
  }
  if (plain_from < text.size()) out.push_back(Piece{plain_from, text.size(), -1});
}

}  // namespace frugal::tok

// The encode/decode pipeline (HF order): added tokens on the raw text -> normalizer -> added
// tokens on the normalized text -> pre-tokenizer -> BPE per word (cached) -> post-processor.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/tokenizer_data.h"
#include "tokenizer/unicode_text.h"

namespace frugal {

using tok::TokenizerData;

namespace tok {

bool WordCache::lookup(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxWordBytes) return false;
  Shard& s = shards_[std::hash<std::string_view>{}(word) % kShards];
  std::lock_guard lock(s.mu);
  auto it = s.map.find(word);
  if (it == s.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view word, const int32_t* ids, size_t n) const {
  if (word.size() > kMaxWordBytes) return;
  Shard& s = shards_[std::hash<std::string_view>{}(word) % kShards];
  std::lock_guard lock(s.mu);
  if (s.map.size() >= kMaxPerShard) s.map.clear();
  s.map.emplace(std::string(word), std::vector<int32_t>(ids, ids + n));
}

namespace {

int parse_byte_piece(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// What one model token stands for as bytes, for token_to_piece.
std::string model_piece(const std::string& t, bool byte_level) {
  if (byte_level) {
    std::string out;
    size_t i = 0;
    while (i < t.size()) {
      const int b = unicode_to_byte(next_code_point(t, i));
      if (b < 0) return t;
      out += static_cast<char>(b);
    }
    return out;
  }
  if (const int b = parse_byte_piece(t); b >= 0) return std::string(1, static_cast<char>(b));
  return replace_all_literal(t, "\xE2\x96\x81", " ");  // U+2581 LOWER ONE EIGHTH BLOCK
}

}  // namespace

Status TokenizerData::finalize() {
  int32_t n = static_cast<int32_t>(model.tokens().size());
  for (const auto& a : added) {
    if (a.id < 0 || a.id >= (1 << 21)) {
      return corrupt(source + ": added token \"" + a.content + "\" has id " + std::to_string(a.id) +
                     ", expected 0..2097151");
    }
    n = std::max(n, a.id + 1);
  }
  vocab_size = n;
  added_index.assign(n, -1);
  for (size_t i = 0; i < added.size(); ++i) {
    added_index[added[i].id] = static_cast<int32_t>(i);
    added_ids[added[i].content] = added[i].id;
  }
  pieces.assign(n, {});
  const bool byte_level = model.options().byte_level;
  for (int32_t id = 0; id < n; ++id) {
    if (added_index[id] >= 0) pieces[id] = added[added_index[id]].content;
    else if (id < static_cast<int32_t>(model.tokens().size())) pieces[id] = model_piece(model.tokens()[id], byte_level);
  }
  raw_matcher.build(added, false);
  normalized_matcher.build(added, true);
  return Status::ok();
}

}  // namespace tok

Tokenizer::Tokenizer(std::unique_ptr<TokenizerData> data) : d_(std::move(data)) {}
Tokenizer::~Tokenizer() = default;

void Tokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (d_->cache.lookup(word, out)) return;
  const size_t before = out.size();
  d_->model.tokenize(word, out);
  d_->cache.insert(word, out.data() + before, out.size() - before);
}

void Tokenizer::encode_segment(std::string_view segment, bool at_start, bool parse_special,
                               std::vector<int32_t>& out) const {
  const std::string normalized = d_->normalizer.empty() ? std::string(segment) : d_->normalizer.apply(segment);
  std::vector<tok::AddedTokenMatcher::Piece> parts;
  if (d_->normalized_matcher.empty()) {
    if (!normalized.empty()) parts.push_back({0, normalized.size(), -1});
  } else {
    d_->normalized_matcher.split(normalized, parse_special, parts);
  }
  const tok::PreTokenizer::WordSink sink = [&](std::string_view word) { encode_word(word, out); };
  for (const auto& p : parts) {
    if (p.token >= 0) {
      out.push_back(d_->added[p.token].id);
      continue;
    }
    d_->pre_tokenizer.apply(std::string_view(normalized).substr(p.begin, p.end - p.begin),
                            at_start && p.begin == 0, sink);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, EncodeOptions options) const {
  const std::string valid = tok::to_valid_utf8(text);
  std::vector<int32_t> out;
  out.reserve(valid.size() / 3 + 4);
  if (options.add_bos) {
    if (d_->has_template) out = d_->template_before;
    else if (d_->bos_id >= 0) out.push_back(d_->bos_id);
  }
  std::vector<tok::AddedTokenMatcher::Piece> parts;
  if (d_->raw_matcher.empty()) {
    if (!valid.empty()) parts.push_back({0, valid.size(), -1});
  } else {
    d_->raw_matcher.split(valid, options.parse_special, parts);
  }
  for (const auto& p : parts) {
    if (p.token >= 0) out.push_back(d_->added[p.token].id);
    else encode_segment(std::string_view(valid).substr(p.begin, p.end - p.begin), p.begin == 0,
                        options.parse_special, out);
  }
  if (options.add_bos && d_->has_template) {
    out.insert(out.end(), d_->template_after.begin(), d_->template_after.end());
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= d_->vocab_size) continue;
    const int32_t a = d_->added_index[id];
    if (a >= 0) {
      if (skip_special && d_->added[a].special) continue;
      tokens.push_back(d_->added[a].content);
    } else if (id < static_cast<int32_t>(d_->model.tokens().size())) {
      tokens.push_back(d_->model.tokens()[id]);
    }
  }
  if (d_->decoder.empty()) {
    // HF joins tokens with spaces when the file has no decoder.
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return tok::to_valid_utf8(joined);
  }
  return d_->decoder.decode(std::move(tokens));
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  return id >= 0 && id < d_->vocab_size ? d_->pieces[id] : std::string();
}

std::string Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= d_->vocab_size) return {};
  if (d_->added_index[id] >= 0) return d_->added[d_->added_index[id]].content;
  return id < static_cast<int32_t>(d_->model.tokens().size()) ? d_->model.tokens()[id] : std::string();
}

int32_t Tokenizer::token_id(std::string_view text) const {
  auto it = d_->added_ids.find(text);
  if (it != d_->added_ids.end()) return it->second;
  return d_->model.token_id(text);
}

int32_t Tokenizer::vocab_size() const { return d_->vocab_size; }
int32_t Tokenizer::bos_id() const { return d_->bos_id; }
int32_t Tokenizer::eos_id() const { return d_->eos_id; }
int32_t Tokenizer::pad_id() const { return d_->pad_id; }
bool Tokenizer::add_bos_token() const { return d_->add_bos_token; }
const std::string& Tokenizer::chat_template() const { return d_->chat_template; }

bool Tokenizer::is_special(int32_t id) const {
  if (id < 0 || id >= d_->vocab_size) return false;
  const int32_t a = d_->added_index[id];
  return a >= 0 && d_->added[a].special;
}

std::string StreamDecoder::push(int32_t id) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  if (prefix_.empty() && !ids_.empty()) {
    std::string p = tokenizer_->decode(ids_, skip_special_);
    if (!p.ends_with(kReplacement)) {
      prefix_ = std::move(p);
      prefix_index_ = ids_.size();
    }
  }
  ids_.push_back(id);
  std::string text = tokenizer_->decode(ids_, skip_special_);
  if (text.size() <= prefix_.size() || text.ends_with(kReplacement)) return {};
  // Normally text extends prefix_; if a decoder rewrote earlier text, emit from the divergence.
  size_t common = 0;
  while (common < prefix_.size() && text[common] == prefix_[common]) ++common;
  while (common > 0 && (static_cast<uint8_t>(text[common]) & 0xC0) == 0x80) --common;
  std::string fresh = text.substr(common);
  const size_t new_prefix_index = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  prefix_ = tokenizer_->decode(ids_, skip_special_);
  prefix_index_ = new_prefix_index;
  return fresh;
}

std::string StreamDecoder::flush() {
  std::string text = tokenizer_->decode(ids_, skip_special_);
  std::string rest = text.size() > prefix_.size() && text.starts_with(prefix_) ? text.substr(prefix_.size())
                     : text.size() > prefix_.size() ? text : std::string();
  ids_.clear();
  prefix_.clear();
  prefix_index_ = 0;
  return rest;
}

}  // namespace frugal

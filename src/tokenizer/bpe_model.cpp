#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/unicode_text.h"

namespace frugal::tok {

namespace {

uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

std::string byte_token(int b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
  return buf;
}

}  // namespace

void PairMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  std::vector<Entry> old = std::move(slots_);
  slots_.assign(cap, Entry{});
  size_ = 0;
  for (const auto& e : old)
    if (e.key != kEmpty) insert(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key), e.rank, e.merged);
}

void PairMap::insert(int32_t left, int32_t right, int32_t rank, int32_t merged) {
  if ((size_ + 1) * 2 > slots_.size()) reserve(std::max<size_t>(size_ + 1, slots_.size()));
  const uint64_t k = key(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = mix(k) & mask;; i = (i + 1) & mask) {
    if (slots_[i].key == k) return;
    if (slots_[i].key == kEmpty) {
      slots_[i] = Entry{k, rank, merged};
      ++size_;
      return;
    }
  }
}

const PairMap::Entry* PairMap::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t k = key(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = mix(k) & mask;; i = (i + 1) & mask) {
    if (slots_[i].key == k) return &slots_[i];
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

void BpeModel::set_vocab(std::vector<std::string> tokens, std::vector<float> scores) {
  tokens_ = std::move(tokens);
  scores_ = std::move(scores);
  scores_.resize(tokens_.size(), 0.0f);
  vocab_.clear();
  vocab_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    // The first id wins for duplicate strings (GGUF vocabularies can repeat unused entries).
    if (!tokens_[i].empty()) vocab_.emplace(tokens_[i], static_cast<int32_t>(i));
  }
}

int32_t BpeModel::token_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

Status BpeModel::add_merge(std::string_view left, std::string_view right, int32_t rank) {
  const int32_t l = token_id(left), r = token_id(right);
  if (l < 0 || r < 0) {
    return corrupt("merges[" + std::to_string(rank) + "]: \"" + std::string(left) + " " +
                   std::string(right) + "\" refers to a token missing from the vocab (\"" +
                   std::string(l < 0 ? left : right) + "\")");
  }
  std::string merged(left);
  merged += right;
  const int32_t m = token_id(merged);
  if (m < 0) {
    return corrupt("merges[" + std::to_string(rank) + "]: merged token \"" + merged +
                   "\" is missing from the vocab");
  }
  merges_.insert(l, r, rank, m);
  return Status::ok();
}

Status BpeModel::finish(const BpeOptions& options) {
  options_ = options;
  if (options_.unk_id >= static_cast<int32_t>(tokens_.size())) {
    return corrupt("unk_token id " + std::to_string(options_.unk_id) + " is outside the vocab");
  }
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = options_.byte_level ? token_id(byte_to_unicode(static_cast<uint8_t>(b)))
                                       : token_id(byte_token(b));
  }
  return Status::ok();
}

void BpeModel::initial_symbols(std::string_view word, std::vector<Symbol>& syms) const {
  auto push = [&](int32_t id, size_t begin, size_t len) {
    const auto n = static_cast<int32_t>(syms.size());
    syms.push_back(Symbol{id, n - 1, -1, static_cast<uint32_t>(begin), static_cast<uint32_t>(len)});
    if (n > 0) syms[n - 1].next = n;
  };
  if (options_.byte_level) {
    for (size_t i = 0; i < word.size(); ++i) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(word[i])];
      if (id >= 0) push(id, i, 1);
      else if (options_.unk_id >= 0) push(options_.unk_id, i, 1);
    }
    return;
  }
  bool prev_unk = false;
  size_t i = 0;
  while (i < word.size()) {
    const size_t n = std::min(utf8_seq_len(static_cast<uint8_t>(word[i])), word.size() - i);
    const std::string_view ch = word.substr(i, n);
    const int32_t id = token_id(ch);
    if (id >= 0 || options_.order == MergeOrder::kScores) {
      push(id, i, n);  // kScores resolves unknown chars after merging
      prev_unk = false;
    } else if (options_.byte_fallback &&
               std::all_of(ch.begin(), ch.end(), [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })) {
      for (size_t k = 0; k < n; ++k) push(byte_ids_[static_cast<uint8_t>(ch[k])], i + k, 1);
      prev_unk = false;
    } else if (options_.unk_id >= 0) {
      if (options_.fuse_unk && prev_unk) {
        syms.back().len += static_cast<uint32_t>(n);
      } else {
        push(options_.unk_id, i, n);
      }
      prev_unk = true;
    }
    i += n;
  }
}

void BpeModel::merge_by_rank(std::vector<Symbol>& syms) const {
  struct Cand {
    int32_t rank, pos;
    bool operator<(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Cand> heap;
  heap.reserve(syms.size());
  auto consider = [&](int32_t l) {
    const int32_t r = syms[l].next;
    if (r < 0) return;
    if (const auto* e = merges_.find(syms[l].id, syms[r].id)) {
      heap.push_back(Cand{e->rank, l});
      std::push_heap(heap.begin(), heap.end());
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) {
    if (const auto* e = merges_.find(syms[i].id, syms[i + 1].id)) heap.push_back(Cand{e->rank, i});
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Cand c = heap.back();
    heap.pop_back();
    Symbol& s = syms[c.pos];
    if (s.id < 0 || s.next < 0) continue;
    Symbol& r = syms[s.next];
    const auto* e = merges_.find(s.id, r.id);
    if (!e || e->rank != c.rank) continue;  // stale candidate
    s.id = e->merged;
    s.len += r.len;
    s.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.pos;
    r.id = -1;
    if (s.prev >= 0) consider(s.prev);
    consider(c.pos);
  }
}

void BpeModel::merge_by_score(std::string_view word, std::vector<Symbol>& syms) const {
  struct Cand {
    float score;
    int32_t pos;
    uint32_t len;
    bool operator<(const Cand& o) const { return score != o.score ? score < o.score : pos > o.pos; }
  };
  std::vector<Cand> heap;
  auto consider = [&](int32_t l) {
    if (l < 0) return;
    const int32_t r = syms[l].next;
    if (r < 0) return;
    const uint32_t len = syms[l].len + syms[r].len;
    const int32_t id = token_id(word.substr(syms[l].begin, len));
    if (id < 0) return;
    heap.push_back(Cand{scores_[id], l, len});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Cand c = heap.back();
    heap.pop_back();
    Symbol& s = syms[c.pos];
    if (s.len == 0 || s.next < 0) continue;
    Symbol& r = syms[s.next];
    if (s.len + r.len != c.len) continue;  // one side changed since this candidate was made
    s.len = c.len;
    s.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.pos;
    r.len = 0;
    consider(s.prev);
    consider(c.pos);
  }
}

void BpeModel::emit_score_symbols(std::string_view word, const std::vector<Symbol>& syms,
                                  std::vector<int32_t>& out) const {
  for (int32_t i = 0; i >= 0 && !syms.empty(); i = syms[i].next) {
    const std::string_view text = word.substr(syms[i].begin, syms[i].len);
    const int32_t id = token_id(text);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char ch : text) {
      const int32_t b = byte_ids_[static_cast<uint8_t>(ch)];
      if (b >= 0) out.push_back(b);
      else if (options_.unk_id >= 0) out.push_back(options_.unk_id);
    }
  }
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    int32_t id;
    if (options_.byte_level) {
      std::string mapped;
      append_byte_level(mapped, word);
      id = token_id(mapped);
    } else {
      id = token_id(word);
    }
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  initial_symbols(word, syms);
  if (options_.order == MergeOrder::kScores) {
    merge_by_score(word, syms);
    emit_score_symbols(word, syms, out);
    return;
  }
  merge_by_rank(syms);
  for (int32_t i = 0; i >= 0 && !syms.empty(); i = syms[i].next) out.push_back(syms[i].id);
}

}  // namespace frugal::tok

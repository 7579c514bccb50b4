#include "kv/block_pool.h"

#include <algorithm>
#include <string>

namespace frugal::kv {

uint64_t default_prefix_hash(uint64_t parent_key, std::span<const int32_t> tokens) {
  // FNV-1a over the parent key and the tokens, then a splitmix64 finalizer to spread the bits.
  uint64_t h = 0xcbf29ce484222325ull ^ parent_key;
  for (int32_t t : tokens) {
    h ^= static_cast<uint32_t>(t);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

Result<BlockPool> BlockPool::create(const BlockPoolConfig& config) {
  if (config.n_blocks < 1) {
    return invalid_argument("BlockPoolConfig.n_blocks: expected >= 1, got " + std::to_string(config.n_blocks));
  }
  if (config.block_size < 1) {
    return invalid_argument("BlockPoolConfig.block_size: expected >= 1, got " +
                            std::to_string(config.block_size));
  }
  return BlockPool(config);
}

BlockPool::BlockPool(const BlockPoolConfig& config)
    : config_(config),
      blocks_(config.n_blocks),
      tokens_(static_cast<size_t>(config.n_blocks) * config.block_size, 0) {
  if (config_.hash_fn == nullptr) config_.hash_fn = default_prefix_hash;
  // Reverse order so that block 0 is handed out first: block ids in tests are predictable.
  free_.reserve(config.n_blocks);
  for (BlockId id = config.n_blocks - 1; id >= 0; --id) free_.push_back(id);
}

BlockPoolStats BlockPool::stats() const {
  BlockPoolStats s{
      .n_blocks = n_blocks(),
      .n_used = n_used_,
      .n_free = n_free(),
      .n_cached = static_cast<int32_t>(index_.size()),
      .n_evictable = n_evictable_,
      .n_queried_blocks = n_queried_blocks_,
      .n_hit_blocks = n_hit_blocks_,
      .n_evictions = n_evictions_,
  };
  if (n_queried_blocks_ > 0) s.hit_rate = static_cast<double>(n_hit_blocks_) / n_queried_blocks_;
  if (n_used_ > 0) {
    const double slots = static_cast<double>(n_used_) * config_.block_size;
    s.fragmentation = (slots - static_cast<double>(n_filled_used_)) / slots;
  }
  return s;
}

uint64_t BlockPool::hash(uint64_t parent_key, std::span<const int32_t> tokens) const {
  return config_.hash_fn(parent_key, tokens);
}

std::span<const int32_t> BlockPool::block_tokens(BlockId id) const {
  return {tokens_.data() + static_cast<size_t>(id) * config_.block_size,
          static_cast<size_t>(config_.block_size)};
}

bool BlockPool::block_matches(BlockId id, std::span<const int32_t> tokens, uint64_t parent_serial) const {
  const Block& b = blocks_[id];
  if (b.serial == 0 || b.parent_serial != parent_serial) return false;
  const auto stored = block_tokens(id);
  return std::equal(stored.begin(), stored.end(), tokens.begin(), tokens.end());
}

std::vector<BlockId> BlockPool::match_prefix(std::span<const int32_t> tokens) const {
  std::vector<BlockId> hits;
  if (!config_.enable_prefix_caching) return hits;
  const size_t bs = config_.block_size;
  uint64_t parent_key = 0;
  uint64_t parent_serial = 0;
  for (size_t start = 0; start + bs <= tokens.size(); start += bs) {
    const auto block = tokens.subspan(start, bs);
    const uint64_t key = hash(parent_key, block);
    const auto it = index_.find(key);
    if (it == index_.end() || !block_matches(it->second, block, parent_serial)) break;
    hits.push_back(it->second);
    parent_key = key;
    parent_serial = blocks_[it->second].serial;
  }
  return hits;
}

void BlockPool::record_lookup(int32_t n_queried_blocks, int32_t n_hit_blocks) {
  n_queried_blocks_ += n_queried_blocks;
  n_hit_blocks_ += n_hit_blocks;
}

int32_t BlockPool::blocks_needed(const BlockTable& table, int32_t n_tokens) const {
  return std::max(0, blocks_for_tokens(n_tokens) - static_cast<int32_t>(table.blocks.size()));
}

bool BlockPool::can_attach(std::span<const BlockId> hits, int32_t n_tokens, int32_t keep_free) const {
  int32_t evictable_hits = 0;
  for (BlockId id : hits) evictable_hits += blocks_[id].ref_count == 0 ? 1 : 0;
  const int32_t fresh = std::max(0, blocks_for_tokens(n_tokens) - static_cast<int32_t>(hits.size()));
  return fresh + keep_free <= n_free() - evictable_hits;
}

bool BlockPool::attach(BlockTable& table, std::span<const BlockId> hits, int32_t n_tokens) {
  FRUGAL_CHECK_MSG(table.blocks.empty(), "attach needs an empty block table");
  const int32_t n_hit_tokens = static_cast<int32_t>(hits.size()) * config_.block_size;
  FRUGAL_CHECK(n_tokens >= n_hit_tokens);
  if (!can_attach(hits, n_tokens)) return false;
  for (BlockId id : hits) acquire(id);
  table = BlockTable{.blocks = {hits.begin(), hits.end()},
                     .n_tokens = n_hit_tokens,
                     .n_committed = static_cast<int32_t>(hits.size())};
  if (!hits.empty()) {
    table.chain_key = blocks_[hits.back()].key;
    table.chain_serial = blocks_[hits.back()].serial;
  }
  const bool grown = grow(table, n_tokens);
  FRUGAL_CHECK(grown);  // can_attach guaranteed the blocks
  return true;
}

bool BlockPool::grow(BlockTable& table, int32_t n_tokens) {
  if (n_tokens <= table.n_tokens) return true;
  const int32_t need = blocks_needed(table, n_tokens);
  if (need > n_free()) return false;
  for (int32_t i = 0; i < need; ++i) table.blocks.push_back(allocate_one());
  const int32_t bs = config_.block_size;
  for (int32_t i = table.n_tokens / bs; i < static_cast<int32_t>(table.blocks.size()); ++i) {
    set_fill(table.blocks[i], std::min(bs, n_tokens - i * bs));
  }
  table.n_tokens = n_tokens;
  return true;
}

void BlockPool::commit_full_blocks(BlockTable& table, std::span<const int32_t> tokens, int32_t n_computed) {
  const int32_t bs = config_.block_size;
  FRUGAL_CHECK(n_computed <= table.n_tokens && n_computed <= static_cast<int32_t>(tokens.size()));
  for (int32_t i = table.n_committed; (i + 1) * bs <= n_computed; ++i) {
    table.n_committed = i + 1;
    if (!config_.enable_prefix_caching || table.chain_broken) continue;
    const auto block = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    const uint64_t key = hash(table.chain_key, block);
    table.chain_key = key;
    const BlockId id = table.blocks[i];
    const auto it = index_.find(key);
    if (it != index_.end()) {
      // Same key: a true duplicate (same tokens, same parent entry) lets the chain continue
      // through the canonical block; anything else is a collision and ends registration.
      if (block_matches(it->second, block, table.chain_serial)) {
        table.chain_serial = blocks_[it->second].serial;
      } else {
        table.chain_broken = true;
      }
      continue;
    }
    Block& b = blocks_[id];
    FRUGAL_CHECK(b.serial == 0 && b.n_filled == bs);
    b.key = key;
    b.serial = next_serial_++;
    b.parent_serial = table.chain_serial;
    std::copy(block.begin(), block.end(), tokens_.begin() + static_cast<ptrdiff_t>(id) * bs);
    index_.emplace(key, id);
    table.chain_serial = b.serial;
  }
}

void BlockPool::release(BlockTable& table) {
  for (auto it = table.blocks.rbegin(); it != table.blocks.rend(); ++it)
    if (*it != kNoBlock) release_one(*it);
  table = BlockTable{};
}

int32_t BlockPool::release_behind(BlockTable& table, int32_t first_needed_pos, int32_t n_sink_tokens) {
  const int32_t bs = config_.block_size;
  const int32_t first = std::max(table.n_released_upto, blocks_for_tokens(std::max(0, n_sink_tokens)));
  int32_t n = 0, i = first;
  for (; i < static_cast<int32_t>(table.blocks.size()) && (i + 1) * bs <= first_needed_pos; ++i) {
    FRUGAL_CHECK_MSG(i < table.n_committed, "release_behind: block not committed yet");
    FRUGAL_CHECK(table.blocks[i] != kNoBlock);
    release_one(table.blocks[i]);
    table.blocks[i] = kNoBlock;
    ++n;
  }
  if (i > table.n_released_upto) table.n_released_upto = i;
  table.n_released += n;
  return n;
}

int32_t BlockPool::slot_of(const BlockTable& table, int32_t pos) const {
  const int32_t bs = config_.block_size;
  FRUGAL_CHECK(pos >= 0 && pos / bs < static_cast<int32_t>(table.blocks.size()));
  return table.blocks[pos / bs] * bs + pos % bs;
}

BlockId BlockPool::allocate_one() {
  BlockId id = -1;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (lru_head_ >= 0) {
    id = lru_head_;
    lru_remove(id);
    uncache(id);
    ++n_evictions_;
  } else {
    return -1;
  }
  Block& b = blocks_[id];
  b.ref_count = 1;
  b.n_filled = 0;
  ++n_used_;
  return id;
}

void BlockPool::acquire(BlockId id) {
  Block& b = blocks_[id];
  if (b.ref_count == 0) {
    FRUGAL_CHECK_MSG(b.serial != 0, "only cached blocks can be shared");
    lru_remove(id);
    ++n_used_;
    n_filled_used_ += b.n_filled;
  }
  ++b.ref_count;
}

void BlockPool::release_one(BlockId id) {
  Block& b = blocks_[id];
  FRUGAL_CHECK_MSG(b.ref_count > 0, "block released more often than acquired");
  if (--b.ref_count > 0) return;
  --n_used_;
  n_filled_used_ -= b.n_filled;
  if (b.serial != 0) {
    lru_push_back(id);
  } else {
    b.n_filled = 0;
    free_.push_back(id);
  }
}

void BlockPool::set_fill(BlockId id, int32_t n_filled) {
  Block& b = blocks_[id];
  FRUGAL_CHECK(b.ref_count > 0 && n_filled >= b.n_filled && n_filled <= config_.block_size);
  n_filled_used_ += n_filled - b.n_filled;
  b.n_filled = n_filled;
}

void BlockPool::lru_push_back(BlockId id) {
  Block& b = blocks_[id];
  b.lru_prev = lru_tail_;
  b.lru_next = -1;
  if (lru_tail_ >= 0) blocks_[lru_tail_].lru_next = id;
  else lru_head_ = id;
  lru_tail_ = id;
  ++n_evictable_;
}

void BlockPool::lru_remove(BlockId id) {
  Block& b = blocks_[id];
  if (b.lru_prev >= 0) blocks_[b.lru_prev].lru_next = b.lru_next;
  else lru_head_ = b.lru_next;
  if (b.lru_next >= 0) blocks_[b.lru_next].lru_prev = b.lru_prev;
  else lru_tail_ = b.lru_prev;
  b.lru_prev = b.lru_next = -1;
  --n_evictable_;
}

void BlockPool::uncache(BlockId id) {
  Block& b = blocks_[id];
  const auto it = index_.find(b.key);
  if (it != index_.end() && it->second == id) index_.erase(it);
  b.key = 0;
  b.serial = 0;
  b.parent_serial = 0;
}

}  // namespace frugal::kv

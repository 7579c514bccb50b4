// Block pool: paged-KV bookkeeping (metadata only; a block is an id into the arena laid out by
// kv_layout.h). Ids, refcounts, a free list, per-sequence block tables and the prefix cache.
//
// Prefix cache (docs/kv_cache.md): a block whose block_size token slots all hold computed KV can be
// registered under key = hash(parent key, its token ids). A lookup walks a prompt's full blocks
// along that chain and accepts a hit only after checking the stored tokens AND the identity of the
// parent entry (a serial number never reused), so a hash collision can never return a wrong
// block. Cached blocks whose refcount drops to 0 stay reusable on an LRU list and are evicted
// (oldest first) only when no never-cached free block is left.
//
// Single-threaded: only the engine thread touches a pool (docs/engine_contract.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace frugal::kv {

using BlockId = int32_t;

// Key of a full block in the prefix cache: hash of (parent key, the block's token ids).
using PrefixHashFn = uint64_t (*)(uint64_t parent_key, std::span<const int32_t> tokens);
// The default PrefixHashFn (64-bit, seeded chain; collisions are caught by verification).
uint64_t default_prefix_hash(uint64_t parent_key, std::span<const int32_t> tokens);

struct BlockPoolConfig {
  int32_t n_blocks = 0;
  int32_t block_size = 16;
  bool enable_prefix_caching = true;
  PrefixHashFn hash_fn = nullptr;  // nullptr: default_prefix_hash (tests inject colliding ones)
};

// One sequence's blocks. Owned by the caller (the scheduler's sequence), changed only through
// BlockPool methods so the pool's fill and refcount accounting stays exact.
struct BlockTable {
  std::vector<BlockId> blocks;  // blocks[i] holds token positions [i*block_size, (i+1)*block_size)
  int32_t n_tokens = 0;         // token slots assigned (written, or being written this step)
  // Prefix-cache chain state: blocks [0, n_committed) have been offered to the cache.
  int32_t n_committed = 0;
  uint64_t chain_key = 0;       // key of block n_committed - 1 (0 before the first block)
  uint64_t chain_serial = 0;    // cache entry that block n_committed - 1 matched (0: none)
  bool chain_broken = false;    // a collision stopped registration for the rest of this sequence
  // Window + sinks (release_behind): blocks [n_sink_blocks, n_released_upto) were returned to
  // the pool and read kNoBlock; they hold no sink token and lie wholly behind the window.
  int32_t n_released_upto = 0;
  int32_t n_released = 0;
};

// A block-table entry whose block was returned to the pool (release_behind): the kernels never
// read it, since no query of the sequence sees its positions any more.
inline constexpr BlockId kNoBlock = -1;

struct BlockPoolStats {
  int32_t n_blocks = 0;
  int32_t n_used = 0;       // refcount > 0
  int32_t n_free = 0;       // allocatable now: never-cached free + evictable cached
  int32_t n_cached = 0;     // blocks registered in the prefix cache (any refcount)
  int32_t n_evictable = 0;  // cached with refcount 0
  int64_t n_queried_blocks = 0;  // full prompt blocks looked up (record_lookup)
  int64_t n_hit_blocks = 0;
  int64_t n_evictions = 0;
  double hit_rate = 0;       // n_hit_blocks / n_queried_blocks (0 when nothing queried)
  double fragmentation = 0;  // used slots not holding a token / used slots (0 when none used)
};

class BlockPool {
 public:
  // Validates the config (n_blocks >= 1, block_size >= 1); the message names the field.
  static Result<BlockPool> create(const BlockPoolConfig& config);

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return config_.block_size; }
  bool prefix_caching() const { return config_.enable_prefix_caching; }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()) + n_evictable_; }
  int32_t n_used() const { return n_used_; }
  int32_t ref_count(BlockId id) const { return blocks_[id].ref_count; }
  BlockPoolStats stats() const;

  // Blocks needed to hold n_tokens tokens.
  int32_t blocks_for_tokens(int32_t n_tokens) const {
    return (n_tokens + config_.block_size - 1) / config_.block_size;
  }

  // Longest chain of cached, verified blocks covering the leading full blocks of `tokens` (a
  // trailing partial block is ignored). Changes nothing: no refcounts, LRU order or counters.
  std::vector<BlockId> match_prefix(std::span<const int32_t> tokens) const;
  // Adds a lookup to the hit-rate counters (callers count each admission once, not each retry).
  void record_lookup(int32_t n_queried_blocks, int32_t n_hit_blocks);

  // Whether an empty table could take the `hits` from match_prefix and grow to n_tokens slots
  // while `keep_free` allocatable blocks remain: hits that sit on the evictable list stop being
  // allocatable once taken.
  bool can_attach(std::span<const BlockId> hits, int32_t n_tokens, int32_t keep_free = 0) const;
  // Starts an empty table with the prefix hits (one reference each) and grows it to n_tokens
  // slots. Returns false and changes nothing when blocks run out.
  bool attach(BlockTable& table, std::span<const BlockId> hits, int32_t n_tokens);
  // Blocks a table needs to grow to n_tokens slots.
  int32_t blocks_needed(const BlockTable& table, int32_t n_tokens) const;
  // Grows the table to n_tokens slots (never shrinks). Returns false and changes nothing when
  // blocks run out.
  bool grow(BlockTable& table, int32_t n_tokens);
  // Registers the table's newly full blocks whose KV is written (positions < n_computed) in the
  // prefix cache. `tokens` is the sequence's token list (at least n_computed long).
  void commit_full_blocks(BlockTable& table, std::span<const int32_t> tokens, int32_t n_computed);
  // Drops the table's references, last block first (so a prefix outlives its tail on the LRU).
  void release(BlockTable& table);
  // Window + sinks (--kv-window W --kv-sinks S): returns to the pool every block that holds no
  // sink position (< n_sink_tokens) and lies wholly before first_needed_pos (for a window W and
  // the next query at position p: p - W + 1). Its entry becomes kNoBlock; the table keeps its
  // length and positions. Blocks must be committed first (commit_full_blocks), so a released
  // block that is in the prefix cache stays cached (evictable) for other requests: only its
  // refcount changes. Returns the number of blocks released.
  int32_t release_behind(BlockTable& table, int32_t first_needed_pos, int32_t n_sink_tokens);
  // Blocks the table holds (entries that are not kNoBlock).
  int32_t live_blocks(const BlockTable& table) const {
    return static_cast<int32_t>(table.blocks.size()) - table.n_released;
  }

  // Slot index (block * block_size + offset) of token position `pos` of a table.
  int32_t slot_of(const BlockTable& table, int32_t pos) const;

  // Full consistency check (free list, LRU, refcounts, cache index, fill counts); for tests.
  Status check_invariants() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    int32_t n_filled = 0;      // token slots holding (or being written with) a token
    uint64_t key = 0;          // prefix-cache key when serial != 0
    uint64_t serial = 0;       // cache entry id; 0 = not in the prefix cache
    uint64_t parent_serial = 0;
    BlockId lru_prev = -1;     // evictable list links (valid when cached and ref_count == 0)
    BlockId lru_next = -1;
  };

  explicit BlockPool(const BlockPoolConfig& config);

  BlockId allocate_one();  // -1 when nothing is allocatable
  void acquire(BlockId id);
  void release_one(BlockId id);
  void set_fill(BlockId id, int32_t n_filled);
  void lru_push_back(BlockId id);
  void lru_remove(BlockId id);
  void uncache(BlockId id);
  bool block_matches(BlockId id, std::span<const int32_t> tokens, uint64_t parent_serial) const;
  std::span<const int32_t> block_tokens(BlockId id) const;
  uint64_t hash(uint64_t parent_key, std::span<const int32_t> tokens) const;

  BlockPoolConfig config_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;    // [n_blocks, block_size]: tokens of cached blocks
  std::vector<BlockId> free_;      // never-cached free blocks; back() is allocated next
  BlockId lru_head_ = -1;          // oldest evictable block
  BlockId lru_tail_ = -1;
  int32_t n_evictable_ = 0;
  int32_t n_used_ = 0;
  int64_t n_filled_used_ = 0;      // sum of n_filled over blocks with ref_count > 0
  std::unordered_map<uint64_t, BlockId> index_;  // key -> cached block
  uint64_t next_serial_ = 1;
  int64_t n_queried_blocks_ = 0;
  int64_t n_hit_blocks_ = 0;
  int64_t n_evictions_ = 0;
};

}  // namespace frugal::kv

// BlockPool::check_invariants: a full walk of the pool's bookkeeping, for tests and debug builds.
#include <string>
#include <vector>

#include "kv/block_pool.h"

namespace frugal::kv {
namespace {

Status broken(const std::string& what) { return internal_error("block pool invariant: " + what); }

}  // namespace

Status BlockPool::check_invariants() const {
  const int32_t n = n_blocks();
  const int32_t bs = config_.block_size;
  std::vector<int> seen(n, 0);  // 1: free list, 2: evictable list
  for (BlockId id : free_) {
    if (id < 0 || id >= n || seen[id] != 0) return broken("free list holds a bad or repeated id");
    seen[id] = 1;
    if (blocks_[id].ref_count != 0 || blocks_[id].serial != 0) return broken("free block in use or cached");
  }
  int32_t n_lru = 0;
  BlockId prev = -1;
  for (BlockId id = lru_head_; id >= 0; id = blocks_[id].lru_next) {
    if (id >= n || seen[id] != 0 || n_lru > n) return broken("evictable list loops or repeats");
    seen[id] = 2;
    ++n_lru;
    const Block& b = blocks_[id];
    if (b.lru_prev != prev) return broken("evictable list back link");
    if (b.ref_count != 0 || b.serial == 0) return broken("evictable block in use or uncached");
    prev = id;
  }
  if (prev != lru_tail_ || n_lru != n_evictable_) return broken("evictable list tail or count");

  int32_t n_used = 0;
  int32_t n_cached = 0;
  int64_t filled = 0;
  for (BlockId id = 0; id < n; ++id) {
    const Block& b = blocks_[id];
    if (b.ref_count < 0) return broken("negative refcount on block " + std::to_string(id));
    if (b.n_filled < 0 || b.n_filled > bs) return broken("fill out of range");
    if (b.ref_count > 0) {
      if (seen[id] != 0) return broken("used block on a free list");
      ++n_used;
      filled += b.n_filled;
    } else if (seen[id] == 0) {
      return broken("block " + std::to_string(id) + " leaked: unused and on no list");
    }
    if (b.serial != 0) {
      ++n_cached;
      if (b.n_filled != bs) return broken("cached block not full");
      const auto it = index_.find(b.key);
      if (it == index_.end() || it->second != id) return broken("cached block missing from the index");
    }
  }
  if (n_used != n_used_) return broken("used count");
  if (filled != n_filled_used_) return broken("fill sum");
  if (n_cached != static_cast<int32_t>(index_.size())) return broken("index holds stale entries");
  return Status::ok();
}

}  // namespace frugal::kv

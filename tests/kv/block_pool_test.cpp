// Block pool tests. Block ids, refcounts and LRU order are worked out by hand in the comments:
// a fresh pool hands out block 0 first, freed never-cached blocks are reused last-freed-first,
// and a table is released last block first.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace frugal::kv {
namespace {

BlockPool make_pool(int32_t n_blocks, int32_t block_size, bool caching = true, PrefixHashFn fn = nullptr) {
  auto pool = BlockPool::create(BlockPoolConfig{
      .n_blocks = n_blocks, .block_size = block_size, .enable_prefix_caching = caching, .hash_fn = fn});
  EXPECT_TRUE(pool.is_ok());
  return std::move(pool).value();
}

std::vector<int32_t> iota(int32_t first, int32_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::span<const int32_t> head(const std::vector<int32_t>& v, size_t n) { return {v.data(), n}; }

TEST(BlockPool, ConfigValidation) {
  EXPECT_EQ(BlockPool::create({.n_blocks = 0}).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(BlockPool::create({.n_blocks = 4, .block_size = 0}).status().message().find("block_size"),
            std::string::npos);
}

TEST(BlockPool, GrowAllocatesInOrderAndTracksFragmentation) {
  BlockPool pool = make_pool(4, 4);
  BlockTable a;
  ASSERT_TRUE(pool.grow(a, 6));
  EXPECT_EQ(a.blocks, (std::vector<BlockId>{0, 1}));
  EXPECT_DOUBLE_EQ(pool.stats().fragmentation, 0.25);  // 8 slots, 6 tokens
  ASSERT_TRUE(pool.grow(a, 9));
  EXPECT_EQ(a.blocks, (std::vector<BlockId>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(pool.stats().fragmentation, 0.25);  // 12 slots, 9 tokens
  EXPECT_EQ(pool.slot_of(a, 8), 8);                    // block 2, offset 0
  EXPECT_EQ(pool.n_free(), 1);

  BlockTable b;
  EXPECT_FALSE(pool.grow(b, 8));  // needs 2, 1 free: nothing changes
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(pool.n_free(), 1);
  ASSERT_TRUE(pool.grow(b, 3));
  EXPECT_EQ(b.blocks, (std::vector<BlockId>{3}));
  EXPECT_EQ(pool.slot_of(b, 2), 14);  // block 3 * 4 + 2

  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_DOUBLE_EQ(pool.stats().fragmentation, 0.0);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, PrefixHitSharesBlocksAndLruEvictsTailFirst) {
  BlockPool pool = make_pool(4, 4);
  const std::vector<int32_t> p = iota(1, 10);  // 1..10: two full blocks and a partial one
  BlockTable a;
  ASSERT_TRUE(pool.attach(a, {}, 10));
  EXPECT_EQ(a.blocks, (std::vector<BlockId>{0, 1, 2}));
  pool.commit_full_blocks(a, p, 10);  // blocks 0 (1..4) and 1 (5..8) enter the cache
  EXPECT_EQ(pool.stats().n_cached, 2);

  // Same first 8 tokens, different tail.
  const std::vector<int32_t> q = {1, 2, 3, 4, 5, 6, 7, 8, 99, 100, 101};
  const auto hits = pool.match_prefix(head(q, q.size() - 1));
  EXPECT_EQ(hits, (std::vector<BlockId>{0, 1}));
  BlockTable b;
  ASSERT_TRUE(pool.attach(b, hits, 11));
  EXPECT_EQ(b.blocks, (std::vector<BlockId>{0, 1, 3}));
  EXPECT_EQ(b.n_tokens, 11);
  EXPECT_EQ(pool.ref_count(0), 2);
  EXPECT_EQ(pool.ref_count(1), 2);
  EXPECT_EQ(pool.n_used(), 4);

  pool.release(a);  // block 2 to the free list; 0 and 1 keep one reference
  EXPECT_EQ(pool.ref_count(0), 1);
  pool.release(b);  // 3 to the free list, then 1 and 0 to the LRU: [1 (oldest), 0]
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_EQ(pool.stats().n_evictable, 2);

  // Three unrelated blocks: free list gives 3 then 2 (last freed first), then block 1 is evicted.
  BlockTable c;
  ASSERT_TRUE(pool.grow(c, 12));
  EXPECT_EQ(c.blocks, (std::vector<BlockId>{3, 2, 1}));
  EXPECT_EQ(pool.stats().n_evictions, 1);
  // The prefix's first block survived its tail.
  EXPECT_EQ(pool.match_prefix(p), (std::vector<BlockId>{0}));
  pool.release(c);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, EvictableHitsAreNotCountedTwice) {
  BlockPool pool = make_pool(3, 4);
  const std::vector<int32_t> p = iota(1, 13);
  BlockTable a;
  ASSERT_TRUE(pool.attach(a, {}, 8));
  pool.commit_full_blocks(a, p, 8);
  pool.release(a);  // blocks 0, 1 cached with refcount 0; block 2 never used
  EXPECT_EQ(pool.n_free(), 3);
  const auto hits = pool.match_prefix(head(p, 12));
  ASSERT_EQ(hits.size(), 2u);
  // 13 tokens = 4 blocks: 2 hits + 2 fresh, but taking the hits leaves only 1 allocatable.
  EXPECT_FALSE(pool.can_attach(hits, 13));
  BlockTable b;
  EXPECT_FALSE(pool.attach(b, hits, 13));
  EXPECT_EQ(pool.ref_count(0), 0);  // the failed attach took nothing
  EXPECT_TRUE(pool.can_attach(hits, 12));
  // 12 tokens take 1 fresh block: with 1 block to keep free nothing is left for it.
  EXPECT_FALSE(pool.can_attach(hits, 12, /*keep_free=*/1));
  EXPECT_TRUE(pool.can_attach({}, 4, /*keep_free=*/2));   // 1 of 3 free, 2 kept
  EXPECT_FALSE(pool.can_attach({}, 5, /*keep_free=*/2));  // 2 + 2 > 3
  ASSERT_TRUE(pool.attach(b, hits, 12));
  EXPECT_EQ(b.blocks, (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(pool.n_free(), 0);
  pool.release(b);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

uint64_t constant_hash(uint64_t, std::span<const int32_t>) { return 42; }

TEST(BlockPool, HashCollisionNeverReturnsWrongBlock) {
  BlockPool pool = make_pool(4, 4, true, constant_hash);
  const std::vector<int32_t> p = iota(1, 8);
  BlockTable a;
  ASSERT_TRUE(pool.attach(a, {}, 8));
  pool.commit_full_blocks(a, p, 8);  // block 0 takes key 42; block 1 collides and is not cached
  EXPECT_EQ(pool.stats().n_cached, 1);
  EXPECT_TRUE(a.chain_broken);

  const std::vector<int32_t> other = {9, 9, 9, 9, 9};
  EXPECT_TRUE(pool.match_prefix(other).empty());  // key 42 found, tokens differ: no hit
  // First block matches; the second block's key points at block 0, whose parent differs.
  EXPECT_EQ(pool.match_prefix(p), (std::vector<BlockId>{0}));
  // Same tokens as block 0 but in second position: key hit, parent entry differs.
  const std::vector<int32_t> shifted = {7, 7, 7, 7, 1, 2, 3, 4};
  EXPECT_TRUE(pool.match_prefix(shifted).empty());
  // Block 0's tokens twice: the second lookup finds block 0 by key with equal tokens, but its
  // parent entry is the root, not block 0, so only the first block may hit.
  const std::vector<int32_t> repeated = {1, 2, 3, 4, 1, 2, 3, 4};
  EXPECT_EQ(pool.match_prefix(repeated), (std::vector<BlockId>{0}));
  pool.release(a);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, DuplicateBlocksKeepTheChainGoing) {
  BlockPool pool = make_pool(8, 4);
  const std::vector<int32_t> p = iota(1, 12);
  BlockTable a, b;
  ASSERT_TRUE(pool.attach(a, {}, 8));
  ASSERT_TRUE(pool.attach(b, {}, 12));  // computed side by side, before a was committed
  pool.commit_full_blocks(a, p, 8);     // a: blocks 0, 1 cached
  pool.commit_full_blocks(b, p, 12);    // b: 2, 3 duplicate 0, 1; block 4 (9..12) cached after 1
  EXPECT_EQ(pool.stats().n_cached, 3);
  EXPECT_EQ(pool.match_prefix(p), (std::vector<BlockId>{0, 1, 4}));
  pool.release(a);
  pool.release(b);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, CachingOffFreesStraightToFreeList) {
  BlockPool pool = make_pool(2, 4, false);
  const std::vector<int32_t> p = iota(1, 8);
  BlockTable a;
  ASSERT_TRUE(pool.attach(a, {}, 8));
  pool.commit_full_blocks(a, p, 8);
  EXPECT_EQ(pool.stats().n_cached, 0);
  pool.release(a);
  EXPECT_TRUE(pool.match_prefix(p).empty());
  EXPECT_EQ(pool.stats().n_evictable, 0);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, HitRateCounters) {
  BlockPool pool = make_pool(2, 4);
  pool.record_lookup(3, 2);
  pool.record_lookup(1, 0);
  EXPECT_EQ(pool.stats().n_queried_blocks, 4);
  EXPECT_EQ(pool.stats().n_hit_blocks, 2);
  EXPECT_DOUBLE_EQ(pool.stats().hit_rate, 0.5);
}

TEST(BlockPoolDeathTest, DoubleReleaseAborts) {
  BlockPool pool = make_pool(2, 4);
  BlockTable a;
  ASSERT_TRUE(pool.grow(a, 4));
  BlockTable copy = a;
  pool.release(a);
  EXPECT_DEATH(pool.release(copy), "released more often than acquired");
}

// Window 6 + 2 sinks, block size 4 (hand-worked): the next query at position p sees [0, 2) and
// (p - 6, p], so a block can go back once it holds no position < 2 and all of it is <= p - 6.
TEST(BlockPool, ReleaseBehindWindowKeepsSinksAndCachedBlocks) {
  BlockPool pool = make_pool(8, 4);
  const std::vector<int32_t> toks = iota(1, 20);
  BlockTable a;
  ASSERT_TRUE(pool.attach(a, {}, 14));  // positions 0..13: blocks 0..3
  EXPECT_EQ(a.blocks, (std::vector<BlockId>{0, 1, 2, 3}));
  pool.commit_full_blocks(a, toks, 14);  // blocks 0, 1, 2 full and cached
  // Next query p = 14: first needed 14 - 6 + 1 = 9. Block 0 holds the sinks; block 1 (4..7)
  // is wholly below 9; block 2 (8..11) holds 9: kept.
  EXPECT_EQ(pool.release_behind(a, 9, 2), 1);
  EXPECT_EQ(a.blocks, (std::vector<BlockId>{0, kNoBlock, 2, 3}));
  EXPECT_EQ(pool.live_blocks(a), 3);
  EXPECT_EQ(pool.ref_count(1), 0);
  EXPECT_EQ(pool.stats().n_evictable, 1);  // cached: stays reusable as a prefix
  EXPECT_EQ(pool.n_used(), 3);
  EXPECT_TRUE(pool.check_invariants().is_ok());
  // Nothing more until the window moves past block 2; calling again changes nothing.
  EXPECT_EQ(pool.release_behind(a, 9, 2), 0);
  ASSERT_TRUE(pool.grow(a, 17));  // p = 17: blocks 0..4
  pool.commit_full_blocks(a, toks, 17);
  EXPECT_EQ(pool.release_behind(a, 12, 2), 1);  // block 2 (8..11) <= 11
  EXPECT_EQ(a.blocks, (std::vector<BlockId>{0, kNoBlock, kNoBlock, 3, 4}));
  // Another request with the same first 12 tokens still hits the whole cached prefix.
  EXPECT_EQ(pool.match_prefix(head(toks, 12)), (std::vector<BlockId>{0, 1, 2}));
  // release skips the holes.
  pool.release(a);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.n_free(), 8);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

TEST(BlockPool, ReleaseBehindWithoutCachingFreesBlocks) {
  BlockPool pool = make_pool(4, 4, /*caching=*/false);
  const std::vector<int32_t> toks = iota(1, 16);
  BlockTable a;
  ASSERT_TRUE(pool.attach(a, {}, 16));
  pool.commit_full_blocks(a, toks, 16);
  EXPECT_EQ(pool.n_free(), 0);
  // No sinks, next query 16, window 4: first needed 13, so blocks 0..2 (positions 0..11) go.
  EXPECT_EQ(pool.release_behind(a, 13, 0), 3);
  EXPECT_EQ(pool.n_free(), 3);
  EXPECT_EQ(pool.stats().n_evictable, 0);
  BlockTable b;
  ASSERT_TRUE(pool.grow(b, 12));  // the freed blocks serve another sequence at once
  pool.release(b);
  pool.release(a);
  EXPECT_TRUE(pool.check_invariants().is_ok());
}

}  // namespace
}  // namespace frugal::kv

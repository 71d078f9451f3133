// ExpertCache (byte-budget LRU with pins), its partitioned variant, and the
// budget helpers (floor, token demand, --cache-mb auto). Expected values are
// worked out by hand from the LRU definition in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "moe/cache_budget.h"
#include "moe/expert_cache.h"
#include "util/error.h"
#include "test_support.h"

namespace sluice::moe {
namespace SLUICE_TEST_FILE {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using sluice::test::error_of;

// A payload that counts its live instances, to see memory really released.
struct CountedPayload final : CachePayload {
  explicit CountedPayload(int* live, int tag = 0) : live(live), tag(tag) { ++*live; }
  ~CountedPayload() override { --*live; }
  int* live;
  int tag;
};

ExpertKey K(int layer, int expert) { return {layer, expert}; }

TEST(ExpertCacheLru, OrderAndByteAccounting) {
  ExpertCache c(100);
  EXPECT_TRUE(c.insert(K(0, 1), 40).cached());  // [A]            40
  EXPECT_TRUE(c.insert(K(0, 2), 30).cached());  // [A B]          70
  EXPECT_TRUE(c.insert(K(1, 1), 30).cached());  // [A B C]       100
  EXPECT_THAT(c.lru_order(), ElementsAre(K(0, 1), K(0, 2), K(1, 1)));
  EXPECT_TRUE(c.acquire(K(0, 1)));              // hit: A to MRU -> [B C A]
  EXPECT_FALSE(c.acquire(K(3, 3)));             // miss
  EXPECT_THAT(c.lru_order(), ElementsAre(K(0, 2), K(1, 1), K(0, 1)));
  // D (50): 0 free, evict B (30 free), then C (60 free) -> [A D] 90.
  EXPECT_TRUE(c.insert(K(2, 0), 50).cached());
  EXPECT_THAT(c.lru_order(), ElementsAre(K(0, 1), K(2, 0)));
  EXPECT_FALSE(c.contains(K(0, 2)));
  EXPECT_FALSE(c.contains(K(1, 1)));
  ExpertCacheStats s = c.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.inserts, 4u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.bytes_resident, 90u);
  EXPECT_EQ(s.peak_bytes, 100u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.pinned, 0u);
  // E (10) fits in the 10 free bytes: nothing evicted.
  EXPECT_TRUE(c.insert(K(2, 1), 10).cached());
  EXPECT_EQ(c.stats().evictions, 2u);
  EXPECT_EQ(c.stats().bytes_resident, 100u);
}

TEST(ExpertCacheLru, ExactHitsOnAHandMadeSequence) {
  // Budget of 3 equal experts; sequence 1 2 3 1 4 2 5 1 (insert on miss).
  //   1 m [1]; 2 m [1 2]; 3 m [1 2 3]; 1 h [2 3 1]; 4 m evict 2 [3 1 4];
  //   2 m evict 3 [1 4 2]; 5 m evict 1 [4 2 5]; 1 m evict 4 [2 5 1]
  ExpertCache c(3 * 7);
  for (int e : {1, 2, 3, 1, 4, 2, 5, 1}) {
    if (!c.acquire(K(0, e))) c.insert(K(0, e), 7);
  }
  const ExpertCacheStats s = c.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 7u);
  EXPECT_EQ(s.evictions, 4u);
  EXPECT_THAT(c.lru_order(), ElementsAre(K(0, 2), K(0, 5), K(0, 1)));
}

TEST(ExpertCacheLru, PinnedEntriesAreNotEvicted) {
  ExpertCache c(30);
  ExpertCache::Pin a = c.insert(K(0, 0), 10);  // stays pinned
  c.insert(K(0, 1), 10);
  c.insert(K(0, 2), 10);
  EXPECT_EQ(c.stats().pinned, 1u);
  // LRU is A, but A is pinned: B goes.
  EXPECT_TRUE(c.insert(K(0, 3), 10).cached());
  EXPECT_THAT(c.lru_order(), ElementsAre(K(0, 0), K(0, 2), K(0, 3)));
  {
    ExpertCache::Pin c2 = c.acquire(K(0, 2));
    ExpertCache::Pin c3 = c.acquire(K(0, 3));
    // Everything pinned: the insert is refused and nothing is evicted.
    ExpertCache::Pin d = c.insert(K(0, 4), 10);
    EXPECT_TRUE(d);
    EXPECT_FALSE(d.cached());
    EXPECT_EQ(c.stats().rejected, 1u);
    EXPECT_EQ(c.stats().evictions, 1u);
    EXPECT_EQ(c.stats().pinned, 3u);
  }
  a.reset();
  EXPECT_EQ(c.stats().pinned, 0u);
  // Now A (least recently used) can go.
  EXPECT_TRUE(c.insert(K(0, 4), 10).cached());
  EXPECT_FALSE(c.contains(K(0, 0)));
}

// peek() is for speculative fetches: it pins, but neither counts nor makes
// the entry recently used, so a wrong guess leaves eviction order as it was.
TEST(ExpertCacheLru, PeekPinsWithoutCountingOrReordering) {
  ExpertCache c(30);
  c.insert(K(0, 0), 10);
  c.insert(K(0, 1), 10);
  c.insert(K(0, 2), 10);  // [A B C]
  ExpertCache::Pin a = c.peek(K(0, 0));
  EXPECT_TRUE(a.cached());
  EXPECT_FALSE(c.peek(K(0, 9)));
  EXPECT_THAT(c.lru_order(), ElementsAre(K(0, 0), K(0, 1), K(0, 2)));
  EXPECT_EQ(c.stats().hits, 0u);
  EXPECT_EQ(c.stats().misses, 0u);
  EXPECT_EQ(c.stats().pinned, 1u);
  // A is least recently used but pinned: B goes.
  EXPECT_TRUE(c.insert(K(0, 3), 10).cached());
  EXPECT_THAT(c.lru_order(), ElementsAre(K(0, 0), K(0, 2), K(0, 3)));
  a.reset();
  EXPECT_EQ(c.stats().pinned, 0u);
  // Unpinned and still least recently used: A goes next.
  EXPECT_TRUE(c.insert(K(0, 4), 10).cached());
  EXPECT_THAT(c.lru_order(), ElementsAre(K(0, 2), K(0, 3), K(0, 4)));
}

TEST(ExpertCacheLru, PinsCountPerHolderAndMove) {
  ExpertCache c(10);
  ExpertCache::Pin p1 = c.insert(K(0, 0), 10);
  ExpertCache::Pin p2 = c.acquire(K(0, 0));
  ExpertCache::Pin moved = std::move(p1);
  EXPECT_FALSE(p1);  // NOLINT(bugprone-use-after-move)
  p2.reset();
  EXPECT_EQ(c.stats().pinned, 1u);           // `moved` still pins it
  EXPECT_FALSE(c.insert(K(0, 1), 10).cached());
  moved = ExpertCache::Pin();
  EXPECT_TRUE(c.insert(K(0, 1), 10).cached());
}

TEST(ExpertCacheLru, PayloadsAreFreedOnEvictionAndOversizeIsNotCached) {
  int live = 0;
  ExpertCache c(100);
  {
    ExpertCache::Pin p = c.insert(K(0, 0), 60, std::make_unique<CountedPayload>(&live, 7));
    ASSERT_TRUE(p.cached());
    EXPECT_EQ(static_cast<CountedPayload*>(p.payload())->tag, 7);
  }
  EXPECT_EQ(live, 1);  // resident while cached
  ExpertCache::Pin hit = c.acquire(K(0, 0));
  EXPECT_EQ(static_cast<CountedPayload*>(hit.payload())->tag, 7);
  hit.reset();
  // Oversize (101 > 100): not cached, nothing evicted, payload usable until the pin goes.
  {
    ExpertCache::Pin big = c.insert(K(0, 1), 101, std::make_unique<CountedPayload>(&live, 8));
    EXPECT_TRUE(big);
    EXPECT_FALSE(big.cached());
    EXPECT_EQ(static_cast<CountedPayload*>(big.payload())->tag, 8);
    EXPECT_EQ(live, 2);
    EXPECT_TRUE(c.contains(K(0, 0)));
  }
  EXPECT_EQ(live, 1);
  EXPECT_EQ(c.stats().rejected, 1u);
  // 50 more bytes evict the first payload: its memory is released.
  c.insert(K(0, 2), 50, std::make_unique<CountedPayload>(&live, 9));
  EXPECT_EQ(live, 1);
  EXPECT_EQ(c.stats().evictions, 1u);
  // A duplicate key is not cached twice.
  ExpertCache::Pin dup = c.insert(K(0, 2), 50, std::make_unique<CountedPayload>(&live, 10));
  EXPECT_FALSE(dup.cached());
  EXPECT_EQ(c.stats().bytes_resident, 50u);
  dup.reset();
  c.clear();
  EXPECT_EQ(live, 0);
  EXPECT_EQ(c.stats().bytes_resident, 0u);
}

TEST(ExpertCacheLru, ZeroBudgetCachesNothing) {
  ExpertCache c(0);
  EXPECT_FALSE(c.insert(K(0, 0), 1).cached());
  EXPECT_FALSE(c.acquire(K(0, 0)));
  EXPECT_EQ(c.stats().entries, 0u);
}

TEST(ExpertCacheLru, ClearKeepsPinnedEntries) {
  ExpertCache c(20);
  ExpertCache::Pin keep = c.insert(K(1, 1), 10);
  c.insert(K(1, 2), 10);
  c.clear();
  EXPECT_THAT(c.lru_order(), ElementsAre(K(1, 1)));
  EXPECT_EQ(c.stats().bytes_resident, 10u);
  EXPECT_EQ(c.stats().evictions, 0u);  // clearing is not eviction
}

TEST(ExpertCachePartitioned, EachLayerHasItsOwnKSlots) {
  // Layer 0 experts are 10 bytes, layer 1 experts 20 bytes; K = 2.
  PartitionedExpertCache c({10, 20}, 2);
  auto touch = [&](int l, int e) {
    if (c.acquire(K(l, e))) return true;
    c.insert(K(l, e), l == 0 ? 10 : 20);
    return false;
  };
  // Layer 0: 1 2 3 1 -> m m m(evict 1) m(evict 2). Layer 1: 5 6 5 7 5 -> m m h m(evict 6) h.
  EXPECT_FALSE(touch(0, 1));
  EXPECT_FALSE(touch(1, 5));
  EXPECT_FALSE(touch(0, 2));
  EXPECT_FALSE(touch(1, 6));
  EXPECT_FALSE(touch(0, 3));
  EXPECT_TRUE(touch(1, 5));
  EXPECT_FALSE(touch(0, 1));
  EXPECT_FALSE(touch(1, 7));
  EXPECT_TRUE(touch(1, 5));
  const ExpertCacheStats s = c.stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 7u);
  EXPECT_EQ(s.evictions, 3u);
  EXPECT_EQ(s.bytes_resident, 2 * 10u + 2 * 20u);
  EXPECT_THAT(c.layer(0).lru_order(), ElementsAre(K(0, 3), K(0, 1)));
  EXPECT_THAT(c.layer(1).lru_order(), ElementsAre(K(1, 7), K(1, 5)));
  EXPECT_THAT(error_of([&] { c.acquire(K(2, 0)); }), HasSubstr("layer 2 out of range"));
  EXPECT_THAT(error_of([] { PartitionedExpertCache bad({1}, -1); }), HasSubstr("--per-layer"));
}

// ---- budget helpers ----

// Mixtral-8x7B-like: 32 MoE layers of 8 experts, top-2, 94.5 MiB per expert.
std::vector<MoeLayerShape> mixtral_like() {
  std::vector<MoeLayerShape> layers(32, MoeLayerShape{189 * kMiB / 2, 8, 2});
  layers.insert(layers.begin(), MoeLayerShape{});  // a dense layer: ignored
  return layers;
}

TEST(CacheBudget, MechanicalFloorAndTokenDemand) {
  const auto layers = mixtral_like();
  EXPECT_EQ(cache_floor_bytes(layers, 1), 189 * kMiB);      // 2 experts
  EXPECT_EQ(cache_floor_bytes(layers, 3), 567 * kMiB);      // 6 experts
  EXPECT_EQ(cache_floor_bytes(layers, 64), 756 * kMiB);     // capped at all 8
  EXPECT_EQ(token_demand_bytes(layers), 6048 * kMiB);       // 32 x 2 x 94.5
  // The widest layer decides: one layer with 200 MiB experts.
  auto mixed = layers;
  mixed[5].expert_bytes = 200 * kMiB;
  EXPECT_EQ(cache_floor_bytes(mixed, 1), 400 * kMiB);
  // A top-k above the layer's expert count touches every expert once (inspect,
  // the run summary and the cache all size demand here).
  const std::vector<MoeLayerShape> few = {{100, 2, 4}, {0, 8, 4}, {300, 8, 4}, {50, 0, 4}};
  EXPECT_EQ(token_demand_bytes(few), 2u * 100 + 4u * 300);
  EXPECT_EQ(cache_floor_bytes(few, 1), 4u * 300);
  EXPECT_EQ(token_demand_bytes(std::vector<MoeLayerShape>{}), 0u);

  EXPECT_NO_THROW(check_cache_floor(0, layers, 3));          // cache off
  EXPECT_NO_THROW(check_cache_floor(567 * kMiB, layers, 3));
  EXPECT_THAT(error_of([&] { check_cache_floor(566 * kMiB, layers, 3); }),
              AllOf(HasSubstr("--cache-mb 566"), HasSubstr("floor of 567 MiB"), HasSubstr("6 experts"),
                    HasSubstr("94.5 MiB"), HasSubstr("ubatch 3")));
  EXPECT_EQ(cache_demand_warning(6048 * kMiB, layers), "");
  EXPECT_EQ(cache_demand_warning(0, layers), "");
  EXPECT_THAT(cache_demand_warning(6047 * kMiB, layers),
              AllOf(HasSubstr("--cache-mb 6047"), HasSubstr("6048 MiB")));
  EXPECT_THAT(error_of([&] { cache_floor_bytes(layers, 0); }), HasSubstr("--ubatch"));
}

TEST(CacheBudget, ParseCacheMb) {
  EXPECT_TRUE(parse_cache_mb("auto").automatic);
  EXPECT_EQ(parse_cache_mb("off").mib, 0u);
  EXPECT_EQ(parse_cache_mb("0").mib, 0u);
  EXPECT_EQ(parse_cache_mb("12096").mib, 12096u);
  EXPECT_FALSE(parse_cache_mb("12096").automatic);
  for (const char* bad : {"", "-5", "12GB", "1.5", "9999999999999"}) {
    EXPECT_THAT(error_of([&] { parse_cache_mb(bad); }), HasSubstr("--cache-mb")) << bad;
  }
}

constexpr const char* kMeminfo =
    "MemTotal:       32768000 kB\n"
    "MemFree:         1024000 kB\n"
    "MemAvailable:   16384000 kB\n"  // 16000 MiB
    "Buffers:          102400 kB\n";

TEST(CacheBudget, AutoSizingFromMeminfo) {
  AutoCacheInputs in;
  in.dense_bytes = 1500 * kMiB;
  in.kv_bytes = 512 * kMiB;
  in.scratch_bytes = 256 * kMiB;
  in.headroom_bytes = 1024 * kMiB;
  in.floor_bytes = 189 * kMiB;
  in.ceil_bytes = 24192 * kMiB;  // all 256 experts
  // 16000 - 1500 - 512 - 256 - 1024 = 12708 MiB.
  AutoCacheBudget b = auto_cache_budget(kMeminfo, in);
  EXPECT_EQ(b.bytes, 12708 * kMiB);
  EXPECT_FALSE(b.below_floor);
  EXPECT_EQ(b.how,
            "--cache-mb auto: MemAvailable 16000 MiB - dense 1500 MiB - KV 512 MiB - scratch 256 MiB - "
            "headroom 1024 MiB leaves 12708 MiB; cache budget 12708 MiB.");
  // Capped by the ceiling.
  in.ceil_bytes = 6048 * kMiB;
  b = auto_cache_budget(kMeminfo, in);
  EXPECT_EQ(b.bytes, 6048 * kMiB);
  EXPECT_THAT(b.how, HasSubstr("capped at 6048 MiB"));
  // Not even the floor fits: the floor, flagged.
  in.dense_bytes = 15000 * kMiB;
  b = auto_cache_budget(kMeminfo, in);
  EXPECT_EQ(b.bytes, 189 * kMiB);
  EXPECT_TRUE(b.below_floor);
  EXPECT_THAT(b.how, AllOf(HasSubstr("leaves 0 MiB"), HasSubstr("mechanical floor")));
  // Rounded down to whole MiB.
  in.dense_bytes = 1500 * kMiB + 1;
  in.ceil_bytes = 0;
  EXPECT_EQ(auto_cache_budget(kMeminfo, in).bytes, 12707 * kMiB);
}

// Below one token's expert demand an LRU cache never hits at decode: off.
TEST(CacheBudget, AutoBelowOneTokensDemandTurnsTheCacheOff) {
  AutoCacheInputs in;
  in.dense_bytes = 4752 * kMiB;
  in.headroom_bytes = 1024 * kMiB;
  in.floor_bytes = 137 * kMiB;
  in.demand_bytes = 10225 * kMiB;  // 16000 - 4752 - 1024 = 10224 MiB leaves 1 MiB too little
  AutoCacheBudget b = auto_cache_budget(kMeminfo, in);
  EXPECT_EQ(b.bytes, 0u);
  EXPECT_TRUE(b.below_demand);
  EXPECT_EQ(b.how,
            "--cache-mb auto: MemAvailable 16000 MiB - dense 4752 MiB - KV 0 MiB - scratch 0 MiB - headroom 1024 MiB "
            "leaves 10224 MiB, below one token's expert demand of 10225 MiB: an LRU cache smaller than that never "
            "hits at decode (an expert returns only after the token's other experts have gone through it); cache "
            "off.");
  in.demand_bytes = 10224 * kMiB;  // exactly one token: kept
  b = auto_cache_budget(kMeminfo, in);
  EXPECT_EQ(b.bytes, 10224 * kMiB);
  EXPECT_FALSE(b.below_demand);
}

}  // namespace
}  // namespace sluice::moe

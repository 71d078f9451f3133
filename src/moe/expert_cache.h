// ExpertCache — a fixed-budget LRU of whole routed experts (gate+up+down),
// keyed by (layer, expert) and accounted in BYTES.
//
// Pure policy plus storage accounting: the cache never reads files and never
// does math. Each entry may carry an opaque payload (the store attaches the
// buffer holding the expert's bytes); the payload is destroyed when the entry
// is evicted, so the memory really held follows the budget. The cache
// simulator inserts entries without payloads and runs the very same code.
//
// Invariants: bytes_resident <= budget at all times; a pinned entry is never
// evicted; an entry larger than the whole budget (or one that cannot fit
// because everything else is pinned) is not cached — insert() then hands the
// payload back inside an uncached Pin, so the caller can still use it.
//
// Thread-safety: every method (and Pin release) is internally locked, so the
// cache may be shared by the compute thread and read-lane threads. Payloads
// are destroyed outside the lock. A Pin must not outlive its cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace sluice::moe {

struct ExpertKey {
  int layer = 0;
  int expert = 0;
  bool operator==(const ExpertKey&) const = default;
};

// What a storage side attaches to an entry. Destroyed on eviction.
class CachePayload {
 public:
  virtual ~CachePayload() = default;
};

struct ExpertCacheStats {
  uint64_t hits = 0;        // acquire() found the entry
  uint64_t misses = 0;      // acquire() did not
  uint64_t inserts = 0;     // entries that were cached
  uint64_t rejected = 0;    // insert() that could not cache (oversize / all pinned / duplicate)
  uint64_t evictions = 0;   // entries dropped to make room (clear() does not count)
  uint64_t bytes_resident = 0;
  uint64_t peak_bytes = 0;  // high-water mark of bytes_resident
  uint64_t entries = 0;
  uint64_t pinned = 0;      // entries with at least one live Pin
};

class ExpertCache {
  struct Entry;

 public:
  // budget_bytes == 0 is a valid cache that never holds anything.
  explicit ExpertCache(uint64_t budget_bytes);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  // Keeps an entry from being evicted while alive (or owns an uncached
  // payload). Move-only; empty (false) after a miss or a move.
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& o) noexcept;
    Pin& operator=(Pin&& o) noexcept;
    ~Pin() { reset(); }
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;

    explicit operator bool() const { return entry_ != nullptr || owned_ != nullptr || uncached_; }
    bool cached() const { return entry_ != nullptr; }
    // The payload attached at insert (null for payload-less entries). Stable
    // while this Pin lives.
    CachePayload* payload() const;
    void reset();  // releases the pin (an uncached payload is destroyed)

   private:
    friend class ExpertCache;
    ExpertCache* cache_ = nullptr;
    Entry* entry_ = nullptr;
    std::unique_ptr<CachePayload> owned_;  // uncached insert
    bool uncached_ = false;                // uncached insert without payload
  };

  // Hit: moves the entry to most-recently-used and returns a Pin on it.
  // Miss: returns an empty Pin. Counts a hit or a miss.
  Pin acquire(ExpertKey key);

  // Like acquire() on a hit, but counts nothing and leaves the LRU order as
  // it is; an empty Pin when absent. For a speculative fetch (a prefetch):
  // whether the expert is used is not known yet, so it must not look
  // recently used. The user then calls acquire(), which counts and reorders.
  Pin peek(ExpertKey key);

  // Caches `payload` as `key` costing `bytes`, evicting least-recently-used
  // unpinned entries until it fits. The new entry is most-recently-used and
  // comes back pinned. When it cannot be cached (bytes > budget, not enough
  // unpinned entries to evict, or key already present) nothing is evicted
  // and the returned Pin owns the payload instead (cached() == false).
  Pin insert(ExpertKey key, uint64_t bytes, std::unique_ptr<CachePayload> payload = nullptr);

  bool contains(ExpertKey key) const;         // no stats, no reordering
  std::vector<ExpertKey> lru_order() const;   // least- to most-recently used
  void clear();                               // drops every unpinned entry; keeps stats
  ExpertCacheStats stats() const;
  uint64_t budget() const { return budget_; }

 private:
  struct KeyHash {
    size_t operator()(const ExpertKey& k) const noexcept {
      return std::hash<uint64_t>()((static_cast<uint64_t>(static_cast<uint32_t>(k.layer)) << 32) |
                                   static_cast<uint32_t>(k.expert));
    }
  };
  void unpin(Entry* e);
  Pin pin_locked(Entry& e);  // mu_ held

  const uint64_t budget_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front = least recently used; nodes are stable
  std::unordered_map<ExpertKey, std::list<Entry>::iterator, KeyHash> index_;
  ExpertCacheStats stats_;
};

// The partitioned variant, for comparison: each layer has its own LRU holding
// at most K experts of that layer (budget K x that layer's expert bytes).
// Same Pin/acquire/insert contract, the same LRU code underneath.
class PartitionedExpertCache {
 public:
  // expert_bytes[l]: bytes of one expert of layer l (0 for layers without experts).
  PartitionedExpertCache(const std::vector<uint64_t>& expert_bytes, int k_per_layer);

  ExpertCache::Pin acquire(ExpertKey key);
  // Throws Error when key.layer is out of range.
  ExpertCache::Pin insert(ExpertKey key, uint64_t bytes, std::unique_ptr<CachePayload> payload = nullptr);
  void clear();
  ExpertCacheStats stats() const;  // summed over layers (peak: sum of per-layer peaks)
  const ExpertCache& layer(int l) const;
  int k_per_layer() const { return k_; }

 private:
  size_t checked(int layer) const;  // throws Error when out of range
  ExpertCache& at(int layer);
  int k_;
  std::vector<std::unique_ptr<ExpertCache>> layers_;
};

}  // namespace sluice::moe

#include "moe/expert_cache.h"

#include <string>
#include <utility>

#include "util/error.h"

namespace sluice::moe {

struct ExpertCache::Entry {
  ExpertKey key;
  uint64_t bytes = 0;
  int pins = 0;
  std::unique_ptr<CachePayload> payload;
};

// ---- Pin ----

ExpertCache::Pin::Pin(Pin&& o) noexcept
    : cache_(std::exchange(o.cache_, nullptr)),
      entry_(std::exchange(o.entry_, nullptr)),
      owned_(std::move(o.owned_)),
      uncached_(std::exchange(o.uncached_, false)) {}

ExpertCache::Pin& ExpertCache::Pin::operator=(Pin&& o) noexcept {
  if (this != &o) {
    reset();
    cache_ = std::exchange(o.cache_, nullptr);
    entry_ = std::exchange(o.entry_, nullptr);
    owned_ = std::move(o.owned_);
    uncached_ = std::exchange(o.uncached_, false);
  }
  return *this;
}

CachePayload* ExpertCache::Pin::payload() const {
  // entry_->payload is only replaced on eviction, which a pin prevents.
  return entry_ ? entry_->payload.get() : owned_.get();
}

void ExpertCache::Pin::reset() {
  if (entry_) cache_->unpin(entry_);
  cache_ = nullptr;
  entry_ = nullptr;
  owned_.reset();
  uncached_ = false;
}

// ---- ExpertCache ----

ExpertCache::ExpertCache(uint64_t budget_bytes) : budget_(budget_bytes) {}
ExpertCache::~ExpertCache() = default;

void ExpertCache::unpin(Entry* e) {
  std::lock_guard<std::mutex> lk(mu_);
  if (--e->pins == 0) --stats_.pinned;
}

ExpertCache::Pin ExpertCache::pin_locked(Entry& e) {
  Pin pin;
  if (e.pins++ == 0) ++stats_.pinned;
  pin.cache_ = this;
  pin.entry_ = &e;
  return pin;
}

ExpertCache::Pin ExpertCache::acquire(ExpertKey key) {
  Pin pin;
  std::lock_guard<std::mutex> lk(mu_);
  const auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return pin;
  }
  ++stats_.hits;
  lru_.splice(lru_.end(), lru_, it->second);  // to MRU; iterators stay valid
  return pin_locked(*it->second);
}

ExpertCache::Pin ExpertCache::peek(ExpertKey key) {
  Pin pin;
  std::lock_guard<std::mutex> lk(mu_);
  const auto it = index_.find(key);
  if (it == index_.end()) return pin;
  return pin_locked(*it->second);
}

ExpertCache::Pin ExpertCache::insert(ExpertKey key, uint64_t bytes,
                                     std::unique_ptr<CachePayload> payload) {
  std::vector<std::unique_ptr<CachePayload>> evicted;  // destroyed after unlocking
  Pin pin;
  {
    std::lock_guard<std::mutex> lk(mu_);
    bool fits = bytes <= budget_ && index_.find(key) == index_.end();
    if (fits) {
      // Enough evictable bytes? Decide before evicting anything, so a failed
      // insert leaves the cache untouched.
      uint64_t freeable = budget_ - stats_.bytes_resident;
      for (auto it = lru_.begin(); it != lru_.end() && freeable < bytes; ++it) {
        if (it->pins == 0) freeable += it->bytes;
      }
      fits = freeable >= bytes;
    }
    if (!fits) {
      ++stats_.rejected;
      pin.owned_ = std::move(payload);
      pin.uncached_ = true;
      return pin;
    }
    for (auto it = lru_.begin(); it != lru_.end() && budget_ - stats_.bytes_resident < bytes;) {
      if (it->pins != 0) {
        ++it;
        continue;
      }
      evicted.push_back(std::move(it->payload));
      stats_.bytes_resident -= it->bytes;
      ++stats_.evictions;
      index_.erase(it->key);
      it = lru_.erase(it);
    }
    lru_.push_back(Entry{key, bytes, 1, std::move(payload)});
    const auto node = std::prev(lru_.end());
    index_.emplace(key, node);
    stats_.bytes_resident += bytes;
    if (stats_.bytes_resident > stats_.peak_bytes) stats_.peak_bytes = stats_.bytes_resident;
    ++stats_.inserts;
    ++stats_.pinned;
    stats_.entries = index_.size();
    pin.cache_ = this;
    pin.entry_ = &*node;
  }
  evicted.clear();
  return pin;
}

bool ExpertCache::contains(ExpertKey key) const {
  std::lock_guard<std::mutex> lk(mu_);
  return index_.count(key) != 0;
}

std::vector<ExpertKey> ExpertCache::lru_order() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<ExpertKey> out;
  out.reserve(lru_.size());
  for (const Entry& e : lru_) out.push_back(e.key);
  return out;
}

void ExpertCache::clear() {
  std::vector<std::unique_ptr<CachePayload>> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = lru_.begin(); it != lru_.end();) {
      if (it->pins != 0) {
        ++it;
        continue;
      }
      dropped.push_back(std::move(it->payload));
      stats_.bytes_resident -= it->bytes;
      index_.erase(it->key);
      it = lru_.erase(it);
    }
    stats_.entries = index_.size();
  }
}

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  ExpertCacheStats s = stats_;
  s.entries = index_.size();
  return s;
}

// ---- PartitionedExpertCache ----

PartitionedExpertCache::PartitionedExpertCache(const std::vector<uint64_t>& expert_bytes, int k_per_layer)
    : k_(k_per_layer) {
  if (k_per_layer < 0) {
    throw Error("--per-layer: capacity must be >= 0 experts (got " + std::to_string(k_per_layer) + ")");
  }
  layers_.reserve(expert_bytes.size());
  for (uint64_t b : expert_bytes) {
    layers_.push_back(std::make_unique<ExpertCache>(b * static_cast<uint64_t>(k_per_layer)));
  }
}

size_t PartitionedExpertCache::checked(int layer) const {
  if (layer < 0 || static_cast<size_t>(layer) >= layers_.size()) {
    throw Error("partitioned expert cache: layer " + std::to_string(layer) + " out of range (" +
                std::to_string(layers_.size()) + " layers)");
  }
  return static_cast<size_t>(layer);
}

ExpertCache& PartitionedExpertCache::at(int layer) { return *layers_[checked(layer)]; }
const ExpertCache& PartitionedExpertCache::layer(int l) const { return *layers_[checked(l)]; }

ExpertCache::Pin PartitionedExpertCache::acquire(ExpertKey key) { return at(key.layer).acquire(key); }

ExpertCache::Pin PartitionedExpertCache::insert(ExpertKey key, uint64_t bytes,
                                                std::unique_ptr<CachePayload> payload) {
  return at(key.layer).insert(key, bytes, std::move(payload));
}

void PartitionedExpertCache::clear() {
  for (auto& c : layers_) c->clear();
}

ExpertCacheStats PartitionedExpertCache::stats() const {
  ExpertCacheStats sum;
  for (const auto& c : layers_) {
    const ExpertCacheStats s = c->stats();
    sum.hits += s.hits;
    sum.misses += s.misses;
    sum.inserts += s.inserts;
    sum.rejected += s.rejected;
    sum.evictions += s.evictions;
    sum.bytes_resident += s.bytes_resident;
    sum.peak_bytes += s.peak_bytes;
    sum.entries += s.entries;
    sum.pinned += s.pinned;
  }
  return sum;
}

}  // namespace sluice::moe

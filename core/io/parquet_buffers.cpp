// Reusable byte buffers: see parquet_buffers.h.
#include "core/io/parquet_buffers.h"

namespace grpo::io::parquet {

void PoolDeleter::operator()(uint8_t* p) const {
  if (!p) return;
  if (pool) pool->put(p, capacity);
  else delete[] p;
}

BufferPool::~BufferPool() {
  for (auto& [cap, p] : free_) delete[] p;
}

Buffer BufferPool::get(size_t n) {
  if (n == 0) n = 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(n);
    if (it != free_.end() && it->first / 2 <= n) {
      size_t cap = it->first;
      uint8_t* p = it->second;
      free_.erase(it);
      pooled_ -= cap;
      return Buffer(p, PoolDeleter{this, cap});
    }
  }
  // Rounded up (to 1 KiB, or 4 KiB from 64 KiB on: at most a few percent for real pages) so that
  // pages of nearly equal sizes share buffers.
  const size_t grain = n < (size_t(64) << 10) ? 1024 : 4096;
  size_t cap = n > SIZE_MAX - grain ? n : (n + grain - 1) & ~(grain - 1);
  return Buffer(new uint8_t[cap], PoolDeleter{this, cap});
}

void BufferPool::put(uint8_t* p, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity > max_pooled_) {
    delete[] p;
    return;
  }
  // Over the cap: drop the smallest pooled buffers first (the large ones save the most faults).
  while (pooled_ + capacity > max_pooled_ && !free_.empty()) {
    auto it = free_.begin();
    pooled_ -= it->first;
    delete[] it->second;
    free_.erase(it);
  }
  free_.emplace(capacity, p);
  pooled_ += capacity;
}

Buffer unpooled_buffer(size_t n) { return Buffer(new uint8_t[n == 0 ? 1 : n], PoolDeleter{nullptr, 0}); }

}  // namespace grpo::io::parquet

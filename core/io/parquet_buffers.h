// Reusable byte buffers for the Parquet reader: column chunks and decompressed pages are large,
// short-lived and about the same size from one row group to the next, and fresh memory costs a
// page fault per 4 KiB (about 3x the whole read time on a VM). A pool owned by the open file
// hands buffers out and takes them back when a row group's data is dropped. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace grpo::io::parquet {

class BufferPool;

// Returns the buffer to its pool (or frees it when there is none).
struct PoolDeleter {
  BufferPool* pool = nullptr;
  size_t capacity = 0;
  void operator()(uint8_t* p) const;
};
using Buffer = std::unique_ptr<uint8_t[], PoolDeleter>;

class BufferPool {
public:
  explicit BufferPool(size_t max_pooled_bytes = size_t(256) << 20) : max_pooled_(max_pooled_bytes) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  ~BufferPool();

  // A buffer of at least n bytes (uninitialised); a pooled one when one fits within 2n.
  Buffer get(size_t n);

private:
  friend struct PoolDeleter;
  void put(uint8_t* p, size_t capacity);

  std::mutex mu_;
  std::multimap<size_t, uint8_t*> free_;  // capacity -> buffer
  size_t pooled_ = 0, max_pooled_;
};

// A buffer outside any pool.
Buffer unpooled_buffer(size_t n);

}  // namespace grpo::io::parquet

// BoundedQueue<T>: a multi-producer, multi-consumer FIFO with a capacity (back-pressure), timed
// waits, and close() so that blocked producers and consumers wake up at shutdown. The engine's
// scorer queue and rollout queue are BoundedQueues; nothing in the engine queues without bound.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace grpo::run {

template <class T>
class BoundedQueue {
public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity ? capacity : 1) {}

  // Blocks while full. Returns false if the queue was closed (the item is not queued).
  // `blocked_s`, when given, receives the time spent waiting for room.
  bool push(T item, double* blocked_s = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto t0 = std::chrono::steady_clock::now();
    ++waiting_producers_;
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    --waiting_producers_;
    if (blocked_s) *blocked_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Queues `item` only if there is room now (and moves from it only then); false when full or
  // closed. For producers that must not block (a streaming source's event loop).
  bool try_push(T& item) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || items_.size() >= capacity_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }
  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }

  // Waits up to `timeout` for an item; nullopt on timeout or when closed and drained.
  template <class Rep, class Period>
  std::optional<T> pop_for(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty(); })) return std::nullopt;
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // Wakes every waiter; later pushes fail, pops drain what is left.
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }
  // Producers inside push() waiting for room right now.
  size_t waiting_producers() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_producers_;
  }
  bool full() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size() >= capacity_;
  }

private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  size_t waiting_producers_ = 0;
  bool closed_ = false;
};

}  // namespace grpo::run

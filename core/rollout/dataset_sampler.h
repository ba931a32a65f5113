// Reproducible order over a dataset: seeded shuffling per epoch, a cursor that a checkpoint
// saves and restores, and a held-out eval split.
//
// The shuffle is specified here so any platform and compiler give the same order (std::shuffle
// and std::uniform_int_distribution are implementation-defined, so neither is used):
//   engine   std::mt19937_64 seeded with  seed + 0x9E3779B97F4A7C15 * (stream + 1)  (mod 2^64),
//            where stream = the epoch (>= 0) for epoch orders, kEvalSplitStream for the split
//   bounded  j uniform in [0, m): draw r = engine() until r >= (2^64 - m) mod m, then j = r mod m
//            (rejection, no modulo bias)
//   order    start from 0..n-1; for i = n-1 down to 1: j = bounded(i + 1); swap(order[i], order[j])
//            (Fisher-Yates / Durstenfeld)
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rollout/dataset.h"

namespace grpo::rollout {

constexpr int64_t kEvalSplitStream = -2;  // never an epoch number

// The permutation of 0..n-1 for one stream (see above).
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t stream);
// j uniform in [0, m), m >= 1, by the rejection rule above.
uint64_t bounded_random(std::mt19937_64& engine, uint64_t m);

// ---- eval split ----
// eval_size > 0 takes that many rows; else eval_fraction in [0, 1) takes round(n * fraction)
// rows (at least 1 when the fraction is > 0). The eval rows are the first k of
// shuffled_order(n, seed, kEvalSplitStream); both parts keep their source order, are disjoint,
// and cover the dataset. Train may not end up empty.
struct SplitOptions {
  double eval_fraction = 0.0;
  int64_t eval_size = 0;
  uint64_t seed = 0;
};
struct DatasetSplit {
  std::vector<Example> train, eval;
};
DatasetSplit split_eval(std::vector<Example> examples, const SplitOptions& options);

// ---- cursor ----
// Where a stream stands: the next example is order(epoch)[position]. `size` is the dataset size
// it was saved with, checked on restore. JSON: {"seed", "epoch", "position", "size"}.
struct DataCursor {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t position = 0;
  int64_t size = 0;
  nlohmann::json to_json() const;
  static DataCursor from_json(const nlohmann::json& j);  // throws grpo::Error naming the field
  bool operator==(const DataCursor&) const = default;
};

// Endless epochs over a dataset: each epoch visits every example once, in the order of its
// seed and epoch (or the source order when shuffle is off). Not thread-safe.
class DatasetStream {
public:
  DatasetStream(std::vector<Example> examples, uint64_t seed, bool shuffle = true);

  const Example& next();                        // crosses into the next epoch when one ends
  std::vector<Example> next_batch(int64_t count);
  DataCursor cursor() const;
  // Continues exactly where `cursor` was taken; an error if the dataset size differs or the
  // position is out of range.
  void restore(const DataCursor& cursor);

  int64_t epoch() const { return epoch_; }
  int64_t size() const { return static_cast<int64_t>(examples_.size()); }
  const std::vector<Example>& examples() const { return examples_; }

private:
  void build_order();

  std::vector<Example> examples_;
  uint64_t seed_;
  bool shuffle_;
  int64_t epoch_ = 0, position_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace grpo::rollout

// Seeded shuffling, eval split and the data cursor (see dataset_sampler.h for the algorithm).
#include "core/rollout/dataset_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/common/error.h"

namespace grpo::rollout {

uint64_t bounded_random(std::mt19937_64& engine, uint64_t m) {
  const uint64_t threshold = (0 - m) % m;  // (2^64 - m) mod m
  uint64_t r;
  do {
    r = engine();
  } while (r < threshold);
  return r % m;
}

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t stream) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 engine(seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(stream + 1));
  for (int64_t i = n - 1; i >= 1; --i) {
    auto j = static_cast<int64_t>(bounded_random(engine, static_cast<uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
  return order;
}

// ---- eval split ----

DatasetSplit split_eval(std::vector<Example> examples, const SplitOptions& o) {
  const auto n = static_cast<int64_t>(examples.size());
  check(o.eval_size >= 0, "eval_size", "must be >= 0, got " + std::to_string(o.eval_size));
  check(std::isfinite(o.eval_fraction) && o.eval_fraction >= 0 && o.eval_fraction < 1, "eval_fraction",
        "must be in [0, 1), got " + std::to_string(o.eval_fraction));
  int64_t k = o.eval_size;
  if (k == 0 && o.eval_fraction > 0)
    k = std::max<int64_t>(1, std::llround(static_cast<double>(n) * o.eval_fraction));
  check(k < n || k == 0, o.eval_size ? "eval_size" : "eval_fraction",
        "would hold out " + std::to_string(k) + " of " + std::to_string(n) + " rows, leaving none to train on",
        "use a smaller eval split or a larger dataset");

  std::vector<char> is_eval(examples.size(), 0);
  auto order = shuffled_order(n, o.seed, kEvalSplitStream);
  for (int64_t i = 0; i < k; ++i) is_eval[static_cast<size_t>(order[i])] = 1;
  DatasetSplit split;
  for (size_t i = 0; i < examples.size(); ++i) (is_eval[i] ? split.eval : split.train).push_back(std::move(examples[i]));
  return split;
}

// ---- cursor ----

nlohmann::json DataCursor::to_json() const {
  return {{"seed", seed}, {"epoch", epoch}, {"position", position}, {"size", size}};
}

DataCursor DataCursor::from_json(const nlohmann::json& j) {
  check(j.is_object(), "data cursor", std::string("expected an object, got ") + j.type_name());
  auto integer = [&](const char* key) -> const nlohmann::json& {
    check(j.contains(key), "data cursor: field \"" + std::string(key) + "\"", "missing");
    check(j[key].is_number_integer(), "data cursor: field \"" + std::string(key) + "\"",
          std::string("expected an integer, got ") + j[key].type_name());
    return j[key];
  };
  DataCursor c;
  c.seed = integer("seed").get<uint64_t>();
  c.epoch = integer("epoch").get<int64_t>();
  c.position = integer("position").get<int64_t>();
  c.size = integer("size").get<int64_t>();
  return c;
}

// ---- stream ----

DatasetStream::DatasetStream(std::vector<Example> examples, uint64_t seed, bool shuffle)
    : examples_(std::move(examples)), seed_(seed), shuffle_(shuffle) {
  check(!examples_.empty(), "dataset", "is empty", "a training run needs at least one example");
  build_order();
}

void DatasetStream::build_order() {
  if (shuffle_) {
    order_ = shuffled_order(size(), seed_, epoch_);
  } else {
    order_.resize(examples_.size());
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }
}

const Example& DatasetStream::next() {
  if (position_ >= size()) {
    ++epoch_;
    position_ = 0;
    build_order();
  }
  return examples_[static_cast<size_t>(order_[static_cast<size_t>(position_++)])];
}

std::vector<Example> DatasetStream::next_batch(int64_t count) {
  std::vector<Example> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(count, 0)));
  for (int64_t i = 0; i < count; ++i) out.push_back(next());
  return out;
}

DataCursor DatasetStream::cursor() const { return {seed_, epoch_, position_, size()}; }

void DatasetStream::restore(const DataCursor& c) {
  check(c.size == size(), "data cursor",
        "was saved for a dataset of " + std::to_string(c.size) + " rows, this one has " + std::to_string(size()),
        "the dataset (or its eval split) changed since the checkpoint");
  check(c.epoch >= 0 && c.position >= 0 && c.position <= size(), "data cursor",
        "epoch " + std::to_string(c.epoch) + ", position " + std::to_string(c.position) + " is out of range");
  seed_ = c.seed;
  epoch_ = c.epoch;
  position_ = c.position;
  build_order();
}

}  // namespace grpo::rollout

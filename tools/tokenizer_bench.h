// `grpo bench tokenize`: our tokenizer against Hugging Face tokenizers' Rust core (through its
// npm bindings, tests/bench/tokenizers_bench.mjs) on the same few MB of mixed text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace grpo::text {

// Builds ~4 MB of mixed text (prose, code, numbers, CJK, emoji; deterministic), measures our
// load time (median of 5) and single-thread encode MB/s, then runs
// `node <node_script_dir>/tokenizers_bench.mjs <tokenizer.json> <textfile>` and compares.
// Returns {text_bytes, load_s, encode_mb_s, ids_count, ids_hash, rust_load_s,
// rust_encode_mb_s, ratio, ids_match, rust_error}; rust_* are null when node or the npm
// package is missing (rust_error says why).
nlohmann::json bench_tokenize(const std::string& tokenizer_path, const std::string& node_script_dir);

// The benchmark text (exposed for tests): `target_bytes` of deterministic mixed text.
std::string bench_text(size_t target_bytes);

}  // namespace grpo::text

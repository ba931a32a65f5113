// Tokenizer benchmark: see tokenizer_bench.h.
#include "core/common/bench_stats.h"
#include "tools/tokenizer_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "core/common/files.h"
#include "core/text/tokenizer.h"

namespace grpo::text {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
// Deterministic 64-bit LCG (Knuth's MMIX constants).
struct Rng {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  uint32_t next() { return static_cast<uint32_t>((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33); }
  size_t below(size_t n) { return next() % n; }
};

const std::vector<std::string> kWords = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there",
    "been", "if", "more", "when", "will", "would", "who", "so", "no", "model", "training",
    "reward", "policy", "gradient", "tokenizer", "sequence", "attention", "learning", "rate",
    "don't", "it's", "we're", "they'll", "Hello", "World", "GRPO", "LoRA", "adapter", "ÜBER",
    "naïve", "café", "résumé", "Straße", "İstanbul", "Привет", "мир", "Ελληνικά", "مرحبا", "שלום"};
const std::vector<std::string> kCjk = {"你好", "世界", "我们", "今天", "天气", "很好", "模型", "训练",
                                       "こんにちは", "カタカナ", "漢字", "안녕하세요", "세계", "。", "，"};
const std::vector<std::string> kEmoji = {"😀", "👍🏽", "🇫🇷", "👩‍💻", "🎉", "❤️", "🚀", "✨"};
const std::vector<std::string> kCode = {
    "def forward(self, x):\n        return self.proj(x) * 0.5",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "if (err != nil) { return fmt.Errorf(\"failed: %w\", err) }",
    "const result = await fetch(`/api/v1/items?id=${id}`);",
    "    x = torch.zeros((B, T, D), dtype=torch.bfloat16)  # (B, T, D)",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;",
    "<div class=\"row\"><span>{{ value }}</span></div>"};

}  // namespace

std::string bench_text(size_t target_bytes) {
  Rng rng;
  std::string text;
  text.reserve(target_bytes + 256);
  while (text.size() < target_bytes) {
    std::string line;
    switch (rng.below(8)) {
      case 0: line = kCode[rng.below(kCode.size())]; break;
      case 1:
        for (int k = 0, n = 5 + static_cast<int>(rng.below(20)); k < n; ++k) line += kCjk[rng.below(kCjk.size())];
        break;
      case 2:
        line = "Total: " + std::to_string(rng.next() % 100000) + "." + std::to_string(rng.next() % 100) +
               " on 2024-0" + std::to_string(1 + rng.below(9)) + "-1" + std::to_string(rng.below(10)) +
               ", id 0x" + std::to_string(rng.next()) + " " + kEmoji[rng.below(kEmoji.size())];
        break;
      default:
        for (int k = 0, n = 8 + static_cast<int>(rng.below(40)); k < n; ++k) {
          if (k) line += rng.below(12) == 0 ? ",  " : " ";
          line += kWords[rng.below(kWords.size())];
          if (rng.below(30) == 0) line += kEmoji[rng.below(kEmoji.size())];
        }
        line += rng.below(3) == 0 ? "!" : ".";
    }
    text += line;
    text += '\n';
  }
  return text;
}

namespace {

std::vector<std::string_view> split_lines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.emplace_back(text.data() + start, end - start);
    start = end + 1;
  }
  return lines;
}

// FNV-1a over the ids as uint32 with a line marker; tokenizers_bench.mjs computes the same.
struct IdHash {
  uint32_t h = 2166136261u;
  uint64_t count = 0;
  void add(uint32_t v) { h = (h ^ v) * 16777619u; }
  void line(const std::vector<int32_t>& ids) {
    for (int32_t id : ids) add(static_cast<uint32_t>(id));
    add(0xFFFFFFFFu);
    count += ids.size();
  }
};

}  // namespace

nlohmann::json bench_tokenize(const std::string& tokenizer_path, const std::string& node_script_dir) {
  using nlohmann::json;
  json result;
  std::string json_path = is_directory(tokenizer_path) ? path_join(tokenizer_path, "tokenizer.json") : tokenizer_path;
  const std::string text = bench_text(4u << 20);
  const auto lines = split_lines(text);
  result["text_bytes"] = text.size();
  result["lines"] = lines.size();

  std::vector<double> loads;
  for (int k = 0; k < 5; ++k) {
    auto t0 = Clock::now();
    Tokenizer t = Tokenizer::load(tokenizer_path);
    loads.push_back(seconds_since(t0));
  }
  result["load_s"] = median(loads);

  Tokenizer tok = Tokenizer::load(tokenizer_path);
  std::vector<double> encodes;
  IdHash hash;
  for (int pass = 0; pass < 3; ++pass) {
    IdHash h;
    auto t0 = Clock::now();
    for (std::string_view line : lines) h.line(tok.encode(line, false));
    encodes.push_back(seconds_since(t0));
    hash = h;
  }
  double encode_mb_s = text.size() / 1e6 / median(encodes);
  result["encode_mb_s"] = encode_mb_s;
  result["encode_cold_mb_s"] = text.size() / 1e6 / encodes[0];
  result["ids_count"] = hash.count;
  result["ids_hash"] = hash.h;

  result["rust_load_s"] = nullptr;
  result["rust_encode_mb_s"] = nullptr;
  result["ratio"] = nullptr;
  result["ids_match"] = nullptr;
  char tmp[] = "/tmp/grpo-bench-text-XXXXXX";
  int fd = mkstemp(tmp);
  if (fd < 0) {
    result["rust_error"] = "cannot create a temporary file";
    return result;
  }
  close(fd);
  write_file_atomic(tmp, text);
  std::string cmd = "TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 node " +
                    shell_quote(path_join(node_script_dir, "tokenizers_bench.mjs")) + " " +
                    shell_quote(json_path) + " " + shell_quote(tmp) + " 2>&1";
  std::string output;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
    int status = pclose(p);
    std::remove(tmp);
    size_t last = output.find_last_of('{');
    json rust = last == std::string::npos ? json() : json::parse(output.substr(last), nullptr, false);
    if (status != 0 || !rust.is_object() || rust.is_discarded() || !rust.contains("encode_mb_s")) {
      result["rust_error"] = "node " + node_script_dir + "/tokenizers_bench.mjs failed (is node and `npm ci --prefix " +
                             node_script_dir + "` installed?): " + output.substr(0, 400);
      return result;
    }
    result["rust_load_s"] = rust["load_s"];
    result["rust_encode_mb_s"] = rust["encode_mb_s"];
    result["rust_ids_count"] = rust["ids_count"];
    result["ratio"] = encode_mb_s / rust["encode_mb_s"].get<double>();
    result["ids_match"] = rust["ids_count"].get<uint64_t>() == hash.count &&
                          rust["ids_hash"].get<uint32_t>() == hash.h;
  } else {
    std::remove(tmp);
    result["rust_error"] = "cannot run node";
  }
  return result;
}

}  // namespace grpo::text

// LoraConfig: scaling, the per-module plan (PEFT's target matching and rank/alpha patterns),
// validation. Regexes run on PCRE2 directly (UTF + UCP, as Python's str patterns).
//
// Semantics follow PEFT's source as of 0.13.2 (the version the golden adapter's logits come from);
// read for this file: huggingface/peft src/peft/tuners/tuners_utils.py (commit 005fdd53),
// get_pattern_key of src/peft/utils/other.py and LoraModel._create_and_replace of
// src/peft/tuners/lora/model.py (as copied verbatim in downstream ports; the stored
// huggingface/peft model.py, commit 00277830, predates them: it looked up one combined key with
// re.match(rf".*\.{key}$") for both r and alpha), and LoraConfig.__post_init__ (lora/config.py).
// - check_target_module_exists(config, key): a str target_modules
//   is matched with re.fullmatch(target_modules, key); for a list, `key in target_modules` targets
//   the module outright, else any(key.endswith(f".{t}")) and then, when layers_to_transform is set
//   (an int, or a non-empty list), the layer index is group(1) of
//   re.match(rf".*?\.{pattern}\.(\d+)\.", key) for the first pattern of layers_pattern (a str or a
//   list) that matches, or of re.match(r".*?\.[^.]*\.(\d+)\.", key) when layers_pattern is empty;
//   no index -> not targeted, else targeted iff index == int / in list. (Older releases wrote the
//   greedy `.*` where current ones write the lazy `.*?`; module names of Llama/Qwen models have one numeric
//   segment, so both give the same index.)
// - get_pattern_key(pattern_keys, key): the first key k, in dict order,
//   with re.match(rf"(.*\.)?({k})$", key); else key itself. _create_and_replace looks r and alpha
//   up separately: r = rank_pattern.get(r_key, r), alpha likewise, and the layer's
//   scaling is alpha / r (alpha / sqrt(r) with use_rslora) with the module's own r and alpha.
// - LoraConfig.__post_init__: layers_to_transform / layers_pattern
//   cannot be used when target_modules is a str.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/model/lora_config.h"

#include <pcre2.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "core/common/error.h"
#include "core/common/strings.h"

namespace grpo::model {

const std::vector<std::string>& projection_names() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",    "o_proj",   "gate_proj",
                                                 "up_proj",   "down_proj", "qkv_proj", "gate_up_proj"};
  return names;
}

const std::vector<std::string>& saveable_modules() {
  static const std::vector<std::string> names = {"model.embed_tokens", "lm_head"};
  return names;
}

bool supported_module_to_save(const std::string& entry) {
  return entry == "lm_head" || entry == "embed_tokens" || entry == "model.embed_tokens";
}

bool family_has_projection(const std::string& name, bool fused) {
  if (name == "o_proj" || name == "down_proj") return true;
  const bool fused_name = name == "qkv_proj" || name == "gate_up_proj";
  return fused == fused_name;
}

namespace {

// ---- PCRE2 ----

struct Compiled {
  pcre2_code* code = nullptr;
  std::string error;  // empty when it compiled
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

// Compiled regexes by pattern text, shared by every LoraConfig (a plan asks the same few
// patterns once per module). Bounded: cleared when it grows past a few thousand entries.
std::shared_ptr<const Compiled> compiled(const std::string& pattern) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Compiled>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(pattern); it != cache.end()) return it->second;
  auto c = std::make_shared<Compiled>();
  int error = 0;
  PCRE2_SIZE offset = 0;
  c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                          &error, &offset, nullptr);
  if (!c->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    c->error = "does not compile at offset " + std::to_string(offset) + ": " + reinterpret_cast<const char*>(message);
  }
  if (cache.size() > 4 * kMaxLoraPatternCount) cache.clear();
  cache.emplace(pattern, c);
  return c;
}

// Runs `pattern` on `s` anchored at the start (re.match), and at the end too with `full`
// (re.fullmatch). Returns whether it matched; `group1` gets capture group 1 (nullopt if unset).
bool run(const std::string& pattern, const std::string& s, bool full, std::optional<std::string>* group1,
         const std::string& what) {
  auto c = compiled(pattern);
  if (!c->code) throw Error("LoRA config", what + ": regex /" + pattern + "/ " + c->error);
  struct Ctx {
    pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
    Ctx() {
      pcre2_set_match_limit(ctx, 1000000);
      pcre2_set_depth_limit(ctx, 10000);
    }
    ~Ctx() { pcre2_match_context_free(ctx); }
  };
  thread_local Ctx mctx;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(c->code, nullptr), &pcre2_match_data_free);
  const uint32_t opts = PCRE2_ANCHORED | (full ? PCRE2_ENDANCHORED : 0);
  int rc = pcre2_match(c->code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, opts, md.get(), mctx.ctx);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof message);
    throw Error("LoRA config", what + ": regex /" + pattern + "/ failed on module name " + s + ": " +
                                   reinterpret_cast<const char*>(message),
                "simplify the pattern");
  }
  if (group1) {
    group1->reset();
    if (pcre2_get_ovector_count(md.get()) > 1) {
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      if (rc > 1 && ov[2] != PCRE2_UNSET) *group1 = s.substr(ov[2], ov[3] - ov[2]);
    }
  }
  return true;
}

// The regexes PEFT builds around user patterns (see the file comment).
std::string pattern_key_regex(const std::string& k) { return "(.*\\.)?(" + k + ")$"; }
std::string layers_regex(const std::string& p) { return ".*?\\." + p + "\\.(\\d+)\\."; }
const char* kAnyLayersRegex = ".*?\\.[^.]*\\.(\\d+)\\.";

bool is_all_linear(const std::vector<std::string>& t) { return t.size() == 1 && t[0] == "all-linear"; }

std::string last_component(const std::string& s) {
  auto dot = s.rfind('.');
  return dot == std::string::npos ? s : s.substr(dot + 1);
}

template <class V>
const V* pattern_value(const std::vector<std::pair<std::string, V>>& patterns, const std::string& key,
                       const char* field) {
  for (const auto& [k, v] : patterns)
    if (run(pattern_key_regex(k), key, false, nullptr, std::string(field) + " key '" + k + "'")) return &v;
  for (const auto& [k, v] : patterns)  // get_pattern_key falls back to the key itself
    if (k == key) return &v;
  return nullptr;
}

}  // namespace

double LoraConfig::scaling() const {
  return use_rslora ? lora_alpha / std::sqrt(double(r)) : lora_alpha / double(r);
}

int64_t LoraConfig::max_rank() const {
  int64_t m = r;
  for (const auto& [k, v] : rank_pattern) m = std::max(m, v);
  return m;
}

bool LoraConfig::plain() const {
  if (target_regex || !rank_pattern.empty() || !alpha_pattern.empty() || !layers_to_transform.empty() ||
      !modules_to_save.empty())
    return false;
  if (is_all_linear(target_modules)) return true;
  const auto& p = projection_names();
  return std::all_of(target_modules.begin(), target_modules.end(),
                     [&](const std::string& m) { return std::find(p.begin(), p.end(), m) != p.end(); });
}

bool LoraConfig::saves_module(const std::string& module_name) const {
  return std::any_of(modules_to_save.begin(), modules_to_save.end(),
                     [&](const std::string& m) { return !m.empty() && ends_with(module_name, m); });
}

bool LoraConfig::targets(const std::string& module) const {
  if (target_regex) return false;
  if (is_all_linear(target_modules)) {
    const auto& p = projection_names();
    return std::find(p.begin(), p.end(), module) != p.end();
  }
  return std::any_of(target_modules.begin(), target_modules.end(),
                     [&](const std::string& m) { return m == module || ends_with(m, "." + module); });
}

std::vector<std::string> LoraConfig::resolved_targets(bool fused) const {
  std::vector<std::string> out;
  for (const auto& p : projection_names())
    if (targets(p) && (!is_all_linear(target_modules) || family_has_projection(p, fused))) out.push_back(p);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<LoraConfig::Target> LoraConfig::target_for(const std::string& key) const {
  bool found = false;
  if (target_regex) {
    found = run(target_modules.at(0), key, /*full=*/true, nullptr, "target_modules");
  } else {
    const auto& list = is_all_linear(target_modules) ? projection_names() : target_modules;
    if (std::find(list.begin(), list.end(), key) != list.end()) {
      found = true;  // named outright: PEFT applies no layer filter
    } else {
      found = std::any_of(list.begin(), list.end(), [&](const std::string& t) { return ends_with(key, "." + t); });
      if (found && !layers_to_transform.empty()) {
        std::optional<std::string> index;
        bool matched = false;
        if (layers_pattern.empty()) {
          matched = run(kAnyLayersRegex, key, false, &index, "layers_to_transform");
        } else {
          for (const auto& p : layers_pattern)
            if ((matched = run(layers_regex(p), key, false, &index, "layers_pattern '" + p + "'"))) break;
        }
        if (!matched) {
          found = false;
        } else {
          const bool digits = index && !index->empty() &&
                              std::all_of(index->begin(), index->end(), [](char ch) { return ch >= '0' && ch <= '9'; });
          check(digits, "LoRA config",
                "layers_pattern " + join(layers_pattern, ", ") + ": capture group 1 on module " + key + " is " +
                    (index ? "'" + *index + "'" : std::string("unset")) + ", not a layer index",
                "PEFT reads group 1 as the layer index; use a non-capturing group (?:...) in layers_pattern");
          found = false;
          if (index->size() <= 18) {  // a longer number is no layer of ours (PEFT: not in the list)
            const int64_t i = std::stoll(*index);
            found = std::find(layers_to_transform.begin(), layers_to_transform.end(), i) != layers_to_transform.end();
          }
        }
      }
    }
  }
  if (!found) return std::nullopt;
  Target t;
  const int64_t* rp = pattern_value(rank_pattern, key, "rank_pattern");
  const double* ap = pattern_value(alpha_pattern, key, "alpha_pattern");
  t.r = rp ? *rp : r;
  t.lora_alpha = ap ? *ap : lora_alpha;
  t.scaling = use_rslora ? t.lora_alpha / std::sqrt(double(t.r)) : t.lora_alpha / double(t.r);
  return t;
}

void LoraConfig::validate(const std::string& context) const {
  check(r > 0, context, "r: " + std::to_string(r) + " must be a positive integer",
        "typical ranks are 8, 16, 32, 64");
  check(lora_alpha > 0, context, "lora_alpha: must be positive");
  check(lora_dropout >= 0.0 && lora_dropout < 1.0, context,
        "lora_dropout: " + std::to_string(lora_dropout) + " must be in [0, 1)");
  check(!target_modules.empty(), context, "target_modules: empty",
        "use \"all-linear\" or a list of " + join(projection_names(), ", "));
  const std::string bound = std::to_string(kMaxLoraPatternCount);
  auto count_ok = [&](size_t n, const char* key) {
    check(n <= kMaxLoraPatternCount, context,
          std::string(key) + ": " + std::to_string(n) + " entries, more than the " + bound + " we accept");
  };
  auto regex_ok = [&](const std::string& key, const std::string& pattern, const std::string& wrapped) {
    check(pattern.size() <= kMaxLoraPatternLength, context,
          key + ": pattern of " + std::to_string(pattern.size()) + " characters, longer than the " +
              std::to_string(kMaxLoraPatternLength) + " we accept");
    auto c = compiled(wrapped);
    check(c->code != nullptr, context, key + ": pattern '" + pattern + "' is not a valid regex: " + c->error,
          "PEFT uses Python's re syntax");
  };
  count_ok(target_modules.size(), "target_modules");
  count_ok(rank_pattern.size(), "rank_pattern");
  count_ok(alpha_pattern.size(), "alpha_pattern");
  count_ok(layers_to_transform.size(), "layers_to_transform");
  count_ok(layers_pattern.size(), "layers_pattern");
  if (target_regex) {
    check(target_modules.size() == 1, context, "target_modules: a regex is one string");
    regex_ok("target_modules", target_modules[0], target_modules[0]);
  } else if (!is_all_linear(target_modules)) {
    const auto& p = projection_names();
    for (const auto& m : target_modules) {
      check(m.size() <= kMaxLoraPatternLength, context, "target_modules: an entry is too long");
      if (std::find(p.begin(), p.end(), last_component(m)) != p.end()) continue;
      std::string near = nearest_name(m, p);
      throw Error(context, "target_modules: unsupported module '" + m + "'",
                  near.empty() ? "supported: all-linear, " + join(p, ", ") + " (or a module-name suffix ending in one)"
                               : "did you mean '" + near + "'?");
    }
  }
  if (!layers_to_transform.empty() || !layers_pattern.empty())
    check(!target_regex && !is_all_linear(target_modules), context,
          "layers_to_transform / layers_pattern cannot be used when target_modules is a string (\"all-linear\" or a "
          "regex), as in PEFT's LoraConfig",
          "list the projections, or put the layer indices into the regex");
  for (const auto& [k, v] : rank_pattern) {
    regex_ok("rank_pattern key '" + k + "'", k, pattern_key_regex(k));
    check(v > 0, context, "rank_pattern: '" + k + "' gives r " + std::to_string(v) + ", not a positive integer");
  }
  for (const auto& [k, v] : alpha_pattern) {
    regex_ok("alpha_pattern key '" + k + "'", k, pattern_key_regex(k));
    check(v > 0, context, "alpha_pattern: '" + k + "' gives lora_alpha " + std::to_string(v) + ", not positive");
  }
  for (const auto& p : layers_pattern) regex_ok("layers_pattern '" + p + "'", p, layers_regex(p));
  count_ok(modules_to_save.size(), "modules_to_save");
  for (const auto& m : modules_to_save) {
    check(supported_module_to_save(m), context, "modules_to_save: '" + m.substr(0, 200) + "' is not supported",
          "supported: lm_head and embed_tokens (whole trained copies of the output head or the token embeddings)");
  }
}

bool LoraConfig::operator==(const LoraConfig& o) const {
  return r == o.r && lora_alpha == o.lora_alpha && lora_dropout == o.lora_dropout &&
         target_modules == o.target_modules && target_regex == o.target_regex && use_rslora == o.use_rslora &&
         rank_pattern == o.rank_pattern && alpha_pattern == o.alpha_pattern &&
         layers_to_transform == o.layers_to_transform && layers_to_transform_int == o.layers_to_transform_int &&
         layers_pattern == o.layers_pattern && layers_pattern_string == o.layers_pattern_string &&
         modules_to_save == o.modules_to_save;
}

}  // namespace grpo::model

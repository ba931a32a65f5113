#include "core/common/json_limits.h"
#include "core/grpo/config.h"

#include <cmath>
#include <limits>
#include <variant>

#include <yaml-cpp/yaml.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/common/strings.h"
#include "core/grpo/trl_keys.h"

namespace grpo::grpo {
namespace {

using json = nlohmann::json;
using Member = std::variant<int64_t TrainConfig::*, double TrainConfig::*, bool TrainConfig::*,
                            std::string TrainConfig::*, std::vector<std::string> TrainConfig::*,
                            std::vector<double> TrainConfig::*, json TrainConfig::*,
                            std::optional<double> TrainConfig::*>;

constexpr double kInf = std::numeric_limits<double>::infinity();

// One row per key: where it lives, what it may hold, and whether a live run may change it.
struct Field {
  const char* name;
  Member member;
  double lo = -kInf, hi = kInf;  // numeric range
  bool lo_open = false, hi_open = false;
  std::vector<std::string> choices = {};  // allowed strings, if an enumeration
  bool retunable = false;
};

const std::vector<Field>& fields() {
  using T = TrainConfig;
  static const std::vector<Field> table = {
      {"model_name_or_path", &T::model_name_or_path},
      {"model_revision", &T::model_revision},
      {"train_file", &T::train_file},
      {"eval_file", &T::eval_file},
      {"dataset_name", &T::dataset_name},
      {"dataset_config", &T::dataset_config},
      {"dataset_revision", &T::dataset_revision},
      {"dataset_train_split", &T::dataset_train_split},
      {"dataset_test_split", &T::dataset_test_split},
      {"dataset_columns", &T::dataset_columns},
      {"task", &T::task, -kInf, kInf, false, false, {"", "arith"}},
      {"task_difficulty", &T::task_difficulty, 1, 5},
      {"eval_fraction", &T::eval_fraction, 0, 1, false, true},
      {"eval_size", &T::eval_size, 0},
      {"output_dir", &T::output_dir},
      {"seed", &T::seed, 0},
      {"num_generations", &T::num_generations, 2, 4096},
      {"max_prompt_length", &T::max_prompt_length, 1},
      {"max_completion_length", &T::max_completion_length, 1, 1 << 20, false, false, {}, true},
      {"temperature", &T::temperature, 0, 100, true, false, {}, true},
      {"top_p", &T::top_p, 0, 1, true, false, {}, true},
      {"top_k", &T::top_k, 0, 1 << 24, false, false, {}, true},
      {"min_p", &T::min_p, 0, 1, false, true, {}, true},
      {"stop", &T::stop},
      {"chat_template_kwargs", &T::chat_template_kwargs},
      {"learning_rate", &T::learning_rate, 0, 1, true, false, {}, true},
      {"lr_scheduler_type", &T::lr_scheduler_type, -kInf, kInf, false, false, {"constant", "linear", "cosine"}},
      {"warmup_ratio", &T::warmup_ratio, 0, 1, false, true},
      {"max_steps", &T::max_steps, 1},
      {"num_train_epochs", &T::num_train_epochs, 1},
      {"per_device_train_batch_size", &T::per_device_train_batch_size, 1},
      {"gradient_accumulation_steps", &T::gradient_accumulation_steps, 1},
      {"prompts_per_step", &T::prompts_per_step, 1},
      {"max_grad_norm", &T::max_grad_norm, 0, kInf, true},
      {"weight_decay", &T::weight_decay, 0, 1},
      {"adam_beta1", &T::adam_beta1, 0, 1, false, true},
      {"adam_beta2", &T::adam_beta2, 0, 1, false, true},
      {"adam_epsilon", &T::adam_epsilon, 0, 1, true},
      {"loss_type", &T::loss_type, -kInf, kInf, false, false, {"grpo", "bnpo", "dr_grpo", "dapo"}},
      {"scale_rewards", &T::scale_rewards, -kInf, kInf, false, false, {"group", "batch", "none"}},
      {"epsilon", &T::epsilon, 0, 1, true, false, {}, true},
      {"epsilon_high", &T::epsilon_high, 0, 10, true, false, {}, true},
      {"beta", &T::beta, 0, 100, false, false, {}, true},
      {"mask_truncated_completions", &T::mask_truncated_completions},
      {"token_budget", &T::token_budget},
      {"gradient_checkpointing", &T::gradient_checkpointing},
      {"r", &T::r, 1, 1024},
      {"lora_alpha", &T::lora_alpha, 0, kInf, true},
      {"lora_dropout", &T::lora_dropout, 0, 1, false, true},
      {"target_modules", &T::target_modules},
      {"use_rslora", &T::use_rslora},
      {"init_adapter", &T::init_adapter},
      {"max_staleness", &T::max_staleness, 0, 1000, false, false, {}, true},
      {"weight_sync_steps", &T::weight_sync_steps, 1, 1000000, false, false, {}, true},
      {"max_inflight_tasks", &T::max_inflight_tasks, -1, 1000000, false, false, {}, true},
      {"queue_maxsize", &T::queue_maxsize, 1},
      {"local_generators", &T::local_generators, 0, 64},
      {"worker_urls", &T::worker_urls},
      {"cluster_token_file", &T::cluster_token_file},
      {"cluster_tls_fingerprint", &T::cluster_tls_fingerprint},
      {"discovery", &T::discovery},
      {"discovery_address", &T::discovery_address},
      {"worker_timeout_s", &T::worker_timeout_s, 0, kInf, true},
      {"reward_funcs", &T::reward_funcs},
      {"reward_weights", &T::reward_weights, -kInf, kInf, false, false, {}, true},
      {"logging_steps", &T::logging_steps, 1},
      {"save_steps", &T::save_steps, 0},
      {"eval_steps", &T::eval_steps, 0},
  };
  return table;
}

const Field* find_field(const std::string& name) {
  for (const auto& f : fields())
    if (name == f.name) return &f;
  return nullptr;
}

std::string fmt(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  json j = v;
  if (v == std::floor(v) && std::fabs(v) < 1e15) j = static_cast<int64_t>(v);
  return j.dump();
}

std::string range_text(const Field& f) {
  if (!f.choices.empty()) {
    std::vector<std::string> quoted;
    for (const auto& c : f.choices) quoted.push_back("\"" + c + "\"");
    return "one of " + join(quoted, ", ");
  }
  if (std::isinf(f.lo) && std::isinf(f.hi)) return "any number";
  if (std::isinf(f.hi)) return std::string(f.lo_open ? "> " : ">= ") + fmt(f.lo);
  if (std::isinf(f.lo)) return std::string(f.hi_open ? "< " : "<= ") + fmt(f.hi);
  return std::string(f.lo_open ? "(" : "[") + fmt(f.lo) + ", " + fmt(f.hi) + (f.hi_open ? ")" : "]");
}

[[noreturn]] void bad_value(const std::string& source, const Field& f, const json& v, const std::string& expected) {
  throw Error(source, std::string("key \"") + f.name + "\": value " + v.dump() + " is not valid: expected " + expected);
}

double number_in_range(const std::string& source, const Field& f, const json& v, bool integer) {
  if (!v.is_number() || (integer && !v.is_number_integer() &&
                         !(v.is_number_float() && v.get<double>() == std::floor(v.get<double>()))))
    bad_value(source, f, v, std::string(integer ? "an integer" : "a number") + ", " + range_text(f));
  double x = v.get<double>();
  bool ok = std::isfinite(x) && (f.lo_open ? x > f.lo : x >= f.lo) && (f.hi_open ? x < f.hi : x <= f.hi);
  if (!ok) bad_value(source, f, v, range_text(f));
  // An integer key holds an int64: 1e300 (a float with an integer value) must not reach the cast.
  constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53: every integer up to it is exact
  if (integer && std::fabs(x) > kMaxExactInteger)
    bad_value(source, f, v, "an integer of magnitude at most 2^53, " + range_text(f));
  return x;
}

void set_field(TrainConfig& c, const Field& f, const json& v, const std::string& source) {
  std::visit(
      [&](auto member) {
        using V = std::remove_cvref_t<decltype(c.*member)>;
        if constexpr (std::is_same_v<V, int64_t>) {
          c.*member = static_cast<int64_t>(number_in_range(source, f, v, true));
        } else if constexpr (std::is_same_v<V, double>) {
          c.*member = number_in_range(source, f, v, false);
        } else if constexpr (std::is_same_v<V, std::optional<double>>) {
          if (v.is_null()) c.*member = std::nullopt;
          else c.*member = number_in_range(source, f, v, false);
        } else if constexpr (std::is_same_v<V, bool>) {
          if (!v.is_boolean()) bad_value(source, f, v, "true or false");
          c.*member = v.get<bool>();
        } else if constexpr (std::is_same_v<V, std::string>) {
          if (!v.is_string()) bad_value(source, f, v, f.choices.empty() ? "a string" : range_text(f));
          auto s = v.get<std::string>();
          if (!f.choices.empty() && std::find(f.choices.begin(), f.choices.end(), s) == f.choices.end()) {
            std::string near = nearest_name(s, f.choices);
            throw Error(source, std::string("key \"") + f.name + "\": value \"" + s + "\" is not valid: expected " +
                                    range_text(f), near.empty() ? "" : "did you mean \"" + near + "\"?");
          }
          c.*member = s;
        } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
          if (v.is_string()) { c.*member = {v.get<std::string>()}; return; }
          if (!v.is_array()) bad_value(source, f, v, "a list of strings");
          std::vector<std::string> out;
          for (const auto& e : v) {
            if (!e.is_string()) bad_value(source, f, v, "a list of strings");
            out.push_back(e.get<std::string>());
          }
          c.*member = out;
        } else if constexpr (std::is_same_v<V, std::vector<double>>) {
          if (!v.is_array()) bad_value(source, f, v, "a list of numbers");
          std::vector<double> out;
          for (const auto& e : v) {
            if (!e.is_number() || !std::isfinite(e.get<double>())) bad_value(source, f, v, "a list of finite numbers");
            out.push_back(e.get<double>());
          }
          c.*member = out;
        } else {
          c.*member = v;  // structured value, checked in validate()
        }
      },
      f.member);
}

json get_field(const TrainConfig& c, const Field& f) {
  return std::visit(
      [&](auto member) -> json {
        using V = std::remove_cvref_t<decltype(c.*member)>;
        if constexpr (std::is_same_v<V, std::optional<double>>) {
          return (c.*member) ? json(*(c.*member)) : json(nullptr);
        } else {
          return json(c.*member);
        }
      },
      f.member);
}

// JSON strings must be UTF-8 (nlohmann's parser checks; yaml-cpp does not): reject bad text at
// load time with its position, not later when the config is written back out.
void require_utf8(const std::string& text, const YAML::Node& n, const std::string& source) {
  if (is_valid_utf8(text)) return;
  const auto m = n.Mark();
  throw Error(source, "line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1) +
                          ": text is not valid UTF-8", "save the file as UTF-8");
}

json yaml_to_json(const YAML::Node& n, const std::string& source) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return nullptr;
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(yaml_to_json(e, source));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) {
        const auto key = kv.first.as<std::string>();
        require_utf8(key, kv.first, source);
        o[key] = yaml_to_json(kv.second, source);
      }
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      require_utf8(s, n, source);
      if (n.Tag() == "!") return s;  // quoted: always a string
      if (s == "null" || s == "~" || s.empty()) return nullptr;
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      // Numbers as YAML 1.2's core schema reads them (also 1e-5 without a dot).
      json num = json::parse(s, nullptr, false);
      if (!num.is_discarded() && num.is_number()) return num;
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (end && *end == '\0' && !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+' || s[0] == '.'))
        return d;
      return s;
    }
    default: throw Error(source, "unsupported YAML node");
  }
}

}  // namespace

int64_t TrainConfig::resolved_max_inflight_tasks() const {
  if (max_inflight_tasks > 0) return max_inflight_tasks;
  int64_t per_step = std::max<int64_t>(1, prompts_per_step * num_generations);
  return std::max<int64_t>(max_staleness, 1) * per_step;
}

void TrainConfig::apply(const json& j, const std::string& source) {
  check(j.is_object(), source, std::string("expected a JSON/YAML object of settings, got ") + j.type_name());
  TrainConfig next = *this;  // all or nothing: a bad key leaves this config unchanged
  // TRL/PEFT configs load as they are: their keys are renamed, or listed as ignored with why.
  const TrlImport trl = translate_trl_config(j, source, [](const std::string& k) { return find_field(k) != nullptr; });
  for (const auto& n : trl.ignored) log_warn(source + ": ignoring \"" + n.key + "\" (" + n.value.dump() + "): " + n.note);
  for (const auto& n : trl.translated) log_info(source + ": \"" + n.key + "\" " + n.note);
  for (const auto& [key, value] : trl.config.items()) {
    const Field* f = find_field(key);
    if (!f) {
      std::string near = nearest_name(key, config_keys());
      throw Error(source, "unknown key \"" + key + "\"",
                  near.empty() ? "see `grpo train --help-config` for the known keys" : "did you mean \"" + near + "\"?");
    }
    set_field(next, *f, value, source);
  }
  *this = std::move(next);
}

void TrainConfig::validate(const std::string& source) const {
  check(!model_name_or_path.empty(), source, "key \"model_name_or_path\" is missing",
        "set it to a Hugging Face model directory or a Hub repo id (grpo download REPO_ID)");
  check(!model_revision.empty(), source, "key \"model_revision\" is empty", "use \"main\", a tag or a commit hash");
  check(!train_file.empty() || !dataset_name.empty() || task == "arith", source,
        "no training data: set \"dataset_name\", \"train_file\" or \"task\": \"arith\"");
  check(train_file.empty() || dataset_name.empty(), source, "set either \"train_file\" or \"dataset_name\", not both");
  check(eval_file.empty() || dataset_test_split.empty(), source,
        "set either \"eval_file\" or \"dataset_test_split\", not both");
  check(dataset_name.empty() || !dataset_train_split.empty(), source, "key \"dataset_train_split\" is empty",
        "the split to train on, e.g. \"train\"");
  check(dataset_columns.is_object(), source,
        "key \"dataset_columns\": value " + dataset_columns.dump() + " is not valid: expected an object of renames",
        "e.g. {\"question\": \"prompt\"}");
  for (const auto& [from, to] : dataset_columns.items())
    check(!from.empty() && to.is_string() && !to.get<std::string>().empty(), source,
          "key \"dataset_columns\": \"" + from + "\" must map to a non-empty column name, got " + to.dump());
  check(eval_fraction == 0.0 || eval_size == 0, source, "set either \"eval_fraction\" or \"eval_size\", not both");
  check(target_modules.is_string() || target_modules.is_array(), source,
        "key \"target_modules\": expected \"all-linear\" or a list of module names");
  static const std::vector<std::string> modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  if (target_modules.is_string()) {
    check(target_modules == "all-linear", source,
          "key \"target_modules\": value " + target_modules.dump() + " is not valid: expected \"all-linear\" or a list of " + join(modules, ", "));
  } else {
    for (const auto& m : target_modules) {
      bool ok = m.is_string() && std::find(modules.begin(), modules.end(), m.get<std::string>()) != modules.end();
      std::string near = m.is_string() ? nearest_name(m.get<std::string>(), modules) : "";
      check(ok, source, "key \"target_modules\": " + m.dump() + " is not one of " + join(modules, ", "),
            near.empty() ? "" : "did you mean \"" + near + "\"?");
    }
  }
  check(chat_template_kwargs.is_object(), source,
        "key \"chat_template_kwargs\": value " + chat_template_kwargs.dump() + " is not valid: expected an object of "
        "template variables", "e.g. {\"enable_thinking\": false}");
  for (const char* reserved : {"messages", "add_generation_prompt"})
    check(!chat_template_kwargs.contains(reserved), source,
          std::string("key \"chat_template_kwargs\": \"") + reserved + "\" is set from each prompt, not in the config");
  check(chat_template_kwargs.dump().size() <= 65536, source,
        "key \"chat_template_kwargs\": larger than 64 KiB of JSON", "template variables are small flags and strings");
  check(reward_funcs.is_array() && !reward_funcs.empty(), source,
        "key \"reward_funcs\": expected a non-empty list of reward specs like {\"name\": \"accuracy\"}");
  check(reward_weights.empty() || reward_weights.size() == reward_funcs.size(), source,
        "key \"reward_weights\": " + std::to_string(reward_weights.size()) + " weights for " +
            std::to_string(reward_funcs.size()) + " reward functions");
}

json TrainConfig::to_json() const {
  json j = json::object();
  for (const auto& f : fields()) j[f.name] = get_field(*this, f);
  return j;
}

json parse_config_text(const std::string& text, const std::string& source) {
  if (ends_with(source, ".yaml") || ends_with(source, ".yml")) {
    try {
      return yaml_to_json(YAML::Load(text), source);
    } catch (const YAML::Exception& e) {
      throw Error(source, "line " + std::to_string(e.mark.line + 1) + ", column " + std::to_string(e.mark.column + 1) +
                              ": invalid YAML: " + e.msg);
    }
  }
  check_json_depth(text, source);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    throw Error(source, std::string("invalid JSON: ") + e.what());
  }
}

json load_config_file(const std::string& path) { return parse_config_text(read_file(path), path); }

TrainConfig load_train_config(const std::string& path) {
  TrainConfig c;
  c.apply(load_config_file(path), path);
  c.validate(path);
  return c;
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const auto& f : fields()) keys.push_back(f.name);
  return keys;
}

bool is_retunable(const std::string& key) {
  const Field* f = find_field(key);
  return f && f->retunable;
}

std::string config_key_range(const std::string& key) {
  const Field* f = find_field(key);
  if (!f) return "";
  const bool numeric = std::holds_alternative<int64_t TrainConfig::*>(f->member) ||
                       std::holds_alternative<double TrainConfig::*>(f->member) ||
                       std::holds_alternative<std::optional<double> TrainConfig::*>(f->member) ||
                       std::holds_alternative<std::vector<double> TrainConfig::*>(f->member);
  return numeric || !f->choices.empty() ? range_text(*f) : "";
}

}  // namespace grpo::grpo

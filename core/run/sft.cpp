// Supervised fine-tuning and random checkpoint initialisation (see sft.h). Reading order: the
// config table, the data (pairs -> token ids), the training step over packed rows, the arith
// eval, run_sft, init_model.
#include "core/run/sft.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/common/strings.h"
#include "core/grpo/config.h"
#include "core/grpo/optimizer.h"
#include "core/grpo/packing.h"
#include "core/grpo/trainer.h"
#include "core/io/hf_config.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "core/rollout/dataset_sampler.h"
#include "core/rollout/reward_builtin.h"
#include "core/rollout/sampler.h"
#include "core/run/policy.h"
#include "core/run/sync_trainer.h"

namespace grpo::run {
using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Config keys: one row per key with its setter (which checks type and range) and its value.
namespace {

struct Key {
  std::string name;
  std::function<void(SftConfig&, const json&, const std::string&)> set;
  std::function<json(const SftConfig&)> get;
};

[[noreturn]] void bad(const std::string& ctx, const json& v, const std::string& allowed) {
  throw Error(ctx, "bad value " + v.dump() + " (allowed: " + allowed + ")");
}

Key int_key(std::string name, int64_t SftConfig::*f, int64_t lo, int64_t hi, std::string allowed) {
  return {name,
          [=](SftConfig& c, const json& v, const std::string& ctx) {
            if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) bad(ctx, v, allowed);
            c.*f = v.get<int64_t>();
          },
          [=](const SftConfig& c) { return json(c.*f); }};
}
Key num_key(std::string name, double SftConfig::*f, double lo, double hi, bool lo_open, std::string allowed) {
  return {name,
          [=](SftConfig& c, const json& v, const std::string& ctx) {
            if (!v.is_number()) bad(ctx, v, allowed);
            const double x = v.get<double>();
            if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo)) bad(ctx, v, allowed);
            c.*f = x;
          },
          [=](const SftConfig& c) { return json(c.*f); }};
}
Key bool_key(std::string name, bool SftConfig::*f) {
  return {name,
          [=](SftConfig& c, const json& v, const std::string& ctx) {
            if (!v.is_boolean()) bad(ctx, v, "true or false");
            c.*f = v.get<bool>();
          },
          [=](const SftConfig& c) { return json(c.*f); }};
}
Key str_key(std::string name, std::string SftConfig::*f, std::vector<std::string> choices = {}) {
  return {name,
          [=](SftConfig& c, const json& v, const std::string& ctx) {
            const std::string allowed = choices.empty() ? "a string" : "one of " + join(choices, ", ");
            if (!v.is_string()) bad(ctx, v, allowed);
            if (!choices.empty() && std::find(choices.begin(), choices.end(), v.get<std::string>()) == choices.end())
              bad(ctx, v, allowed);
            c.*f = v.get<std::string>();
          },
          [=](const SftConfig& c) { return json(c.*f); }};
}

const std::vector<Key>& keys() {
  constexpr int64_t big = int64_t(1) << 40;
  static const std::vector<Key> k = {
      str_key("model_name_or_path", &SftConfig::model_name_or_path),
      str_key("train_file", &SftConfig::train_file),
      str_key("task", &SftConfig::task, {"", "arith"}),
      int_key("task_difficulty", &SftConfig::task_difficulty, 1, 5, "an integer 1..5"),
      int_key("eval_size", &SftConfig::eval_size, 0, 100000, "an integer 0..100000"),
      str_key("output_dir", &SftConfig::output_dir),
      str_key("save_format", &SftConfig::save_format, {"auto", "checkpoint", "adapter"}),
      str_key("save_dtype", &SftConfig::save_dtype, {"float32", "bfloat16", "float16"}),
      int_key("seed", &SftConfig::seed, 0, big, "an integer >= 0"),
      bool_key("use_lora", &SftConfig::use_lora),
      int_key("r", &SftConfig::r, 1, 4096, "an integer 1..4096"),
      num_key("lora_alpha", &SftConfig::lora_alpha, 0, 1e6, true, "a number > 0"),
      num_key("lora_dropout", &SftConfig::lora_dropout, 0, 0.99, false, "a number in [0, 0.99]"),
      {"target_modules",
       [](SftConfig& c, const json& v, const std::string& ctx) {
         bool ok = v.is_string() || (v.is_array() && !v.empty());
         if (v.is_array())
           for (const auto& x : v) ok = ok && x.is_string();
         if (!ok) bad(ctx, v, "\"all-linear\" or a list of module names such as [\"q_proj\", \"v_proj\"]");
         c.target_modules = v;
       },
       [](const SftConfig& c) { return c.target_modules; }},
      bool_key("use_rslora", &SftConfig::use_rslora),
      num_key("learning_rate", &SftConfig::learning_rate, 0, 10, true, "a number in (0, 10]"),
      str_key("lr_scheduler_type", &SftConfig::lr_scheduler_type, {"constant", "linear", "cosine"}),
      num_key("warmup_ratio", &SftConfig::warmup_ratio, 0, 1, false, "a number in [0, 1]"),
      int_key("max_steps", &SftConfig::max_steps, -1, big, "an integer; <= 0 trains num_train_epochs"),
      int_key("num_train_epochs", &SftConfig::num_train_epochs, 1, 100000, "an integer >= 1"),
      int_key("per_device_train_batch_size", &SftConfig::per_device_train_batch_size, 1, 1 << 20, "an integer >= 1"),
      int_key("token_budget", &SftConfig::token_budget, 2, big, "an integer >= 2"),
      int_key("max_length", &SftConfig::max_length, 2, big, "an integer >= 2"),
      num_key("max_grad_norm", &SftConfig::max_grad_norm, -1, 1e9, false, "a number; <= 0 disables clipping"),
      num_key("weight_decay", &SftConfig::weight_decay, 0, 10, false, "a number >= 0"),
      num_key("adam_beta1", &SftConfig::adam_beta1, 0, 1, false, "a number in [0, 1)"),
      num_key("adam_beta2", &SftConfig::adam_beta2, 0, 1, false, "a number in [0, 1)"),
      num_key("adam_epsilon", &SftConfig::adam_epsilon, 0, 1, true, "a number in (0, 1]"),
      int_key("logging_steps", &SftConfig::logging_steps, 1, big, "an integer >= 1"),
      int_key("eval_steps", &SftConfig::eval_steps, 0, big, "an integer >= 0 (0: evaluate at the end only)"),
  };
  return k;
}

}  // namespace

std::vector<std::string> sft_config_keys() {
  std::vector<std::string> names;
  for (const auto& k : keys()) names.push_back(k.name);
  return names;
}

void SftConfig::apply(const json& j, const std::string& source) {
  check(j.is_object(), source, std::string("expected a JSON/YAML object of keys, got ") + j.type_name());
  for (const auto& [name, value] : j.items()) {
    auto it = std::find_if(keys().begin(), keys().end(), [&](const Key& k) { return k.name == name; });
    if (it == keys().end()) {
      const std::string near = nearest_name(name, sft_config_keys());
      throw Error(source, "unknown key \"" + name + "\"",
                  near.empty() ? "known keys: " + join(sft_config_keys(), ", ") : "did you mean \"" + near + "\"?");
    }
    it->set(*this, value, source + ": key \"" + name + "\"");
  }
}

void SftConfig::validate(const std::string& source) const {
  check(!model_name_or_path.empty(), source, "model_name_or_path is required", "a Hugging Face model directory");
  check(task.empty() != train_file.empty(), source + ": train_file / task",
        task.empty() ? "give a train_file (JSONL prompt/completion pairs) or task: arith"
                     : "give either train_file or task: arith, not both");
  check(!output_dir.empty(), source, "output_dir is required");
  check(adam_beta1 < 1 && adam_beta2 < 1, source + ": adam_beta1/adam_beta2", "must be < 1");
  check(use_lora || save_format != "adapter", source + ": save_format",
        "\"adapter\" needs use_lora: true (a full fine-tune saves a checkpoint)");
  check(token_budget >= 2, source + ": token_budget", "must be >= 2");
}

json SftConfig::to_json() const {
  json j = json::object();
  for (const auto& k : keys()) j[k.name] = k.get(*this);
  return j;
}

std::string SftConfig::resolved_save_format() const {
  if (save_format != "auto") return save_format;
  return use_lora ? "adapter" : "checkpoint";
}

SftConfig load_sft_config(const std::string& path) {
  SftConfig c;
  c.apply(grpo::load_config_file(path), path);
  c.validate(path);
  return c;
}

// ---------------------------------------------------------------------------------------------
// Data: examples with a completion, encoded as the GRPO loop encodes prompts.
namespace {

struct Pair {
  rollout::Example prompt;
  std::string completion;
};

grpo::TrainConfig policy_config(const SftConfig& c) {
  grpo::TrainConfig t;
  t.model_name_or_path = c.model_name_or_path;
  t.task = c.task;
  t.train_file = c.train_file;
  t.task_difficulty = c.task_difficulty;
  t.eval_size = c.eval_size;
  t.seed = c.seed;
  t.r = c.r;
  t.lora_alpha = c.lora_alpha;
  t.lora_dropout = c.lora_dropout;
  t.target_modules = c.target_modules;
  t.use_rslora = c.use_rslora;
  return t;
}

std::string completion_text(const json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {  // TRL's conversational completion: [{"role": "assistant", "content": ...}]
    std::string out;
    for (const auto& m : v) {
      check(m.is_object() && m.contains("content") && m["content"].is_string(), where + ": field \"completion\"",
            "expected a string or a list of {\"role\", \"content\"} messages");
      out += m["content"].get<std::string>();
    }
    return out;
  }
  throw Error(where + ": field \"completion\"", std::string("expected a string, got ") + v.type_name());
}

std::vector<Pair> load_pairs(const SftConfig& c, std::vector<rollout::Example>* eval) {
  std::vector<Pair> pairs;
  if (c.task == "arith") {
    auto split = load_examples(policy_config(c));
    for (auto& ex : split.train) pairs.push_back({ex, ex.answer.value_or("")});
    if (eval) *eval = std::move(split.eval);
    return pairs;
  }
  for (auto& ex : rollout::load_dataset(c.train_file)) {
    const std::string where = c.train_file + ": row " + std::to_string(ex.index + 1);
    if (ex.metadata.contains("completion")) {
      pairs.push_back({ex, completion_text(ex.metadata["completion"], where)});
    } else if (ex.messages && ex.messages->is_array() && !ex.messages->empty() &&
               ex.messages->back().value("role", "") == "assistant") {
      // A whole conversation: the last assistant turn is the completion, the rest the prompt.
      json head = *ex.messages;
      std::string completion = head.back().value("content", "");
      head.erase(head.size() - 1);
      check(!head.empty(), where, "the conversation has only an assistant turn");
      ex.messages = head;
      ex.prompt_text = rollout::render_messages(head);
      pairs.push_back({ex, completion});
    } else {
      throw Error(where, "no \"completion\" field", "each row needs {\"prompt\": ..., \"completion\": ...}, or "
                                                    "\"messages\" ending with an assistant turn");
    }
  }
  return pairs;
}

// The token that ends an assistant turn: <|im_end|> / <|eot_id|> for chat models, else EOS.
std::optional<int64_t> end_of_turn(const Policy& p) {
  if (p.chat()) {
    for (const char* t : {"<|im_end|>", "<|eot_id|>"})
      if (auto id = p.tokenizer->token_to_id(t)) return *id;
  }
  if (auto id = p.tokenizer->eos_id()) return *id;
  if (!p.model->config().eos_token_ids.empty()) return p.model->config().eos_token_ids.front();
  return std::nullopt;
}

SftSample encode_pair(const Policy& p, const Pair& pair, std::optional<int64_t> end, int64_t max_len) {
  SftSample s;
  s.prompt_ids = p.encode_prompt(pair.prompt, 0);
  auto ids = p.tokenizer->encode(pair.completion, false);
  s.completion_ids.assign(ids.begin(), ids.end());
  if (end) s.completion_ids.push_back(*end);
  if (static_cast<int64_t>(s.completion_ids.size()) > max_len - 1) s.completion_ids.resize(max_len - 1);
  const int64_t room = max_len - static_cast<int64_t>(s.completion_ids.size());
  if (static_cast<int64_t>(s.prompt_ids.size()) > room)
    s.prompt_ids.erase(s.prompt_ids.begin(), s.prompt_ids.end() - room);  // keep the question's end
  return s;
}

// ---------------------------------------------------------------------------------------------
// One optimizer step's forward/backward: packed rows, completion-token cross-entropy.
struct StepStats {
  double loss = 0;
  double forwarded = 0;
};

StepStats forward_backward(model::CausalLMImpl& model, const std::vector<SftSample>& data,
                           const std::vector<int64_t>& batch, int64_t token_budget) {
  std::vector<int64_t> lengths;
  double targets_total = 0;
  for (int64_t i : batch) {
    lengths.push_back(static_cast<int64_t>(data[i].prompt_ids.size() + data[i].completion_ids.size()));
    targets_total += static_cast<double>(data[i].completion_ids.size());
  }
  auto packed = grpo::pack_token_budget(lengths, token_budget);
  const torch::Device dev = model.device();
  StepStats st;
  for (const auto& row : packed.rows) {
    std::vector<int64_t> ids, seq, pos, tgt;
    for (size_t k = 0; k < row.size(); ++k) {
      const SftSample& s = data[batch[row[k]]];
      const int64_t start = static_cast<int64_t>(ids.size());
      const int64_t P = static_cast<int64_t>(s.prompt_ids.size());
      ids.insert(ids.end(), s.prompt_ids.begin(), s.prompt_ids.end());
      ids.insert(ids.end(), s.completion_ids.begin(), s.completion_ids.end());
      seq.insert(seq.end(), s.prompt_ids.size() + s.completion_ids.size(), static_cast<int64_t>(k));
      for (size_t t = 0; t < s.completion_ids.size(); ++t) {
        pos.push_back(start + P - 1 + static_cast<int64_t>(t));  // logits at i predict token i+1
        tgt.push_back(s.completion_ids[t]);
      }
    }
    model::ForwardArgs args;
    args.seq_ids = torch::tensor(seq, torch::kInt64).unsqueeze(0).to(dev);         // (1, T)
    auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(dev);           // (1, T)
    auto hidden = model.hidden_states(input, args)[0];                             // (T, C)
    auto picked = hidden.index_select(0, torch::tensor(pos, torch::kInt64).to(dev));  // (N, C)
    auto logp = grpo::chunked_token_logprobs(model, picked, torch::tensor(tgt, torch::kInt64).to(dev), 1.0);  // (N)
    auto loss = -logp.sum() / targets_total;
    loss.backward();
    st.loss += loss.item<double>();
    st.forwarded += static_cast<double>(ids.size());
  }
  return st;
}

// Greedy accuracy of the model on arithmetic examples (the `accuracy` reward).
double greedy_accuracy(Policy& p, const std::vector<rollout::Example>& eval) {
  if (eval.empty()) return -1;
  torch::NoGradGuard ng;
  p.model->eval();
  rollout::Sampler sampler(p.model, p.tokenizer.get());
  rollout::SamplingParams params;
  params.temperature = 0.0;
  params.max_tokens = 16;
  params.stop_token_ids = p.stop_token_ids;
  double correct = 0;
  const size_t chunk = 128;
  for (size_t s = 0; s < eval.size(); s += chunk) {
    std::vector<std::vector<int64_t>> prompts;
    const size_t e = std::min(eval.size(), s + chunk);
    for (size_t i = s; i < e; ++i) prompts.push_back(p.encode_prompt(eval[i], 0));
    auto out = sampler.generate(prompts, 1, params);
    for (size_t i = s; i < e; ++i) {
      rollout::RewardInput in{eval[i].prompt_text, p.decode(out[i - s][0].token_ids), eval[i].answer, eval[i].metadata};
      correct += rollout::AccuracyReward::score_one(in).value_or(0.0);
    }
  }
  p.model->train();
  return correct / static_cast<double>(eval.size());
}

torch::Dtype parse_dtype(const std::string& name, const std::string& ctx) {
  if (name == "float32") return torch::kFloat32;
  if (name == "bfloat16") return torch::kBFloat16;
  if (name == "float16") return torch::kFloat16;
  throw Error(ctx, "unsupported dtype \"" + name + "\"", "use float32, bfloat16 or float16");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
SftResult run_sft(const SftConfig& cfg, const std::function<void(const SftLog&)>& on_log) {
  cfg.validate("sft config");
  const auto t0 = std::chrono::steady_clock::now();
  torch::manual_seed(static_cast<uint64_t>(cfg.seed));
  Policy p = load_policy(policy_config(cfg), /*with_lora=*/false);
  if (!cfg.use_lora && p.model->device().is_cuda())  // full fine-tuning keeps fp32 master weights
    p.model = model::from_pretrained(p.model_dir, torch::kFloat32, p.model->device());
  if (cfg.use_lora) p.model->add_lora(lora_config_from(policy_config(cfg)));
  else p.model->set_base_trainable(true);

  SftResult res = train_sft(p, cfg, on_log);
  res.format = cfg.resolved_save_format();
  res.output_dir = cfg.output_dir;
  p.model->eval();
  if (res.format == "adapter") {
    model::save_adapter(*p.model, cfg.output_dir, cfg.model_name_or_path);
  } else {
    if (p.model->has_lora()) p.model->merge_adapter();
    model::save_pretrained(*p.model, cfg.output_dir, parse_dtype(cfg.save_dtype, "save_dtype"));
    copy_tokenizer_files(p.model_dir, cfg.output_dir);  // the folder read (a Hub id's snapshot)
  }
  res.elapsed_s = seconds_since(t0);
  return res;
}

SftResult train_sft(Policy& p, const SftConfig& cfg, const std::function<void(const SftLog&)>& on_log) {
  const auto t0 = std::chrono::steady_clock::now();
  torch::manual_seed(static_cast<uint64_t>(cfg.seed) + 1);
  std::vector<rollout::Example> eval;
  const auto pairs = load_pairs(cfg, &eval);
  check(!pairs.empty(), "sft", "no training examples");
  const auto end = end_of_turn(p);
  if (!end) log_warn("sft: the tokenizer has no end-of-turn or EOS token; completions are not terminated");
  const int64_t max_len = std::min(cfg.max_length, cfg.token_budget);
  std::vector<SftSample> data;
  data.reserve(pairs.size());
  for (const auto& pair : pairs) data.push_back(encode_pair(p, pair, end, max_len));

  const int64_t N = static_cast<int64_t>(data.size());
  const int64_t B = std::min(cfg.per_device_train_batch_size, N);
  const int64_t total = cfg.max_steps > 0 ? cfg.max_steps : (cfg.num_train_epochs * N + B - 1) / B;

  std::vector<torch::Tensor> params;
  if (p.model->has_lora()) params = p.model->lora_parameters();
  else
    for (const auto& item : p.model->named_base_parameters()) params.push_back(item.value());
  grpo::OptimizerConfig oc;
  oc.learning_rate = cfg.learning_rate;
  oc.lr_scheduler_type = cfg.lr_scheduler_type;
  oc.warmup_ratio = cfg.warmup_ratio;
  oc.total_steps = total;
  oc.max_grad_norm = cfg.max_grad_norm;
  oc.weight_decay = cfg.weight_decay;
  oc.beta1 = cfg.adam_beta1;
  oc.beta2 = cfg.adam_beta2;
  oc.eps = cfg.adam_epsilon;
  grpo::Optimizer opt(params, oc);

  SftResult res;
  res.train_examples = N;
  p.model->train();
  std::vector<int64_t> order;
  int64_t cursor = 0, epoch = -1, seen = 0;
  for (int64_t step = 1; step <= total; ++step) {
    const auto t_step = std::chrono::steady_clock::now();
    std::vector<int64_t> batch;
    while (static_cast<int64_t>(batch.size()) < B) {
      if (cursor >= static_cast<int64_t>(order.size())) {  // a fresh seeded permutation per epoch
        order = rollout::shuffled_order(N, static_cast<uint64_t>(cfg.seed), ++epoch);
        cursor = 0;
      }
      batch.push_back(order[cursor++]);
    }
    seen += B;
    StepStats st = forward_backward(*p.model, data, batch, cfg.token_budget);
    const double grad_norm = opt.step();
    res.losses.push_back(st.loss);

    SftLog log;
    log.step = step;
    log.max_steps = total;
    log.loss = st.loss;
    log.learning_rate = opt.current_lr();
    log.grad_norm = grad_norm;
    const double dt = seconds_since(t_step);
    log.tokens_per_s = dt > 0 ? st.forwarded / dt : 0;
    log.epoch = static_cast<double>(seen) / static_cast<double>(N);
    const bool last = step == total;
    if (cfg.task == "arith" && ((cfg.eval_steps > 0 && step % cfg.eval_steps == 0) || (last && cfg.eval_size > 0))) {
      log.eval_accuracy = greedy_accuracy(p, eval);
      if (last) res.eval_accuracy = log.eval_accuracy;
    }
    log.elapsed_s = seconds_since(t0);
    if (on_log && (step % cfg.logging_steps == 0 || last || log.eval_accuracy >= 0)) on_log(log);
  }
  res.steps = total;
  p.model->eval();
  res.elapsed_s = seconds_since(t0);
  return res;
}

// ---------------------------------------------------------------------------------------------
int copy_tokenizer_files(const std::string& src_dir, const std::string& dst_dir) {
  int n = 0;
  std::filesystem::create_directories(dst_dir);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"}) {
    const std::string src = path_join(src_dir, name);
    if (!file_exists(src)) continue;
    write_file_atomic(path_join(dst_dir, name), read_file(src));
    ++n;
  }
  return n;
}

InitModelResult init_model(const std::string& config_json, const std::string& tokenizer_dir,
                           const std::string& output_dir, uint64_t seed, const std::string& dtype) {
  const torch::Dtype save_dtype = parse_dtype(dtype, "--dtype");
  json j;
  try {
    j = json::parse(read_file(config_json));
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    throw Error(config_json, std::string("invalid JSON: ") + e.what());
  }
  io::ModelConfig mc = io::ModelConfig::from_json(j, config_json);
  const std::string tok_json = is_directory(tokenizer_dir) ? path_join(tokenizer_dir, "tokenizer.json") : tokenizer_dir;
  check(file_exists(tok_json), tokenizer_dir, "no tokenizer.json here", "--tokenizer takes a directory holding tokenizer.json");
  const std::string tok_dir = is_directory(tokenizer_dir) ? tokenizer_dir : std::filesystem::path(tokenizer_dir).parent_path().string();
  auto tok = text::Tokenizer::load(tok_dir);
  InitModelResult r;
  r.vocab_size = mc.vocab_size;
  r.tokenizer_vocab = static_cast<int64_t>(tok.vocab_size());
  check(r.tokenizer_vocab <= mc.vocab_size, config_json + ": vocab_size",
        "is " + std::to_string(mc.vocab_size) + " but the tokenizer has " + std::to_string(r.tokenizer_vocab) + " ids",
        "set vocab_size >= " + std::to_string(r.tokenizer_vocab));

  torch::manual_seed(seed);
  model::CausalLM m(model::CausalLMOptions(mc).dtype(torch::kFloat32).init_weights(false));
  m->init_weights(j.value("initializer_range", 0.02));
  r.parameters = m->num_base_parameters();
  model::save_pretrained(*m, output_dir, save_dtype);
  copy_tokenizer_files(tok_dir, output_dir);
  const std::string gen = path_join(output_dir, "generation_config.json");
  if (!file_exists(gen)) {
    json g = {{"transformers_version", "4.45.2"}};
    if (mc.bos_token_id) g["bos_token_id"] = *mc.bos_token_id;
    if (mc.eos_token_ids.size() == 1) g["eos_token_id"] = mc.eos_token_ids[0];
    else if (!mc.eos_token_ids.empty()) g["eos_token_id"] = mc.eos_token_ids;
    write_file_atomic(gen, g.dump(2) + "\n");
  }
  return r;
}

}  // namespace grpo::run

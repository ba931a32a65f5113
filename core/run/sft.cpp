// Supervised fine-tuning and random checkpoint initialisation (see sft.h). Reading order: the
// data (pairs -> token ids), the training step over packed rows, the arith
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
#include "core/grpo/choices.h"
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
#include "core/run/run_setup.h"

namespace grpo::run {
using nlohmann::json;

// (SftConfig and its key table: sft_config.cpp.)

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

// Greedy accuracy on the arithmetic eval split (rollout::greedy_accuracy with the built-in
// `accuracy`); short completions, as the answers are.
double sft_eval_accuracy(Policy& p, const std::vector<rollout::Example>& eval) {
  torch::NoGradGuard ng;
  p.model->eval();
  rollout::SamplingParams params;
  params.max_tokens = 16;
  params.stop_token_ids = p.stop_token_ids;
  auto how = p.greedy_eval(params, 0);
  how.chunk = 128;
  rollout::Sampler sampler(p.model, p.tokenizer.get());
  const double acc = rollout::greedy_accuracy(sampler, eval, 0, how);
  p.model->train();
  return acc;
}

torch::Dtype parse_dtype(const std::string& name, const std::string& ctx) {
  switch (grpo::kSaveDtypes.parse(name, ctx)) {
    case grpo::SaveDtype::BFloat16: return torch::kBFloat16;
    case grpo::SaveDtype::Float16: return torch::kFloat16;
    case grpo::SaveDtype::Float32: break;
  }
  return torch::kFloat32;
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
  grpo::Optimizer opt(params, grpo::optimizer_config(cfg, total));

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
      log.eval_accuracy = sft_eval_accuracy(p, eval);
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

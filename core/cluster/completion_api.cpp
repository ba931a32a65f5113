#include "core/common/json_limits.h"
#include "core/cluster/completion_api.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <random>

#include "core/cluster/http_message.h"
#include "core/text/tokenizer.h"

namespace grpo::cluster {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& message) {
  throw HttpError(400, "'" + field + "': " + message, "BadRequestError");
}

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

double number(const json& j, const char* key, double fallback) {
  if (!present(j, key)) return fallback;
  if (!j[key].is_number()) bad(key, "expected a number, got " + j[key].dump());
  const double v = j[key].get<double>();
  if (!std::isfinite(v)) bad(key, "must be finite");
  return v;
}

int64_t integer(const json& j, const char* key, int64_t fallback) {
  if (!present(j, key)) return fallback;
  if (!j[key].is_number_integer()) bad(key, "expected an integer, got " + j[key].dump());
  return j[key].get<int64_t>();
}

bool boolean(const json& j, const char* key, bool fallback) {
  if (!present(j, key)) return fallback;
  if (!j[key].is_boolean()) bad(key, "expected true or false, got " + j[key].dump());
  return j[key].get<bool>();
}

std::vector<int64_t> token_list(const json& a, const std::string& field, int64_t vocab) {
  std::vector<int64_t> ids;
  ids.reserve(a.size());
  for (const auto& x : a) {
    if (!x.is_number_integer()) bad(field, "expected token ids (integers), got " + x.dump());
    const int64_t id = x.get<int64_t>();
    if (id < 0 || (vocab > 0 && id >= vocab))
      bad(field, "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    ids.push_back(id);
  }
  return ids;
}

std::vector<int64_t> encode(const json& s, const text::Tokenizer* tok) {
  if (!tok) bad("prompt", "text prompts need a tokenizer; send token ids");
  const auto ids = tok->encode(s.get<std::string>(), /*add_special_tokens=*/true);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

// Neutral values of the sampling options we do not implement; anything else is refused.
void refuse_unsupported(const json& j) {
  const std::pair<const char*, double> neutral[] = {
      {"repetition_penalty", 1.0}, {"presence_penalty", 0.0}, {"frequency_penalty", 0.0}, {"length_penalty", 1.0}};
  for (const auto& [key, value] : neutral)
    if (present(j, key) && number(j, key, value) != value)
      bad(key, "not supported by this worker (only " + json(value).dump() + ")");
  if (boolean(j, "stream", false)) bad("stream", "streaming is not supported by this worker");
  if (boolean(j, "echo", false)) bad("echo", "echo is not supported by this worker");
  if (integer(j, "min_tokens", 0) != 0) bad("min_tokens", "not supported by this worker (only 0)");
  if (present(j, "best_of") && integer(j, "best_of", 1) > 1) bad("best_of", "not supported by this worker (only 1)");
  if (present(j, "suffix")) bad("suffix", "suffix is not supported");
  if (present(j, "prompt_logprobs")) bad("prompt_logprobs", "not supported by this worker");
}

}  // namespace

CompletionJob parse_completion_request(const std::string& body, const ModelLimits& limits,
                                       const text::Tokenizer* tokenizer) {
  json j;
  if (json_depth(body) > kMaxJsonDepth)
    throw HttpError(400, "request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels", "BadRequestError");
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    throw HttpError(400, std::string("request body is not valid JSON: ") + e.what(), "BadRequestError");
  }
  if (!j.is_object()) throw HttpError(400, "request body must be a JSON object", "BadRequestError");
  refuse_unsupported(j);
  CompletionJob job;
  if (present(j, "model")) {
    if (!j["model"].is_string()) bad("model", "expected a string");
    job.model = j["model"].get<std::string>();
  }

  if (!present(j, "prompt")) bad("prompt", "required");
  const json& p = j["prompt"];
  if (p.is_string()) {
    job.prompts.push_back(encode(p, tokenizer));
  } else if (p.is_array() && !p.empty()) {
    if (p[0].is_number_integer()) {
      job.prompts.push_back(token_list(p, "prompt", limits.vocab_size));
    } else {
      for (const auto& x : p) {
        if (x.is_array()) job.prompts.push_back(token_list(x, "prompt", limits.vocab_size));
        else if (x.is_string()) job.prompts.push_back(encode(x, tokenizer));
        else bad("prompt", "expected token ids, a list of token-id lists, a string or a list of strings");
      }
    }
  } else {
    bad("prompt", "expected token ids, a list of token-id lists, a string or a list of strings (non-empty)");
  }
  if (static_cast<int64_t>(job.prompts.size()) > limits.max_prompts)
    bad("prompt", std::to_string(job.prompts.size()) + " prompts in one request; the limit is " +
                      std::to_string(limits.max_prompts));
  for (const auto& pr : job.prompts)
    if (pr.empty()) bad("prompt", "a prompt has no tokens");

  job.n = integer(j, "n", 1);
  if (job.n < 1 || job.n > limits.max_n) bad("n", "must be in [1, " + std::to_string(limits.max_n) + "]");
  // prompts x n is one batch: bounded as a product (each factor is bounded, so it cannot overflow).
  const int64_t sequences = static_cast<int64_t>(job.prompts.size()) * job.n;
  if (sequences > limits.max_sequences)
    bad("n", std::to_string(job.prompts.size()) + " prompts x n " + std::to_string(job.n) + " = " +
                 std::to_string(sequences) + " sequences in one request; this worker's limit is " +
                 std::to_string(limits.max_sequences) + " (its --max-batch)");
  auto& sp = job.params;
  sp.max_tokens = integer(j, "max_tokens", 16);
  if (sp.max_tokens < 1) bad("max_tokens", "must be at least 1");
  // Without a known context length, a fixed cap; with one, the checked sum below (2^63-1 must not
  // wrap past the context check, as it once did).
  if (limits.max_model_len <= 0 && sp.max_tokens > limits.max_tokens_cap)
    bad("max_tokens", "must be at most " + std::to_string(limits.max_tokens_cap));
  sp.temperature = number(j, "temperature", 1.0);
  if (sp.temperature < 0) bad("temperature", "must be >= 0");
  sp.top_p = number(j, "top_p", 1.0);
  if (!(sp.top_p > 0 && sp.top_p <= 1)) bad("top_p", "must be in (0, 1]");
  const int64_t top_k = integer(j, "top_k", 0);
  if (top_k < -1) bad("top_k", "must be -1 or 0 (off) or a positive count");
  sp.top_k = top_k < 0 ? 0 : top_k;
  sp.min_p = number(j, "min_p", 0.0);
  if (sp.min_p < 0 || sp.min_p > 1) bad("min_p", "must be in [0, 1]");
  if (present(j, "seed")) job.seed = static_cast<uint64_t>(integer(j, "seed", 0));

  if (present(j, "stop_token_ids")) {
    if (!j["stop_token_ids"].is_array()) bad("stop_token_ids", "expected a list of token ids");
    job.request_stop_token_ids = token_list(j["stop_token_ids"], "stop_token_ids", limits.vocab_size);
  }
  sp.stop_token_ids = job.request_stop_token_ids;
  if (!boolean(j, "ignore_eos", false))
    for (int64_t id : limits.eos_token_ids)
      if (std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), id) == sp.stop_token_ids.end())
        sp.stop_token_ids.push_back(id);
  if (present(j, "stop")) {
    const json& s = j["stop"];
    if (s.is_string()) sp.stop.push_back(s.get<std::string>());
    else if (s.is_array())
      for (const auto& x : s) {
        if (!x.is_string()) bad("stop", "expected a string or a list of strings");
        sp.stop.push_back(x.get<std::string>());
      }
    else bad("stop", "expected a string or a list of strings");
    sp.stop.erase(std::remove(sp.stop.begin(), sp.stop.end(), std::string()), sp.stop.end());
    if (static_cast<int64_t>(sp.stop.size()) > limits.max_stop_strings)
      bad("stop", std::to_string(sp.stop.size()) + " stop strings; this worker takes at most " +
                      std::to_string(limits.max_stop_strings));
    for (const auto& x : sp.stop)
      if (static_cast<int64_t>(x.size()) > limits.max_stop_bytes)
        bad("stop", "a stop string of " + std::to_string(x.size()) + " bytes; each may have at most " +
                        std::to_string(limits.max_stop_bytes));
    if (!sp.stop.empty() && !tokenizer) bad("stop", "stop strings need a tokenizer");
  }

  if (present(j, "logprobs")) {
    const int64_t lp = integer(j, "logprobs", 0);
    if (lp < 0) bad("logprobs", "must be >= 0");
    if (lp > 0) bad("logprobs", "only 0 (the sampled token's log-probability) is supported by this worker");
    job.logprobs = true;
  }
  job.return_token_ids = boolean(j, "return_token_ids", false);
  job.return_tokens_as_token_ids = boolean(j, "return_tokens_as_token_ids", false);

  if (limits.max_model_len > 0)
    for (const auto& pr : job.prompts) {
      int64_t total = 0;
      const bool wraps = __builtin_add_overflow(static_cast<int64_t>(pr.size()), sp.max_tokens, &total);
      if (wraps || total > limits.max_model_len)
        throw HttpError(400,
                        "This model's maximum context length is " + std::to_string(limits.max_model_len) +
                            " tokens. However, you requested " +
                            (wraps ? std::string("more than 2^63") : std::to_string(total)) + " tokens (" +
                            std::to_string(pr.size()) + " in the messages, " + std::to_string(sp.max_tokens) +
                            " in the completion). Please reduce the length of the messages or completion.",
                        "BadRequestError");
    }
  return job;
}

nlohmann::json completion_response(const CompletionJob& job, const std::vector<std::vector<rollout::Completion>>& completions,
                                   const text::Tokenizer* tok, const ResponseInfo& info) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char id[40];
  std::snprintf(id, sizeof id, "cmpl-%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  auto decode = [&](const std::vector<int64_t>& ids, bool skip_special) {
    if (!tok) return std::string();
    std::vector<int32_t> v(ids.begin(), ids.end());
    return tok->decode(v, skip_special);
  };
  json choices = json::array();
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t p = 0; p < completions.size(); ++p) {
    const auto& prompt = job.prompts[p];
    prompt_tokens += static_cast<int64_t>(prompt.size());
    for (size_t s = 0; s < completions[p].size(); ++s) {
      const rollout::Completion& c = completions[p][s];
      completion_tokens += static_cast<int64_t>(c.token_ids.size());
      std::string text = decode(c.token_ids, true);
      json stop_reason = nullptr;
      if (c.finish_reason == "stop" && !c.token_ids.empty()) {
        const int64_t last = c.token_ids.back();
        const auto& own = job.request_stop_token_ids;
        if (std::find(own.begin(), own.end(), last) != own.end()) {
          stop_reason = last;
        } else {
          for (const auto& st : job.params.stop) {
            const size_t at = text.find(st);
            if (at != std::string::npos) {
              stop_reason = st;
              text.resize(at);  // vLLM leaves the stop string out of the text
              break;
            }
          }
        }
      }
      json logprobs = nullptr;
      if (job.logprobs) {
        json tokens = json::array(), offsets = json::array(), top = json::array();
        size_t offset = 0;
        for (size_t t = 0; t < c.token_ids.size(); ++t) {
          const int64_t tid = c.token_ids[t];
          std::string piece = job.return_tokens_as_token_ids ? "token_id:" + std::to_string(tid) : decode({tid}, false);
          offsets.push_back(offset);
          offset += job.return_tokens_as_token_ids ? 0 : piece.size();
          top.push_back(json{{piece, c.logprobs[t]}});
          tokens.push_back(std::move(piece));
        }
        logprobs = {{"text_offset", offsets}, {"token_logprobs", c.logprobs}, {"tokens", tokens}, {"top_logprobs", top}};
      }
      choices.push_back({{"index", static_cast<int64_t>(p) * job.n + static_cast<int64_t>(s)},
                         {"text", text},
                         {"logprobs", logprobs},
                         {"finish_reason", c.finish_reason},
                         {"stop_reason", stop_reason},
                         {"token_ids", job.return_token_ids ? json(c.token_ids) : json(nullptr)},
                         {"prompt_token_ids", job.return_token_ids ? json(prompt) : json(nullptr)},
                         {"prompt_logprobs", nullptr}});
    }
  }
  return {{"id", id},
          {"object", "text_completion"},
          {"created", static_cast<int64_t>(std::time(nullptr))},
          {"model", job.model},
          {"choices", choices},
          {"usage",
           {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens},
            {"prompt_tokens_details", nullptr}}},
          {"system_fingerprint", nullptr},
          {"kv_transfer_params", nullptr},
          {"grpo",
           {{"adapter", info.adapter.empty() ? json(nullptr) : json(info.adapter)},
            {"sha256", info.sha256.empty() ? json(nullptr) : json(info.sha256)},
            {"worker", info.worker},
            {"batch_requests", info.batch_requests},
            {"generation_s", info.generation_s}}}};
}

}  // namespace grpo::cluster

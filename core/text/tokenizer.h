// Tokenizer: a Hugging Face tokenizer.json (BPE models) loaded and run exactly as the Rust
// `tokenizers` library runs it, plus what tokenizer_config.json adds (bos/eos, chat template).
//
//   auto tok = grpo::text::Tokenizer::load("models/Qwen3-0.6B");   // dir or tokenizer.json
//   std::vector<int32_t> ids = tok.encode("Hello world");
//   std::string text = tok.decode(ids);
//
// Encoding: added tokens are cut out of the raw text, the rest is normalized, cut at
// normalized added tokens, pre-tokenized, and each word goes through the BPE model; with
// add_special_tokens the post-processor's tokens (e.g. <s>) are added. Thread-safe: a loaded
// Tokenizer is immutable apart from an internal, locked word cache; copies share one model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/text/chat_template.h"

namespace grpo::text {

class Tokenizer {
public:
  // `path`: a tokenizer.json file, or a directory holding tokenizer.json. A
  // tokenizer_config.json beside it (if present) provides bos/eos and the chat template; a
  // chat_template.jinja beside it replaces the config's template (as in transformers). A chat
  // template that does not parse is a grpo::Error here, naming the file and line:col.
  static Tokenizer load(const std::string& path);
  // From JSON text; `name` names the source in errors; `config_json` may be empty;
  // `chat_template_jinja`: the text of chat_template.jinja, if any.
  static Tokenizer from_json(std::string_view tokenizer_json, const std::string& name = "tokenizer.json",
                             std::string_view config_json = {},
                             const std::optional<std::string>& chat_template_jinja = std::nullopt);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One past the largest id (model vocabulary and added tokens).
  size_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;

  // From tokenizer_config.json ("bos_token"/"eos_token"); nullopt when absent or not a token.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  const std::string& bos_token() const;
  const std::string& eos_token() const;

  // The chat template's Jinja source (chat_template.jinja or tokenizer_config.json), if any.
  const std::optional<std::string>& chat_template() const;
  // The parsed template (nullptr when there is none).
  const ChatTemplate* chat() const;
  // Renders messages with the model's chat template (see chat_template.h); throws grpo::Error if
  // there is no template or the template raises.
  std::string apply_chat_template(const nlohmann::ordered_json& messages, const ChatTemplate::Options& options) const;
  std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt) const;

  struct Impl;

private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace grpo::text

// Chat templates: the model's own Jinja template (tokenizer_config.json's `chat_template`, or
// chat_template.jinja beside it) run by our Jinja interpreter (jinja.h) exactly as
// transformers' apply_chat_template renders it: the variables are the special tokens
// (bos_token, eos_token, unk_token, pad_token, ... as in tokenizer_config.json), `messages`,
// `tools` and `documents` (None unless given), `add_generation_prompt`, and any extra keyword
// arguments (e.g. Qwen 3's enable_thinking=false: TRL's chat_template_kwargs).
//
//   ChatTemplate t(source, "model/tokenizer_config.json: chat_template", {{"eos_token", "<|im_end|>"}});
//   std::string text = t.render(messages, {.add_generation_prompt = true});
//
// Messages are JSON objects {role, content, ...}: other fields (tool_calls, reasoning_content,
// name) pass through to the template. A template that does not parse is a grpo::Error naming
// `name` and line:col when constructed; one that calls raise_exception(msg) throws an Error
// whose message is msg.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/text/jinja_parse.h"

namespace grpo::text {

namespace jinja {
class Template;
}

struct ChatMessage {
  std::string role;
  std::string content;
};

class ChatTemplate {
public:
  struct Options {
    bool add_generation_prompt = false;
    // transformers' continue_final_message: cut the text right after the last message's content.
    bool continue_final_message = false;
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // extra template variables
  };

  // `variables`: an object of template variables set before messages (the special tokens).
  ChatTemplate(const std::string& source, std::string name,
               nlohmann::ordered_json variables = nlohmann::ordered_json::object(), jinja::Limits limits = {});

  std::string render(const nlohmann::ordered_json& messages, const Options& options) const;
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  // TRL's maybe_apply_chat_template for a conversational prompt: the last message must be from
  // the user (or a tool result): add the generation prompt; from the assistant: continue it.
  std::string render_prompt(const nlohmann::ordered_json& messages,
                            const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object()) const;

  const std::string& source() const { return source_; }
  const std::string& name() const { return name_; }

  // The chat template a model folder provides: `jinja_file` (the text of chat_template.jinja,
  // which wins when present), else tokenizer_config.json's chat_template: a string or a list of
  // {"name", "template"} (the one named "default"). nullopt when there is none.
  static std::optional<ChatTemplate> from_config(const nlohmann::json& config, const std::string& config_name,
                                                 const std::optional<std::string>& jinja_file,
                                                 const std::string& jinja_file_name);

private:
  std::string source_, name_;
  nlohmann::ordered_json variables_;
  std::shared_ptr<const jinja::Template> template_;
};

// Messages (ChatMessage) as the JSON list templates see.
nlohmann::ordered_json to_json(const std::vector<ChatMessage>& messages);

}  // namespace grpo::text

// Chat templates without a Jinja engine: we recognise the two families GRPO runs use and render
// them exactly as transformers' apply_chat_template would for plain {role, content} messages
// (no tools): ChatML (Qwen 2/2.5/3, SmolLM; the template contains <|im_start|>) and Llama 3
// (3.0 and 3.1+ with its dated system header; the template contains <|start_header_id|>).
// Any other template is a grpo::Error that offers the plain-prompt fallback.
#pragma once

#include <string>
#include <vector>

namespace grpo::text {

struct ChatMessage {
  std::string role;
  std::string content;
};

enum class ChatStyle { ChatML, Llama3 };

class ChatTemplate {
public:
  // Recognises `source` (the Jinja text of tokenizer_config.json's chat_template); throws
  // grpo::Error when it is neither ChatML nor Llama 3.
  static ChatTemplate recognise(const std::string& source, const std::string& bos_token,
                                const std::string& eos_token);

  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  ChatStyle style() const { return style_; }
  const std::string& source() const { return source_; }
  // Llama 3.1+: the "Today Date" the template prints (default: what the template would use).
  void set_date_string(std::string date) { date_string_ = std::move(date); }

  // The fallback for unsupported templates: message contents joined by blank lines.
  static std::string plain_prompt(const std::vector<ChatMessage>& messages);

private:
  std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  ChatStyle style_ = ChatStyle::ChatML;
  std::string source_, bos_;
  // ChatML features found in the source.
  std::string default_system_;  // used when messages[0] is not a system message
  bool has_default_system_ = false;
  bool thinking_ = false;     // Qwen 3: <think> blocks for assistant turns after the last query
  bool tool_aware_ = false;   // Qwen 2.5/3: known roles only, grouped <tool_response> turns
  bool bos_prefix_ = false;
  // Llama 3.1+.
  bool dated_system_ = false;
  std::string date_string_;
};

}  // namespace grpo::text

// Chat templates: see chat_template.h.
#include "core/text/chat_template.h"

#include "core/common/error.h"
#include "core/text/jinja.h"

namespace grpo::text {

using ojson = nlohmann::ordered_json;

namespace {

// Special-token fields of tokenizer_config.json that transformers' special_tokens_map exposes.
std::string token_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

ojson special_tokens(const nlohmann::json& config) {
  ojson vars = ojson::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    std::string t = token_text(*it);
    if (!t.empty()) vars[key] = t;
  }
  if (auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array()) {
    ojson list = ojson::array();
    for (const auto& v : *it) {
      std::string t = token_text(v);
      if (!t.empty()) list.push_back(t);
    }
    vars["additional_special_tokens"] = list;
  }
  return vars;
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string name, ojson variables, jinja::Limits limits)
    : source_(source), name_(std::move(name)), variables_(std::move(variables)),
      template_(std::make_shared<const jinja::Template>(source, name_, limits)) {
  if (!variables_.is_object()) throw Error(name_, "template variables must be a JSON object");
}

std::string ChatTemplate::render(const ojson& messages, const Options& options) const {
  if (!messages.is_array()) throw Error(name_, "messages must be a JSON array of {\"role\", \"content\"} objects");
  if (!options.kwargs.is_object()) throw Error(name_, "chat template kwargs must be a JSON object");
  jinja::Dict ctx;
  for (auto it = variables_.begin(); it != variables_.end(); ++it) ctx.set(it.key(), jinja::from_json(it.value()));
  ctx.set("messages", jinja::from_json(messages));
  ctx.set("tools", jinja::Value::none());
  ctx.set("documents", jinja::Value::none());
  ctx.set("add_generation_prompt", jinja::Value::boolean(options.add_generation_prompt));
  for (auto it = options.kwargs.begin(); it != options.kwargs.end(); ++it) {
    if (it.key() == "messages" || it.key() == "add_generation_prompt")
      throw Error(name_, "chat template kwargs cannot set \"" + it.key() + "\"", "it is set from the conversation");
    ctx.set(it.key(), jinja::from_json(it.value()));
  }
  std::string text = template_->render(ctx);
  if (options.continue_final_message) {
    if (options.add_generation_prompt)
      throw Error(name_, "continue_final_message and add_generation_prompt cannot both be set");
    if (messages.empty() || !messages.back().is_object() || !messages.back().contains("content") ||
        !messages.back()["content"].is_string())
      throw Error(name_, "continue_final_message needs a final message with string content");
    std::string final = messages.back()["content"].get<std::string>();
    size_t p = text.rfind(final);
    if (p == std::string::npos || final.empty()) {
      // transformers retries with the stripped content (templates may trim it)
      size_t b = final.find_first_not_of(" \t\n\r\f\v"), e = final.find_last_not_of(" \t\n\r\f\v");
      final = b == std::string::npos ? "" : final.substr(b, e - b + 1);
      p = final.empty() ? std::string::npos : text.rfind(final);
      if (p == std::string::npos)
        throw Error(name_, "continue_final_message: the final message's content is not in the rendered text",
                    "the template changes or drops the last assistant message");
    }
    text.resize(p + final.size());
  }
  return text;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  Options o;
  o.add_generation_prompt = add_generation_prompt;
  return render(to_json(messages), o);
}

std::string ChatTemplate::render_prompt(const ojson& messages, const ojson& kwargs) const {
  if (!messages.is_array() || messages.empty())
    throw Error(name_, "a conversational prompt must be a non-empty list of messages");
  const ojson& last = messages.back();
  std::string role = last.is_object() && last.contains("role") && last["role"].is_string() ? last["role"].get<std::string>() : "";
  Options o;
  o.kwargs = kwargs;
  if (role == "user" || role == "tool") o.add_generation_prompt = true;
  else if (role == "assistant") o.continue_final_message = true;
  else
    throw Error(name_, "invalid role in the last message of a prompt: \"" + role + "\"",
                "a prompt ends with a user message (the model answers) or an assistant message (the model continues it)");
  return render(messages, o);
}

std::optional<ChatTemplate> ChatTemplate::from_config(const nlohmann::json& config, const std::string& config_name,
                                                      const std::optional<std::string>& jinja_file,
                                                      const std::string& jinja_file_name) {
  ojson vars = special_tokens(config);
  if (jinja_file) return ChatTemplate(*jinja_file, jinja_file_name, vars);
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::nullopt;
  const std::string where = config_name + ": chat_template";
  if (it->is_string()) return ChatTemplate(it->get<std::string>(), where, vars);
  if (!it->is_array()) throw Error(where, std::string("expected a string or a list of {\"name\", \"template\"}, got ") + it->type_name());
  std::vector<std::string> names;
  for (size_t k = 0; k < it->size(); ++k) {
    const auto& t = (*it)[k];
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("template") || !t["template"].is_string())
      throw Error(where + "[" + std::to_string(k) + "]", "expected {\"name\": string, \"template\": string}");
    std::string name = t["name"].get<std::string>();
    if (name == "default") return ChatTemplate(t["template"].get<std::string>(), where + "[" + std::to_string(k) + "] (default)", vars);
    names.push_back(name);
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw Error(where, "several chat templates and none is named \"default\" (found: " + list + ")",
              "transformers needs a \"default\" template too");
}

nlohmann::ordered_json to_json(const std::vector<ChatMessage>& messages) {
  ojson out = ojson::array();
  for (const auto& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

}  // namespace grpo::text

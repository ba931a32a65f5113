// `grpo inspect chat`: see chat_command.h.
#include "tools/chat_command.h"

#include <istream>
#include <ostream>

#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/text/tokenizer.h"

namespace grpo::text {
namespace {

using ojson = nlohmann::ordered_json;

std::string json_line(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

std::string render_line(const ChatTemplate& t, const std::string& line, bool default_gen) {
  ojson j = ojson::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error("", "not valid JSON");
  ChatTemplate::Options o;
  o.add_generation_prompt = default_gen;
  ojson messages;
  if (j.is_array()) {
    messages = j;
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() != "messages" && it.key() != "add_generation_prompt" && it.key() != "kwargs")
        throw Error("", "unknown key \"" + it.key() + "\"", "expected {\"messages\": [...], \"add_generation_prompt\": bool, \"kwargs\": {...}}");
    }
    if (!j.contains("messages")) throw Error("", "missing \"messages\"");
    messages = j["messages"];
    if (j.contains("add_generation_prompt")) {
      if (!j["add_generation_prompt"].is_boolean()) throw Error("", "\"add_generation_prompt\" must be true or false");
      o.add_generation_prompt = j["add_generation_prompt"].get<bool>();
    }
    if (j.contains("kwargs")) {
      if (!j["kwargs"].is_object()) throw Error("", "\"kwargs\" must be an object");
      o.kwargs = j["kwargs"];
    }
  } else {
    throw Error("", "expected a list of messages or {\"messages\": [...], ...}");
  }
  if (!messages.is_array()) throw Error("", "\"messages\" must be a list of {\"role\", \"content\"} objects");
  for (const auto& m : messages)
    if (!m.is_object()) throw Error("", "each message must be an object like {\"role\": \"user\", \"content\": \"...\"}");
  return t.render(messages, o);
}

}  // namespace

int run_chat(const ChatCommandOptions& options, std::istream& in, std::ostream& out) {
  Tokenizer tok = Tokenizer::load(options.tokenizer);
  const ChatTemplate* t = tok.chat();
  if (!t)
    throw Error(options.tokenizer, "no chat template (no chat_template in tokenizer_config.json, no chat_template.jinja)");
  std::string line;
  int errors = 0;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out << json_line(render_line(*t, line, options.add_generation_prompt)) << '\n';
    } catch (const Error& e) {
      ++errors;
      std::string msg = e.context().empty() ? e.message() : e.context() + ": " + e.message();
      out << json_line({{"error", "line " + std::to_string(number) + ": " + msg}}) << '\n';
    }
    out.flush();
  }
  return errors;
}

}  // namespace grpo::text

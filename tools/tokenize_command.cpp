// `grpo inspect tokenize`: see tokenize_command.h.
#include "tools/tokenize_command.h"

#include <istream>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/text/tokenizer.h"

namespace grpo::text {
namespace {

using json = nlohmann::json;

std::vector<ChatMessage> parse_messages(const json& j, const std::string& where) {
  check(j.is_array(), where, "expected a JSON array of {\"role\", \"content\"} messages");
  std::vector<ChatMessage> messages;
  for (const json& m : j) {
    check(m.is_object() && m.contains("role") && m["role"].is_string() && m.contains("content") &&
              m["content"].is_string(),
          where, "each message needs string \"role\" and \"content\": " + m.dump());
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return messages;
}

void print_ids(std::ostream& out, const std::vector<int32_t>& ids) { out << json(ids).dump() << '\n'; }

}  // namespace

void run_tokenize(const TokenizeOptions& options, std::istream& in, std::ostream& out) {
  Tokenizer tok = Tokenizer::load(options.tokenizer);
  std::string line;
  size_t number = 0;

  if (options.chat) {
    std::stringstream all;
    all << in.rdbuf();
    std::string text = all.str();
    // One JSON document for the whole input, else one per non-empty line.
    json whole = json::parse(text, nullptr, /*allow_exceptions=*/false);
    auto emit = [&](const json& j, const std::string& where) {
      auto messages = parse_messages(j, where);
      print_ids(out, tok.encode(tok.apply_chat_template(messages, /*add_generation_prompt=*/true),
                                options.add_special));
    };
    if (!whole.is_discarded()) {
      emit(whole, "stdin");
      return;
    }
    std::istringstream lines(text);
    while (std::getline(lines, line)) {
      ++number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      std::string where = "stdin line " + std::to_string(number);
      json j = json::parse(line, nullptr, false);
      check(!j.is_discarded(), where, "not valid JSON");
      emit(j, where);
    }
    return;
  }

  while (std::getline(in, line)) {
    ++number;
    if (options.decode) {
      std::string where = "stdin line " + std::to_string(number);
      json j = json::parse(line, nullptr, false);
      check(!j.is_discarded() && j.is_array(), where, "expected a JSON array of token ids");
      std::vector<int32_t> ids;
      for (const json& v : j) {
        check(v.is_number_integer(), where, "token ids must be integers, got " + v.dump());
        ids.push_back(v.get<int32_t>());
      }
      out << json(tok.decode(ids, options.skip_special)).dump() << '\n';
    } else {
      print_ids(out, tok.encode(line, options.add_special));
    }
  }
}

}  // namespace grpo::text

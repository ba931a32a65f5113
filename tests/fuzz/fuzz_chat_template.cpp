// Fuzz target: a chat template's Jinja source (lexer, parser, interpreter and their limits),
// rendered with a small conversation that has tool calls, with and without the generation prompt.
#include "core/text/chat_template.h"
#include "tests/fuzz/fuzz_target.h"

FUZZ_BODY({
  grpo::text::jinja::Limits limits;
  limits.max_loop_iterations = 100000;  // keep each input fast
  limits.max_output_bytes = 1 << 20;
  grpo::text::ChatTemplate t(input, "fuzz/chat_template.jinja", {{"bos_token", "<s>"}, {"eos_token", "</s>"}}, limits);
  const auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "S"}, {"role": "user", "content": "héllo <|im_end|>"},
    {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [{"id": "call12345", "type": "function",
      "function": {"name": "f", "arguments": {"x": 1, "y": [true, null, 1.5]}}}]},
    {"role": "tool", "tool_call_id": "call12345", "content": "{\"ok\": 1}"}, {"role": "user", "content": ""}])");
  grpo::text::ChatTemplate::Options o;
  o.kwargs = {{"enable_thinking", false}, {"tools", nlohmann::ordered_json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}})}};
  (void)t.render(messages, o);
  o.add_generation_prompt = true;
  (void)t.render(messages, o);
})

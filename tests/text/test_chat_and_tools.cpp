// Chat templates through the Tokenizer (Qwen 3's real template, Llama 3, the list form of
// chat_template, chat_template.jinja, TRL's prompt rule), errors for unsupported components, and
// the `grpo inspect tokenize` command. Expected chat strings were written out by hand and checked
// against Jinja2 3.1.6 rendering the same templates with transformers' settings (trim_blocks,
// lstrip_blocks). Many more templates are compared with @huggingface/jinja in test_chat_golden.
#include "tests/common/test_paths.h"
#include <QtTest/QtTest>

#include <sstream>

#include "core/common/error.h"
#include "tools/chat_command.h"
#include "tools/tokenize_command.h"
#include "core/text/tokenizer.h"
#include "tests/text/test_util.h"

using grpo::text::ChatMessage;
using grpo::text::ChatTemplate;
using grpo::text::Tokenizer;

namespace {

std::string qwen3_dir() { return std::string(GRPO_TEST_DATA) + "/golden/tokenizers/qwen3"; }

// A tiny valid tokenizer.json with `patch` merged over the top level.
std::string tiny_tokenizer(const nlohmann::json& patch = nlohmann::json::object()) {
  nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}}}}};
  j.merge_patch(patch);
  return j.dump();
}

// The error thrown by loading `json`, or "" if none.
std::string load_error(const std::string& json) {
  try {
    Tokenizer::from_json(json, "tiny.json");
  } catch (const grpo::Error& e) {
    return std::string(e.what()) + " | hint: " + e.hint();
  }
  return "";
}

const char* kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

}  // namespace

class TestChatAndTools : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void qwen3_chatml() {
    Tokenizer tok = Tokenizer::load(qwen3_dir());
    QVERIFY(tok.chat_template().has_value());
    std::vector<ChatMessage> conversation = {
        {"system", "You are helpful."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}};
    QCOMPARE(tok.apply_chat_template(conversation, true),
             std::string("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                         "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
                         "<|im_start|>assistant\n"));
    QCOMPARE(tok.apply_chat_template(conversation, false),
             std::string("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                         "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"));
    // Assistant turns after the last user query get a <think> block (empty if none given).
    QCOMPARE(tok.apply_chat_template({{"user", "Hi"}, {"assistant", "Answer"}}, false),
             std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                         "Answer<|im_end|>\n"));
    QCOMPARE(tok.apply_chat_template({{"user", "Hi"}, {"assistant", "<think>\nreason\n</think>\n\nAnswer"}}, true),
             std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nreason\n</think>\n\n"
                         "Answer<|im_end|>\n<|im_start|>assistant\n"));
    QCOMPARE(tok.apply_chat_template({{"user", "Q1"}, {"assistant", "<think>r1</think>A1"}, {"user", "Q2"},
                                      {"assistant", "<think>\nr2\n</think>A2"}, {"assistant", "more"}}, false),
             std::string("<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
                         "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\nr2\n</think>\n\n"
                         "A2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nmore<|im_end|>\n"));
    // A system message that is not first is rendered in place; content is not trimmed.
    QCOMPARE(tok.apply_chat_template({{"user", " spaced \n"}, {"system", "late system"}}, true),
             std::string("<|im_start|>user\n spaced \n<|im_end|>\n<|im_start|>system\nlate system<|im_end|>\n"
                         "<|im_start|>assistant\n"));
  }

  void chatml_default_system_prompt() {
    // Qwen 2.5 style: a default system prompt when the conversation has none.
    std::string src =
        "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
        "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You "
        "are a helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- for m in messages if m.role != 'system' %}"
        "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    ChatTemplate t(src, "qwen2.5", {{"eos_token", "<|im_end|>"}});
    QCOMPARE(t.render({{"user", "Hi"}}, true),
             std::string("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                         "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    QCOMPARE(t.render({{"system", "S"}, {"user", "Hi"}}, false),
             std::string("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"));
  }

  void llama3() {
    nlohmann::json config = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"},
                             {"chat_template", nlohmann::json::array({{{"name", "default"}, {"template", kLlama3Template}}})}};
    nlohmann::json patch = {{"added_tokens", nlohmann::json::array(
        {{{"id", 3}, {"content", "<|begin_of_text|>"}, {"special", true}},
         {{"id", 4}, {"content", "<|eot_id|>"}, {"special", true}}})}};
    Tokenizer tok = Tokenizer::from_json(tiny_tokenizer(patch), "llama/tokenizer.json", config.dump());
    QCOMPARE(tok.bos_id().value(), 3);
    QCOMPARE(tok.eos_id().value(), 4);
    QCOMPARE(tok.apply_chat_template({{"system", "You are helpful."}, {"user", "Hi"}, {"assistant", "Hello!"},
                                      {"user", "2+2?"}}, true),
             std::string("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
                         "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"
                         "<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n2+2?"
                         "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"));
    // Contents are trimmed (| trim).
    QCOMPARE(tok.apply_chat_template({{"user", " spaced \n"}}, false),
             std::string("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nspaced<|eot_id|>"));
  }

  void any_template_renders_and_broken_ones_fail_at_load() {
    // Before the Jinja interpreter this template was refused; now it is rendered as written.
    nlohmann::json config = {{"chat_template", "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}"}};
    Tokenizer tok = Tokenizer::from_json(tiny_tokenizer(), "m/tokenizer.json", config.dump());
    QCOMPARE(tok.apply_chat_template({{"user", "Hi"}}, true), std::string("[INST] Hi [/INST]"));
    // A template that does not parse is an error when the tokenizer loads, naming file and line:col.
    nlohmann::json broken = {{"chat_template", "{% for m in messages %}\n{{ m.content }"}};
    try {
      Tokenizer::from_json(tiny_tokenizer(), "m/tokenizer.json", broken.dump());
      QFAIL("expected an error");
    } catch (const grpo::Error& e) {
      QVERIFY2(std::string(e.what()).find("m/tokenizer_config.json: chat_template 2:") != std::string::npos, e.what());
    }
    // chat_template.jinja beside the config wins over the config's chat_template.
    Tokenizer jinja = Tokenizer::from_json(tiny_tokenizer(), "m/tokenizer.json", config.dump(),
                                           std::string("{{ messages[0].content | upper }}"));
    QCOMPARE(jinja.apply_chat_template({{"user", "Hi"}}, false), std::string("HI"));
    try {
      Tokenizer::from_json(tiny_tokenizer(), "m/tokenizer.json", config.dump(), std::string("{% if %}"));
      QFAIL("expected an error");
    } catch (const grpo::Error& e) {
      QVERIFY2(std::string(e.what()).find("m/chat_template.jinja 1:") != std::string::npos, e.what());
    }
    // The list form needs a "default" template, as transformers does.
    nlohmann::json named = {{"chat_template", nlohmann::json::array({{{"name", "tool_use"}, {"template", "x"}}})}};
    QVERIFY_THROWS_EXCEPTION(grpo::Error, Tokenizer::from_json(tiny_tokenizer(), "m/tokenizer.json", named.dump()));
    // No template at all: a clear error.
    QVERIFY_THROWS_EXCEPTION(grpo::Error, Tokenizer::from_json(tiny_tokenizer()).apply_chat_template({}, true));
  }

  void trl_prompt_rule() {
    // TRL's maybe_apply_chat_template: a prompt ending with a user turn gets the generation
    // prompt; one ending with an assistant turn is continued (cut after its content).
    Tokenizer tok = Tokenizer::load(qwen3_dir());
    const ChatTemplate* t = tok.chat();
    QVERIFY(t);
    nlohmann::ordered_json user = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hi"}}});
    QCOMPARE(t->render_prompt(user), std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    QCOMPARE(t->render_prompt(user, {{"enable_thinking", false}}),
             std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    nlohmann::ordered_json cont = user;
    cont.push_back({{"role", "assistant"}, {"content", "The answer is"}});
    QCOMPARE(t->render_prompt(cont),
             std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nThe answer is"));
    nlohmann::ordered_json sys = nlohmann::ordered_json::array({{{"role", "system"}, {"content", "S"}}});
    QVERIFY_THROWS_EXCEPTION(grpo::Error, t->render_prompt(sys));
    QVERIFY_THROWS_EXCEPTION(grpo::Error, t->render_prompt(user, {{"messages", 1}}));
  }

  void unsupported_components_name_the_json_path() {
    struct Case {
      nlohmann::json patch;
      std::string path, value;
    };
    std::vector<Case> cases = {
        {{{"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}}, {{"type", "UnicodeScripts"}}}}}}},
         "pre_tokenizer.pretokenizers[1].type", "UnicodeScripts"},
        {{{"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Precompiled"}}}}}}},
         "normalizer.normalizers[0].type", "Precompiled"},
        {{{"decoder", {{"type", "WordPiece"}}}}, "decoder.type", "WordPiece"},
        {{{"post_processor", {{"type", "Blah"}}}}, "post_processor.type", "Blah"},
        {{{"model", {{"type", "Unigram"}}}}, "model.type", "Unigram"},
        {{{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Merged"}}}},
         "pre_tokenizer.behavior", "Merged"},
    };
    for (const Case& c : cases) {
      std::string err = load_error(tiny_tokenizer(c.patch));
      QVERIFY2(err.find("tiny.json") != std::string::npos, err.c_str());
      QVERIFY2(err.find(c.path) != std::string::npos, err.c_str());
      QVERIFY2(err.find("\"" + c.value + "\"") != std::string::npos, err.c_str());
      QVERIFY2(err.find("supported") != std::string::npos, err.c_str());
    }
    QVERIFY(load_error(tiny_tokenizer()).empty());
    std::string bad_regex = load_error(tiny_tokenizer({{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}}}}));
    QVERIFY2(bad_regex.find("pre_tokenizer.pattern.Regex") != std::string::npos, bad_regex.c_str());
    std::string bad_merge = load_error(tiny_tokenizer({{"model", {{"merges", {"a c"}}}}}));
    QVERIFY2(bad_merge.find("model.merges[0]") != std::string::npos, bad_merge.c_str());
    QVERIFY(!load_error("{not json").empty());
  }

  void chat_command() {
    grpo::text::ChatCommandOptions opt;
    opt.tokenizer = qwen3_dir();
    std::istringstream in(
        "[{\"role\": \"user\", \"content\": \"Hi\"}]\n"
        "\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"add_generation_prompt\": true, "
        "\"kwargs\": {\"enable_thinking\": false}}\n"
        "{broken\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"extra\": 1}\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"kwargs\": {\"tools\": 5}}\n");
    std::ostringstream out;
    int errors = grpo::text::run_chat(opt, in, out);
    QCOMPARE(errors, 3);
    auto lines = QString::fromStdString(out.str()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 5);
    QCOMPARE(lines[0], QString("\"<|im_start|>user\\nHi<|im_end|>\\n\""));
    QCOMPARE(lines[1], QString("\"<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n\""));
    QVERIFY2(lines[2].startsWith("{\"error\":\"line 4: not valid JSON"), qPrintable(lines[2]));
    QVERIFY2(lines[3].contains("unknown key \\\"extra\\\""), qPrintable(lines[3]));
    // Qwen 3 iterates `tools`: an int is not iterable, which Jinja2 reports too.
    QVERIFY2(lines[4].contains("'int' object is not iterable"), qPrintable(lines[4]));
  }

  void tokenize_command() {
    grpo::text::TokenizeOptions opt;
    opt.tokenizer = qwen3_dir();
    std::istringstream in("Hello world\nHello, world!\n");
    std::ostringstream out;
    grpo::text::run_tokenize(opt, in, out);
    QCOMPARE(out.str(), std::string("[9707,1879]\n[9707,11,1879,0]\n"));

    opt.decode = true;
    std::istringstream ids("[9707,1879]\n[151644,9707,198]\n");
    std::ostringstream text;
    grpo::text::run_tokenize(opt, ids, text);
    QCOMPARE(text.str(), std::string("\"Hello world\"\n\"<|im_start|>Hello\\n\"\n"));
    opt.skip_special = true;
    std::istringstream ids2("[151644,9707,198]\n");
    std::ostringstream text2;
    grpo::text::run_tokenize(opt, ids2, text2);
    QCOMPARE(text2.str(), std::string("\"Hello\\n\"\n"));

    opt = {};
    opt.tokenizer = qwen3_dir();
    opt.chat = true;
    Tokenizer tok = Tokenizer::load(qwen3_dir());
    std::string expected =
        nlohmann::json(tok.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")).dump() + "\n";
    for (const char* input : {"[{\"role\": \"user\",\n  \"content\": \"Hi\"}]\n",
                              "[{\"role\":\"user\",\"content\":\"Hi\"}]\n[{\"role\":\"user\",\"content\":\"Hi\"}]\n"}) {
      std::istringstream chat_in(input);
      std::ostringstream chat_out;
      grpo::text::run_tokenize(opt, chat_in, chat_out);
      std::string got = chat_out.str();
      QCOMPARE(got.substr(0, expected.size()), expected);
      QVERIFY(got.starts_with("[151644,"));  // <|im_start|> matched as an added token
    }
    std::istringstream bad("[1, \"x\"]\n");
    std::ostringstream sink;
    opt.chat = false;
    opt.decode = true;
    QVERIFY_THROWS_EXCEPTION(grpo::Error, grpo::text::run_tokenize(opt, bad, sink));
  }
};

QTEST_GUILESS_MAIN(TestChatAndTools)
#include "test_chat_and_tools.moc"

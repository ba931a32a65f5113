// Real chat templates (tests/text/data/chat/templates/, sources in its README) rendered by our
// ChatTemplate and compared byte for byte with what Hugging Face's @huggingface/jinja renders
// (golden.json, made by make_chat_golden.mjs): every template with every conversation, with and
// without the generation prompt, with tools, tool calls and kwargs such as enable_thinking.
// A template that raises must raise here too, with the template's own message. The few cases
// where @huggingface/jinja departs from Jinja2 (which transformers runs) are listed in
// kPythonDiffers with the reason and what Jinja2 does, which is what we check there instead.
#include "tests/common/test_paths.h"
#include <QtTest/QtTest>

#include <ctime>
#include <map>
#include <regex>

#include "core/common/error.h"
#include "core/text/chat_template.h"
#include "tests/text/test_util.h"

using grpo::text::ChatTemplate;
using ojson = nlohmann::ordered_json;

namespace {

const std::string kDir = std::string(GRPO_TEXT_TEST_DATA) + "/chat";

ojson load(const std::string& name) { return ojson::parse(grpo::text::test::slurp(kDir + "/" + name)); }

// Llama 3.x templates print strftime_now("%d %b %Y") when no date_string is given: golden.json
// holds the day it was made, a render holds today. A render that differs from the golden text only
// there, and shows today's date (what transformers prints on the day it runs), is the same.
std::string today_dmy() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  return std::string(buf, std::strftime(buf, sizeof buf, "%d %b %Y", &tm));
}
std::string without_today(const std::string& text) {
  static const std::regex date(R"(Today Date: \d{2} [A-Z][a-z]{2} \d{4})");
  return std::regex_replace(text, date, "Today Date: <today>");
}

struct Difference {
  const char* why;
  const char* python_error;     // what Jinja2 raises (a substring), or nullptr when it renders
  const char* python_contains;  // when it renders: a part of Jinja2's text we check for
};

// (template, conversation) -> where @huggingface/jinja departs from Jinja2.
const std::map<std::pair<std::string, std::string>, Difference> kPythonDiffers = {
    {{"tiny-arith-chatml", "builtin_tools_call"},
     {"a message's content is a dict and the template does '...' + message['content']: @huggingface/jinja "
      "concatenates its JSON text, Python raises TypeError",
      "can only concatenate str (not \"dict\") to str", nullptr}},
    {{"llama-3.3-70b-instruct", "builtin_tools_call"},
     {"@huggingface/jinja has no `reject` filter with arguments (\"Unknown ArrayValue filter: reject\"); Jinja2 "
      "renders the builtin tools line and the <|python_tag|> call",
      nullptr, "Environment: ipython\nTools: brave_search, wolfram_alpha\n\nCutting Knowledge Date"}},
};

}  // namespace

class TestChatGolden : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void matches_huggingface_jinja() {
    const ojson templates = load("templates.json");
    const ojson golden = load("golden.json");
    std::map<std::string, ojson> conversations;
    for (const auto& c : load("conversations.json")) conversations[c["id"].get<std::string>()] = c;
    std::map<std::string, ChatTemplate> compiled;
    for (auto it = templates.begin(); it != templates.end(); ++it) {
      std::string source = grpo::text::test::slurp(kDir + "/" + it.value()["file"].get<std::string>());
      compiled.emplace(it.key(), ChatTemplate(source, it.key(), it.value()["variables"]));
    }
    int same = 0, raised_same = 0, differs = 0;
    std::vector<std::string> failures;
    std::map<std::string, int> per_template;
    for (const auto& c : golden["cases"]) {
      const std::string tname = c["template"], cname = c["conversation"];
      const ojson& conv = conversations.at(cname);
      ChatTemplate::Options o;
      o.add_generation_prompt = conv["add_generation_prompt"].get<bool>();
      if (conv.contains("kwargs")) o.kwargs = conv["kwargs"];
      std::string got, err;
      try {
        got = compiled.at(tname).render(conv["messages"], o);
      } catch (const grpo::Error& e) {
        err = e.message();
      }
      const std::string label = tname + " x " + cname;
      auto fail = [&](const std::string& what) { failures.push_back(label + ": " + what); };
      auto diff = kPythonDiffers.find({tname, cname});
      if (diff != kPythonDiffers.end()) {
        ++differs;
        if (diff->second.python_error && err.find(diff->second.python_error) == std::string::npos)
          fail(std::string("expected Jinja2's error '") + diff->second.python_error + "', got " + (err.empty() ? "output " + got : err));
        if (diff->second.python_contains && (!err.empty() || got.find(diff->second.python_contains) == std::string::npos))
          fail(std::string("expected Jinja2's text '") + diff->second.python_contains + "', got " + (err.empty() ? got : err));
        continue;
      }
      if (c.contains("output")) {
        if (!err.empty()) fail("raised " + err);
        else if (got != c["output"].get<std::string>() &&
                 (got.find("Today Date: " + today_dmy()) == std::string::npos ||
                  without_today(got) != without_today(c["output"].get<std::string>())))
          fail("rendered\n" + got + "\nexpected\n" + c["output"].get<std::string>());
        else ++same, ++per_template[tname];
      } else if (err.empty()) {
        fail("expected an error (" + c["error"].get<std::string>() + "), rendered " + got);
      } else if (c["raised_by_template"].get<bool>() && err != c["error"].get<std::string>()) {
        fail("raised '" + err + "', the template raises '" + c["error"].get<std::string>() + "'");
      } else {
        ++raised_same, ++per_template[tname];
      }
    }
    for (const auto& f : failures) qWarning("%s", f.c_str());
    QVERIFY2(failures.empty(), (std::to_string(failures.size()) + " cases differ").c_str());
    for (const auto& [t, n] : per_template) qInfo("%s: %d cases identical", t.c_str(), n);
    qInfo("%d renders and %d raises identical to @huggingface/jinja; %d known differences (Jinja2 semantics checked)",
          same, raised_same, differs);
  }
};

QTEST_GUILESS_MAIN(TestChatGolden)
#include "test_chat_golden.moc"

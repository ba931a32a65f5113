// Tests for datasets: JSONL and CSV parsing (messages, quoting, metadata), errors that name the
// file, line and field, reproducible shuffling, the data cursor, and the eval split.
#include <QtTest>

#include <fstream>
#include <set>

#include "tests/common/error_of.h"
#include "core/common/error.h"
#include "core/rollout/dataset.h"
#include "core/rollout/dataset_csv.h"
#include "core/rollout/dataset_sampler.h"

using namespace grpo::rollout;

namespace {

using grpo::testing::error_of;

#define QVERIFY_ERROR(expr, expected)                                                            \
  do {                                                                                           \
    std::string e_ = error_of([&] { (void)(expr); });                                            \
    QVERIFY2(e_.find(expected) != std::string::npos, (e_ + "  [expected: " + expected + "]").c_str()); \
  } while (0)

std::vector<Example> numbered(int n) {
  std::vector<Example> out;
  for (int i = 0; i < n; ++i) {
    Example ex;
    ex.prompt_text = std::string("p").append(std::to_string(i));
    ex.index = i;
    out.push_back(ex);
  }
  return out;
}

std::vector<int64_t> indices(const std::vector<Example>& v) {
  std::vector<int64_t> out;
  for (const auto& e : v) out.push_back(e.index);
  return out;
}

}  // namespace

class TestDatasets : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  std::string write(const char* name, const std::string& text) {
    std::string path = (dir_.path() + "/" + name).toStdString();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

private Q_SLOTS:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  // ---- JSONL ----
  void jsonlPromptsAnswersMetadata() {
    auto rows = parse_jsonl(
        "{\"prompt\": \"What is 2+2?\", \"answer\": \"4\", \"level\": 1, \"tags\": [\"easy\"]}\n"
        "\n"
        "{\"prompt\": \"Half of 9?\", \"answer\": 4.5}\r\n"
        "{\"prompt\": \"Sum?\", \"solution\": \"#### 10\", \"source\": \"gsm\"}\n"
        "{\"prompt\": \"Open\", \"answer\": null}",
        "train.jsonl");
    QCOMPARE(rows.size(), size_t(4));
    QCOMPARE(rows[0].prompt_text, std::string("What is 2+2?"));
    QCOMPARE(rows[0].answer, std::optional<std::string>("4"));
    QCOMPARE(rows[0].metadata, nlohmann::json({{"level", 1}, {"tags", {"easy"}}}));
    QVERIFY(!rows[0].messages);
    QCOMPARE(rows[1].answer, std::optional<std::string>("4.5"));  // numbers become text
    QCOMPARE(rows[2].answer, std::optional<std::string>("#### 10"));
    QCOMPARE(rows[2].metadata, nlohmann::json({{"source", "gsm"}}));
    QVERIFY(!rows[3].answer);
    QCOMPARE(rows[3].metadata, nlohmann::json::object());
    QCOMPARE(indices(rows), (std::vector<int64_t>{0, 1, 2, 3}));
  }
  void jsonlChatMessages() {
    auto rows = parse_jsonl(
        R"({"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}], "answer": "4"})" "\n"
        R"({"messages": [{"role": "user", "content": "3+3?"}], "answer": "6", "id": "q2"})",
        "chat.jsonl");
    QVERIFY(rows[0].messages.has_value());
    QCOMPARE(rows[0].messages->size(), size_t(2));
    QCOMPARE((*rows[0].messages)[1]["content"], nlohmann::json("2+2?"));
    QCOMPARE(rows[0].prompt_text, std::string("system: Be brief.\nuser: 2+2?"));
    QCOMPARE((*rows[1].messages)[0]["role"], nlohmann::json("user"));
    QCOMPARE(rows[1].metadata, nlohmann::json({{"id", "q2"}}));
  }

  // ---- CSV ----
  void csvQuotingAndMessages() {
    std::string text =
        "\xEF\xBB\xBFprompt,answer,note\r\n"
        "\"Add 1,000 and 234\",\"1,234\",plain\r\n"
        "\"Say \"\"hi\"\"\nthen stop\",hi,\"two\r\nlines\"\n"
        "Empty answer,,x\n"
        "\n";
    auto rows = parse_csv(text, "t.csv");
    QCOMPARE(rows.size(), size_t(3));
    QCOMPARE(rows[0].prompt_text, std::string("Add 1,000 and 234"));
    QCOMPARE(rows[0].answer, std::optional<std::string>("1,234"));
    QCOMPARE(rows[0].metadata, nlohmann::json({{"note", "plain"}}));
    QCOMPARE(rows[1].prompt_text, std::string("Say \"hi\"\nthen stop"));
    QCOMPARE(rows[1].metadata["note"], nlohmann::json("two\r\nlines"));
    QVERIFY(!rows[2].answer);  // an empty cell is no answer

    auto chat = parse_csv("messages,answer\n\"[{\"\"role\"\": \"\"user\"\", \"\"content\"\": \"\"1+1?\"\"}]\",2\n", "c.csv");
    QVERIFY(chat[0].messages.has_value());
    QCOMPARE((*chat[0].messages)[0]["content"], nlohmann::json("1+1?"));
    QCOMPARE(chat[0].prompt_text, std::string("user: 1+1?"));
  }
  void csvRecordLinesCountQuotedNewlines() {
    auto t = parse_csv_table("a,b\n\"x\ny\nz\",1\nq,2\n", "t.csv");
    QCOMPARE(t.records.size(), size_t(2));
    QCOMPARE(t.records[0].line, int64_t(2));
    QCOMPARE(t.records[1].line, int64_t(5));
    QCOMPARE(t.records[0].fields[0], std::string("x\ny\nz"));
    auto last = parse_csv_table("a,b\n1,\n", "t.csv");  // trailing empty field, no final newline needed
    QCOMPARE(last.records[0].fields, (std::vector<std::string>{"1", ""}));
  }

  // ---- errors name file, line and field ----
  void jsonlErrors() {
    QVERIFY_ERROR(parse_jsonl("{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n{\"prompt\": 7}\n", "data/train.jsonl"),
                  "data/train.jsonl:3: field \"prompt\": expected a string or a \"messages\" array, got number");
    QVERIFY_ERROR(parse_jsonl("{\"prompt\": \"a\"}\n{\"prompt\": \"b\",}\n", "d.jsonl"), "d.jsonl:2: invalid JSON");
    QVERIFY_ERROR(parse_jsonl("\n\n{\"question\": \"a\"}\n", "d.jsonl"), "d.jsonl:3: field \"prompt\": missing");
    QVERIFY_ERROR(parse_jsonl("[1, 2]\n", "d.jsonl"), "d.jsonl:1: expected a JSON object (one row), got array");
    QVERIFY_ERROR(parse_jsonl(R"({"prompt": "a", "answer": true})", "d.jsonl"),
                  "d.jsonl:1: field \"answer\": expected a string or a number, got boolean");
    QVERIFY_ERROR(parse_jsonl(R"({"prompt": "a", "solution": {"x": 1}})", "d.jsonl"), "d.jsonl:1: field \"solution\"");
    QVERIFY_ERROR(parse_jsonl(R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant"}]})", "d.jsonl"),
                  "d.jsonl:1: field \"messages[1].content\": missing");
    QVERIFY_ERROR(parse_jsonl(R"({"prompt": [{"role": 1, "content": "a"}]})", "d.jsonl"),
                  "d.jsonl:1: field \"prompt[0].role\": expected a string, got number");
    QVERIFY_ERROR(parse_jsonl(R"({"messages": []})", "d.jsonl"), "d.jsonl:1: field \"messages\": expected a non-empty array");
    QVERIFY_ERROR(parse_jsonl(R"({"prompt": "   "})", "d.jsonl"), "d.jsonl:1: field \"prompt\": empty");
    QVERIFY_ERROR(parse_jsonl("\n \n", "d.jsonl"), "d.jsonl: no rows");
  }
  void csvErrors() {
    QVERIFY_ERROR(parse_csv("prompt,answer\na,1\nb,2,3\n", "data/t.csv"), "data/t.csv:3: expected 2 fields (as in the header), got 3");
    QVERIFY_ERROR(parse_csv("prompt,answer\na,1\n\"never closed,2\n", "t.csv"), "t.csv:3: field \"prompt\": unterminated quoted field");
    QVERIFY_ERROR(parse_csv("prompt,answer\na,1\nb,say \"x\"\n", "t.csv"), "t.csv:3: field \"answer\": quote inside an unquoted field");
    QVERIFY_ERROR(parse_csv("prompt,answer\n\"a\"b,1\n", "t.csv"), "t.csv:2: field \"prompt\": text after the closing quote");
    QVERIFY_ERROR(parse_csv("messages,answer\nnot json,1\n", "t.csv"), "t.csv:2: field \"messages\": expected a JSON array");
    QVERIFY_ERROR(parse_csv("prompt,answer\n,1\n", "t.csv"), "t.csv:2: field \"prompt\": missing");
    QVERIFY_ERROR(parse_csv("prompt,prompt\na,b\n", "t.csv"), "t.csv:1: header: column \"prompt\" appears twice");
    QVERIFY_ERROR(parse_csv("prompt,\na,b\n", "t.csv"), "t.csv:1: header: column #2 has no name");
    QVERIFY_ERROR(parse_csv("", "t.csv"), "t.csv: empty CSV file");
    QVERIFY_ERROR(parse_csv("prompt,answer\n", "t.csv"), "t.csv: no rows");
  }
  void loadByExtensionAndMissingFile() {
    std::string jsonl = write("a.jsonl", "{\"prompt\": \"p\", \"answer\": \"1\"}\n");
    std::string csv = write("b.CSV", "prompt,answer\np,1\n");
    QCOMPARE(load_dataset(jsonl)[0].answer, std::optional<std::string>("1"));
    QCOMPARE(load_dataset(csv)[0].answer, std::optional<std::string>("1"));
    std::string bad = write("bad.jsonl", "{\"prompt\": \"ok\"}\n{\"prompt\": null}\n");
    QVERIFY_ERROR(load_dataset(bad), bad + ":2: field \"prompt\": missing");
    QVERIFY_THROWS_EXCEPTION(grpo::Error, load_dataset(jsonl + ".missing"));
  }

  // ---- shuffling ----
  void shuffledOrderIsAReproduciblePermutation() {
    auto a = shuffled_order(10, 42, 0);
    QCOMPARE(a, shuffled_order(10, 42, 0));
    QVERIFY(a != shuffled_order(10, 42, 1));
    QVERIFY(a != shuffled_order(10, 43, 0));
    auto sorted = a;
    std::sort(sorted.begin(), sorted.end());
    QCOMPARE(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    // Pinned: computed by an independent pure-Python mt19937_64 + the algorithm documented in
    // dataset_sampler.h, so the order is the same on every platform and compiler.
    QCOMPARE(a, (std::vector<int64_t>{2, 6, 1, 7, 3, 8, 4, 9, 5, 0}));
    QCOMPARE(shuffled_order(0, 1, 0).size(), size_t(0));
    QCOMPARE(shuffled_order(1, 1, 0), std::vector<int64_t>{0});
  }
  void boundedRandomIsUniformEnough() {
    std::mt19937_64 engine(7);
    std::vector<int> counts(6, 0);
    for (int i = 0; i < 60000; ++i) ++counts[bounded_random(engine, 6)];
    for (int c : counts) QVERIFY2(c > 9500 && c < 10500, qPrintable(QString::number(c)));
  }

  // ---- stream and cursor ----
  void streamVisitsEveryExampleEachEpoch() {
    DatasetStream s(numbered(7), 5);
    for (int epoch = 0; epoch < 3; ++epoch) {
      std::set<int64_t> seen;
      for (int i = 0; i < 7; ++i) seen.insert(s.next().index);
      QCOMPARE(seen.size(), size_t(7));
      QCOMPARE(s.epoch(), int64_t(epoch));
    }
    DatasetStream plain(numbered(3), 5, /*shuffle=*/false);
    QCOMPARE(indices(plain.next_batch(7)), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0}));
  }
  void cursorSaveRestoreContinuesExactly() {
    DatasetStream a(numbered(7), 99);
    a.next_batch(10);  // into epoch 1
    DataCursor saved = a.cursor();
    QCOMPARE(saved.epoch, int64_t(1));
    QCOMPARE(saved.position, int64_t(3));
    QCOMPARE(saved.seed, uint64_t(99));
    auto expected = indices(a.next_batch(12));

    DataCursor round_trip = DataCursor::from_json(nlohmann::json::parse(saved.to_json().dump()));
    QCOMPARE(round_trip, saved);
    DatasetStream b(numbered(7), 12345);  // the cursor's seed wins
    b.restore(round_trip);
    QCOMPARE(indices(b.next_batch(12)), expected);

    DatasetStream c(numbered(8), 99);
    QVERIFY_ERROR(c.restore(saved), "was saved for a dataset of 7 rows, this one has 8");
    QVERIFY_ERROR(DataCursor::from_json({{"seed", 1}, {"epoch", 0}, {"position", "x"}, {"size", 7}}),
                  "field \"position\": expected an integer");
    QVERIFY_ERROR(DataCursor::from_json({{"seed", 1}, {"epoch", 0}, {"size", 7}}), "field \"position\": missing");
    DataCursor out_of_range = saved;
    out_of_range.position = 8;
    QVERIFY_ERROR(b.restore(out_of_range), "out of range");
  }

  // ---- eval split ----
  void evalSplitIsDisjointAndDeterministic() {
    auto split = split_eval(numbered(100), {.eval_fraction = 0.1, .seed = 3});
    QCOMPARE(split.eval.size(), size_t(10));
    QCOMPARE(split.train.size(), size_t(90));
    std::set<int64_t> all;
    for (auto i : indices(split.train)) all.insert(i);
    for (auto i : indices(split.eval)) QVERIFY(all.insert(i).second);  // disjoint
    QCOMPARE(all.size(), size_t(100));                                 // covering
    QVERIFY(std::is_sorted(split.eval.begin(), split.eval.end(),
                           [](const Example& x, const Example& y) { return x.index < y.index; }));
    QCOMPARE(indices(split_eval(numbered(100), {.eval_fraction = 0.1, .seed = 3}).eval), indices(split.eval));
    QVERIFY(indices(split_eval(numbered(100), {.eval_fraction = 0.1, .seed = 4}).eval) != indices(split.eval));

    QCOMPARE(split_eval(numbered(10), {.eval_size = 4, .seed = 1}).eval.size(), size_t(4));
    QCOMPARE(split_eval(numbered(10), {.eval_fraction = 0.01}).eval.size(), size_t(1));  // at least one
    QCOMPARE(split_eval(numbered(10), {}).train.size(), size_t(10));                     // no split
    QVERIFY_ERROR(split_eval(numbered(10), {.eval_size = 10}), "leaving none to train on");
    QVERIFY_ERROR(split_eval(numbered(10), {.eval_fraction = 1.0}), "eval_fraction: must be in [0, 1)");
  }
};

QTEST_GUILESS_MAIN(TestDatasets)
#include "test_datasets.moc"

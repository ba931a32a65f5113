// RunFolder / RunDirectory / JsonlTail (core/records/run_dir.h), the one reader and writer of a run
// folder, and SHA-256 / SHA256SUMS (core/io/sha256sums.h):
// - names policy-v<N> and step-<S> round-trip; odd names (policy-vX, policy-v-1, temporaries,
//   files) are not listed;
// - a read-only open of a missing folder names the path and creates nothing, nor do readers or
//   `grpo status` of an existing run;
// - JSONL reading: a torn last line is never returned, malformed whole lines are skipped and
//   counted or refused naming file:line; the tail follows appends across a torn line and
//   restarts on a rewritten file; read_samples reads only the end;
// - bounded reads: an oversized or deeply nested config, a JSONL range past the read limit;
// - truncate_metrics keeps the lines with step <= S verbatim;
// - SHA-256 against FIPS 180-4 vectors and Qt's QCryptographicHash; SHA256SUMS written, verified,
//   tampering and malformed lines detected.
#include <QtTest>

#include <fcntl.h>
#include <unistd.h>

#include <QCryptographicHash>
#include <QTemporaryDir>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/common/files.h"
#include "core/common/json_fields.h"
#include "core/io/sha256sums.h"
#include "core/records/catalogue.h"
#include "core/records/charts.h"
#include "core/records/run_dir.h"
#include "core/records/model_card.h"
#include "core/records/run_status.h"
#include "../common/error_of.h"

namespace fs = std::filesystem;
using grpo::testing::error_of;
using namespace grpo::run;
using nlohmann::json;

namespace {

void append_raw(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

std::vector<int64_t> steps_of(const std::vector<json>& records) {
  std::vector<int64_t> out;
  for (const auto& r : records) out.push_back(r.value("step", int64_t(-1)));
  return out;
}

}  // namespace

class TestRunDir : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  std::string dir(const char* name) const { return tmp_.path().toStdString() + "/" + name; }

private Q_SLOTS:
  void names_round_trip_and_odd_ones_are_refused() {
    QCOMPARE(RunFolder::adapter_name(3), std::string("policy-v3"));
    QCOMPARE(RunFolder::checkpoint_name(12), std::string("step-12"));
    QCOMPARE(RunFolder::parse_adapter_name("policy-v3").value_or(-9), int64_t(3));
    QCOMPARE(RunFolder::parse_adapter_name("policy-v0").value_or(-9), int64_t(0));
    QCOMPARE(RunFolder::parse_checkpoint_name("step-40").value_or(-9), int64_t(40));
    for (const char* bad : {"policy-vX", "policy-v-1", "policy-v", "policy-v+1", "policy-v3x", " policy-v3",
                            "policy-v1234567890123456789", ".tmp-policy-v3-77", "step-3", "policy-v３"})
      QVERIFY2(!RunFolder::parse_adapter_name(bad), bad);
    for (const char* bad : {"step-", "step-x", "step--2", "step-2.5", "policy-v2", "step-1e3"})
      QVERIFY2(!RunFolder::parse_checkpoint_name(bad), bad);
  }

  void listings_skip_odd_names() {
    RunDirectory d(dir("listings"));
    for (const char* sub : {"policy-v1", "policy-v10", "policy-v2", "policy-vX", "policy-v-1", "policy-v",
                            ".tmp-policy-v3-123"})
      fs::create_directories(d.path(std::string("adapters/") + sub));
    grpo::write_file_atomic(d.path("adapters/policy-v7"), "a file, not a version");
    for (const char* sub : {"step-5", "step-20", "step-x", "step-", ".tmp-step-30-1"})
      fs::create_directories(d.path(std::string("checkpoints/") + sub));
    QCOMPARE(d.adapter_versions(), (std::vector<int64_t>{1, 2, 10}));
    QCOMPARE(d.checkpoint_steps(), (std::vector<int64_t>{5, 20}));
    QCOMPARE(d.adapter_dir(10), d.path("adapters/policy-v10"));
    QCOMPARE(d.checkpoint_dir(20), d.path("checkpoints/step-20"));
    d.remove_stale_temporaries();
    QVERIFY(!fs::exists(d.path("adapters/.tmp-policy-v3-123")));
    QVERIFY(!fs::exists(d.path("checkpoints/.tmp-step-30-1")));
  }

  void read_only_open_creates_nothing() {
    const std::string missing = dir("no-such-run");
    CHECK_ERROR_CONTAINS(error_of([&] { RunFolder::open_existing(missing); }), missing, "not a directory");
    QVERIFY(!fs::exists(missing));
    CHECK_ERROR_CONTAINS(error_of([&] { read_run_status(missing); }), missing, "not a directory");
    QVERIFY(!fs::exists(missing));
    // A plain view reads a missing folder as empty, and still creates nothing.
    const RunFolder view(missing);
    QVERIFY(view.read_metrics().empty());
    QVERIFY(view.read_events().empty());
    QVERIFY(view.read_samples(10).empty());
    QVERIFY(view.adapter_versions().empty());
    QVERIFY(view.checkpoint_steps().empty());
    QVERIFY(view.last_metrics().is_null());
    CHECK_ERROR_CONTAINS(error_of([&] { view.read_config(); }), missing + "/config.json", "not a run directory");
    QVERIFY(!fs::exists(missing));
    // A file is not a run folder either.
    grpo::write_file_atomic(dir("a-file"), "x");
    CHECK_ERROR_CONTAINS(error_of([&] { RunFolder::open_existing(dir("a-file")); }), "a-file", "not a directory");

    // `grpo status` of a run folder holding only its config creates no adapters/, checkpoints/, export/.
    const std::string bare = dir("bare-run");
    fs::create_directories(bare);
    grpo::write_file_atomic(bare + "/config.json", R"({"model_name_or_path":"m","max_steps":4})");
    append_raw(bare + "/metrics.jsonl", "{\"step\":1,\"reward\":0.5}\n{\"step\":2,\"reward\":0.75}\n{\"step\":3");
    const auto st = read_run_status(bare);
    QCOMPARE(st["step"].get<int64_t>(), int64_t(2));
    QCOMPARE(st["state"].get<std::string>(), std::string("created"));
    for (const char* sub : {"adapters", "checkpoints", "export"}) QVERIFY2(!fs::exists(bare + "/" + sub), sub);
  }

  // One derivation of a run's state from its events (docs/formats.md, "events.jsonl"): `grpo
  // status` said "running" for a run whose last control event was an error, while the browser
  // view said "failed", before both used run_state_after.
  void run_state_is_folded_from_the_events() {
    auto fold = [](const std::vector<json>& events) {
      std::string state = "created";
      for (const auto& e : events) state = run_state_after(state, e);
      return state;
    };
    QCOMPARE(fold({}), std::string("created"));
    QCOMPARE(fold({{{"event", "warning"}}}), std::string("running"));
    QCOMPARE(fold({{{"event", "start"}}, {{"event", "pause"}}}), std::string("paused"));
    QCOMPARE(fold({{{"event", "start"}}, {{"event", "pause"}}, {{"event", "resume"}}}), std::string("running"));
    QCOMPARE(fold({{{"event", "start"}}, {{"event", "stop"}}, {{"event", "retune"}}}), std::string("stopped"));
    QCOMPARE(fold({{{"event", "start"}}, {{"event", "finished"}}}), std::string("finished"));
    // Malformed events neither throw nor change a state.
    QCOMPARE(fold({{{"event", "start"}}, json(7), {{"event", 3}}, {{"event", nullptr}}}), std::string("running"));

    // `grpo status` (read_run_status) folds the events file the same way: a failed run says failed.
    RunDirectory d(dir("failed-run"));
    grpo::write_file_atomic(d.config_path(), R"({"model_name_or_path":"m","max_steps":4})");
    d.append_event({{"event", "start"}});
    d.append_event({{"event", "error"}, {"message", "the trainer ran out of memory"}});
    d.append_event({{"event", "warning"}, {"severity", "warning"}});
    const auto st = read_run_status(d.root());
    QCOMPARE(st["state"].get<std::string>(), std::string("failed"));
    QCOMPARE(st["last_event"]["message"].get<std::string>(), std::string("the trainer ran out of memory"));
  }

  // The model card shows what the run's config.json recorded and restates no default; a config
  // written by another tool, with keys missing or of the wrong type, still gives a card.
  // The catalogue (core/records/catalogue.h): the charts draw only catalogued metrics, a derived
  // metric is the one derived_metrics computes, and the marker rule both views follow.
  void catalogue_covers_the_charts_and_marks_events_by_one_rule() {
    for (const auto& c : chart_catalogue()) {
      for (const auto& l : c.lines) {
        const std::string name = l.suffix.empty() ? l.key : l.key + "accuracy" + l.suffix;
        QVERIFY2(find_metric(name), ("chart " + c.id + " draws an uncatalogued metric " + name).c_str());
        if (!l.band_std.empty()) QVERIFY2(find_metric(l.band_std), l.band_std.c_str());
      }
      QVERIFY2(!chart_help(c).empty(), c.id.c_str());
    }
    QVERIFY(find_metric("rewards/format/std") && !find_metric("rewards//std") && !find_metric("nope"));
    for (const auto& m : metric_catalogue()) {
      if (m.derived.empty()) continue;  // each derived metric comes out of derived_metrics
      const auto d = derived_metrics({{"batch/trained_tokens_per_step", 300}, {"perf/step_s", 2}});
      QVERIFY2(d.count(m.name), m.name.c_str());
    }
    QCOMPARE(find_metric("trained_tok_s")->derived, std::string("batch/trained_tokens_per_step / perf/step_s"));

    QVERIFY(event_is_marker(json{{"event", "pause"}, {"step", 3}}));
    QVERIFY(event_is_marker(json{{"event", "error"}, {"message", "x"}}));
    QVERIFY(!event_is_marker(json{{"event", "start"}, {"step", 0}}));
    QVERIFY(!event_is_marker(json{{"event", "worker_left"}}));  // a warning without advice: listed, not marked
    QVERIFY(event_is_marker(json{{"event", "worker_left"}, {"advice", "Start another worker."}}));
    QVERIFY(event_is_marker(json{{"event", "reward_timeout_cleared"}}));
    QVERIFY(!event_is_marker(json{{"event", "_cleared"}}));
    for (const json& odd : {json(nullptr), json("pause"), json{{"event", 3}}, json::array({1}), json{{"step", 1}}}) {
      QVERIFY(!event_is_marker(odd));
      QCOMPARE(event_label(odd), std::string("?"));
    }
    QCOMPARE(event_severity(json{{"event", "bucket_write_failed"}}), std::string("error"));
    QCOMPARE(event_severity(json{{"event", "worker_left"}, {"severity", "error"}}), std::string("error"));
    QCOMPARE(event_severity(json{{"event", "worker_quarantined_cleared"}, {"severity", "error"}}), std::string("cleared"));
    QCOMPARE(event_severity(json{{"event", "someone_elses"}}), std::string("info"));
    QCOMPARE(event_label(json{{"event", "worker_quarantined"}}), std::string("worker quarantined"));
    QCOMPARE(event_label(json{{"event", "someone_elses"}}), std::string("someone_elses"));
    QCOMPARE(event_marker_step(json{{"event", "retune"}, {"step", 2}, {"applied_at_step", 3}}), 3.0);
    QCOMPARE(event_marker_step(json{{"event", "retune"}, {"step", 2}}), 2.0);
    QCOMPARE(event_marker_step(json{{"event", "pause"}, {"step", 5}, {"applied_at_step", 9}}), 5.0);
    QVERIFY(std::isnan(event_marker_step(json{{"event", "pause"}, {"step", "5"}})));
    // The served form carries what the browser needs to apply the same rule.
    const json served = event_catalogue_json();
    QCOMPARE(served["fault_field"], json("advice"));
    QCOMPARE(served["cleared_suffix"], json("_cleared"));
    QCOMPARE(served["kinds"].size(), event_catalogue().size());
    QCOMPARE(metric_catalogue_json().size(), metric_catalogue().size());
  }

  // Typed lookups in JSON from outside (core/common/json_fields.h) never throw: a mistyped or
  // absent key is the fallback. read_run_status reads a hand-edited config.json through them.
  void outside_json_is_read_by_typed_lookups_that_never_throw() {
    const json j = {{"s", "x"}, {"i", 7}, {"big", 18446744073709551615ull}, {"f", 1e3}, {"half", 1.5},
                    {"b", true}, {"n", nullptr}, {"nan", NAN}};
    QCOMPARE(grpo::json_string(j, "s"), std::string("x"));
    QCOMPARE(grpo::json_string(j, "i", "?"), std::string("?"));
    QCOMPARE(grpo::json_integer(j, "i"), int64_t(7));
    QCOMPARE(grpo::json_integer(j, "f"), int64_t(1000));
    QCOMPARE(grpo::json_integer(j, "half", -1), int64_t(-1));
    QCOMPARE(grpo::json_integer(j, "big", -1), int64_t(-1));  // past int64
    QCOMPARE(grpo::json_integer(j, "s", -1), int64_t(-1));
    QCOMPARE(grpo::json_integer(j, "absent", 3), int64_t(3));
    QCOMPARE(grpo::json_number(j, "half", 0), 1.5);
    QCOMPARE(grpo::json_number(j, "n", 2), 2.0);
    QCOMPARE(grpo::json_bool(j, "b", false), true);
    QCOMPARE(grpo::json_bool(j, "i", false), false);
    QVERIFY(grpo::json_field(json::array({1}), "s") == nullptr && grpo::json_field(json("s"), "s") == nullptr);
    QCOMPARE(grpo::json_integer(json(nullptr), "i", 5), int64_t(5));

    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    grpo::write_file_atomic(dir + "/" + RunFolder::kConfigFile, R"({"model_name_or_path": 5, "max_steps": "ten"})");
    const json st = read_run_status(dir);
    QCOMPARE(st["model"], json(""));
    QCOMPARE(st["max_steps"], json(0));
    QCOMPARE(st["state"], json("created"));
  }

  void model_card_shows_what_the_config_recorded() {
    ModelCardInput in;
    in.base_model = "org/base";
    in.source = "policy-v2 of run r";
    in.dtype = "F32";
    in.run_config = {{"r", "eight"}, {"use_rslora", "yes"}, {"task", "arith"}, {"task_difficulty", "hard"},
                     {"reward_funcs", json::array({json{{"name", 5}}, "accuracy"})}, {"reward_weights", "x"}};
    std::string card = model_card(in);  // a throw (before: nlohmann's type_error on "r") fails the test
    QVERIFY2(card.find("learning_rate not recorded (not recorded)") != std::string::npos, card.c_str());
    QVERIFY2(card.find("| LoRA | r eight,") != std::string::npos, card.c_str());
    QVERIFY2(card.find("rsLoRA") == std::string::npos, card.c_str());  // "yes" is not true
    QVERIFY2(card.find("difficulty hard") != std::string::npos, card.c_str());
    QVERIFY2(card.find("`?`, `accuracy`") != std::string::npos, card.c_str());
    QVERIFY2(card.find("--max-lora-rank <the adapter's r") != std::string::npos, card.c_str());

    QVERIFY2(card.find("num_iterations") == std::string::npos, card.c_str());  // one step per batch: not said

    in.run_config = {{"r", 16}, {"use_rslora", true}, {"learning_rate", 1e-5}, {"lr_scheduler_type", "cosine"},
                     {"num_iterations", 2}};
    card = model_card(in);
    QVERIFY2(card.find("; 2 optimizer steps per batch (num_iterations)") != std::string::npos, card.c_str());
    QVERIFY2(card.find("--max-lora-rank 16`") != std::string::npos, card.c_str());
    QVERIFY2(card.find(", rsLoRA") != std::string::npos, card.c_str());
    QVERIFY2(card.find("learning_rate 1e-05 (cosine)") != std::string::npos, card.c_str());

    // What the Hub reads from the front matter: the relation to the base, the Hub dataset the run
    // trained on, and the final eval accuracy as a model-index result.
    in.run_config = {{"dataset_name", "openai/gsm8k"}, {"task", 7}};
    in.metrics.final_eval_accuracy = 0.5;
    in.metrics.steps = 40;
    card = model_card(in);
    const std::string front = card.substr(0, card.find("\n---\n") + 5);
    QVERIFY2(front.rfind("---\nbase_model: \"org/base\"\nlibrary_name: peft\npipeline_tag: text-generation\n"
                         "base_model_relation: adapter\n", 0) == 0, front.c_str());
    QVERIFY2(front.find("\ndatasets:\n- \"openai/gsm8k\"\n") != std::string::npos, front.c_str());
    QVERIFY2(front.find("model-index:\n- name: \"base-grpo-lora\"\n  results:\n  - task:\n      type: text-generation\n"
                        "      name: Text Generation\n    dataset:\n      name: \"openai/gsm8k\"\n      type: \"openai/gsm8k\"\n"
                        "    metrics:\n    - type: accuracy\n      value: 0.5000\n") != std::string::npos, front.c_str());
    QVERIFY2(card.find("---\n\n# base GRPO LoRA adapter\n") != std::string::npos, card.c_str());
    // A local file or folder is no Hub dataset: no link; a merged model is a fine-tune of its base.
    for (const char* local : {"data/train.jsonl", "./prompts", "/abs/path", "a/b/c", "x\ny"}) {
      in.run_config = {{"dataset_name", local}};
      card = model_card(in);
      QVERIFY2(card.find("\ndatasets:") == std::string::npos, local);
    }
    in.merged = true;
    QVERIFY(model_card(in).find("\nbase_model_relation: finetune\n") != std::string::npos);
  }

  void jsonl_readers_skip_or_refuse_malformed_lines() {
    RunDirectory d(dir("malformed"));
    d.append_metrics({{"step", 1}});
    append_raw(d.metrics_path(), "not json\n\n[1,2]\n");
    d.append_metrics({{"step", 2}});
    append_raw(d.metrics_path(), "{\"step\":3,\"loss\":");  // torn: being appended
    int64_t malformed = -1;
    QCOMPARE(steps_of(d.read_metrics(Malformed::Skip, &malformed)), (std::vector<int64_t>{1, 2}));
    QCOMPARE(malformed, int64_t(2));
    CHECK_ERROR_CONTAINS(error_of([&] { d.read_metrics(Malformed::Refuse); }), d.metrics_path() + ":2",
                         "expected one JSON object per line");
    QCOMPARE(steps_of(d.metrics_since(1)), (std::vector<int64_t>{2}));
    QCOMPARE(d.last_metrics()["step"].get<int64_t>(), int64_t(2));
    // Line numbers count blank lines; the torn line starts at next_offset.
    const auto chunk = RunFolder::read_jsonl(d.metrics_path());
    QCOMPARE(chunk.lines.size(), size_t(4));
    QCOMPARE(chunk.lines[2].number, int64_t(4));
    QCOMPARE(chunk.lines[3].number, int64_t(5));
    QCOMPARE(chunk.next_line, int64_t(6));
    QCOMPARE(chunk.next_offset, uint64_t(fs::file_size(d.metrics_path()) - std::string("{\"step\":3,\"loss\":").size()));
    // An end offset cuts like a shorter file: only whole lines before it.
    QCOMPARE(RunFolder::read_jsonl(d.metrics_path(), 0, 5).lines.size(), size_t(0));
    QCOMPARE(RunFolder::read_jsonl(d.metrics_path(), 0, 13).lines.size(), size_t(1));
    // A line nested deeper than the JSON limit is malformed, not a stack overflow later.
    append_raw(d.events_path(), std::string(1000, '[') + std::string(1000, ']') + "\n");
    d.append_event({{"event", "start"}});
    QCOMPARE(d.read_events(Malformed::Skip, &malformed).size(), size_t(1));
    QCOMPARE(malformed, int64_t(1));
  }

  void tail_follows_appends_across_a_torn_line() {
    RunDirectory d(dir("tail"));
    d.append_event({{"event", "old"}});
    JsonlTail from_start(d.events_path());
    JsonlTail from_now = d.follow_events();
    QCOMPARE(from_start.read_new().size(), size_t(1));
    QVERIFY(from_now.read_new().empty());
    d.append_event({{"event", "a"}});
    d.append_event({{"event", "b"}});
    append_raw(d.events_path(), "{\"event\":\"c\",");  // torn
    auto got = from_now.read_new_records();
    QCOMPARE(got.size(), size_t(2));
    QCOMPARE(got[1]["event"].get<std::string>(), std::string("b"));
    const uint64_t at = from_now.offset();
    QVERIFY(from_now.read_new().empty());  // the torn line waits
    QCOMPARE(from_now.offset(), at);
    append_raw(d.events_path(), "\"step\":4}\n");  // ... until its newline
    got = from_now.read_new_records();
    QCOMPARE(got.size(), size_t(1));
    QCOMPARE(got[0]["step"].get<int64_t>(), int64_t(4));
    append_raw(d.events_path(), "garbage\n");
    const auto lines = from_now.read_new();
    QCOMPARE(lines.size(), size_t(1));
    QVERIFY(!lines[0].well_formed());
    QCOMPARE(from_now.malformed(), int64_t(1));
    QCOMPARE(from_start.read_new().size(), size_t(4));  // a, b, c, garbage
    // A file rewritten shorter (truncate_metrics on resume) is followed from its start again.
    grpo::write_file_atomic(d.events_path(), "{\"event\":\"new\"}\n");
    got = from_start.read_new_records();
    QCOMPARE(got.size(), size_t(1));
    QCOMPARE(got[0]["event"].get<std::string>(), std::string("new"));
    // A tail of a file that does not exist yet reads it once it appears.
    JsonlTail later(d.samples_path());
    QVERIFY(later.read_new().empty());
    d.append_sample({{"step", 1}});
    QCOMPARE(later.read_new().size(), size_t(1));
  }

  void read_samples_reads_the_last_rows() {
    RunDirectory d(dir("samples"));
    for (int i = 1; i <= 3000; ++i) d.append_sample({{"step", i}, {"completion", std::string(500, 'x')}});
    append_raw(d.samples_path(), "{\"step\":3001");  // torn
    const auto last = d.read_samples(5);
    QCOMPARE(steps_of(last), (std::vector<int64_t>{2996, 2997, 2998, 2999, 3000}));
    const auto all = d.read_samples(100000);  // more than the file has: all of it (1.5 MB, several windows)
    QCOMPARE(all.size(), size_t(3000));
    QCOMPARE(all.front()["step"].get<int64_t>(), int64_t(1));
    QVERIFY(d.read_samples(0).empty());
  }

  // A sample record through the file and back: the total and each reward function's own score,
  // a None score as null; a record from before "rewards" existed reads with none.
  void sample_records_round_trip() {
    RunDirectory d(dir("sample-records"));
    SampleRecord s;
    s.step = 7;
    s.policy_version = 3;
    s.group = 12;
    s.prompt = "2+2=";
    s.completion = "4";
    s.answer = "4";
    s.finish_reason = "stop";
    s.reward = 1.5;
    s.advantage = -0.25;
    s.rewards = {{"accuracy", 1.0}, {"format", NAN}};
    d.append_sample(sample_to_json(s));
    d.append_sample({{"step", 8}, {"reward", nullptr}, {"prompt", 5}});  // old and odd
    const auto rows = d.read_samples(10);
    QCOMPARE(rows.size(), size_t(2));
    QVERIFY(rows[0]["rewards"]["format"].is_null());
    const SampleRecord back = sample_from_json(rows[0]);
    QCOMPARE(back.step, int64_t(7));
    QCOMPARE(back.policy_version, int64_t(3));
    QCOMPARE(back.group, int64_t(12));
    QCOMPARE(back.prompt, s.prompt);
    QCOMPARE(back.completion, s.completion);
    QCOMPARE(back.answer, s.answer);
    QCOMPARE(back.finish_reason, s.finish_reason);
    QCOMPARE(back.reward, 1.5);
    QCOMPARE(back.advantage, -0.25);
    QCOMPARE(back.rewards.size(), size_t(2));
    QCOMPARE(back.rewards[0].first, std::string("accuracy"));
    QCOMPARE(back.rewards[0].second, 1.0);
    QCOMPARE(back.rewards[1].first, std::string("format"));
    QVERIFY(std::isnan(back.rewards[1].second));
    const SampleRecord old = sample_from_json(rows[1]);
    QCOMPARE(old.step, int64_t(8));
    QVERIFY(std::isnan(old.reward));
    QVERIFY(old.prompt.empty() && old.rewards.empty());
  }

  void reads_are_bounded() {
    RunDirectory d(dir("bounded"));
    // Config: missing, oversized, too deep, not an object.
    CHECK_ERROR_CONTAINS(error_of([&] { d.read_config(); }), d.config_path(), "missing");
    {
      std::ofstream out(d.config_path(), std::ios::binary);
      out << "{\"pad\":\"" << std::string(RunFolder::kMaxConfigBytes, 'x') << "\"}";
    }
    CHECK_ERROR_CONTAINS(error_of([&] { d.read_config(); }), d.config_path(), "exceeds the limit");
    grpo::write_file_atomic(d.config_path(), std::string(200, '[') + std::string(200, ']'));
    CHECK_ERROR_CONTAINS(error_of([&] { d.read_config(); }), d.config_path(), "deeper");
    grpo::write_file_atomic(d.config_path(), "[1]");
    CHECK_ERROR_CONTAINS(error_of([&] { d.read_config(); }), d.config_path(), "expected a JSON object");
    d.write_config({{"r", 8}});
    QCOMPARE(d.read_config()["r"].get<int>(), 8);
    // A JSONL range past the read limit is refused before it is read (a sparse file: no disk used).
    const std::string huge = d.path("huge.jsonl");
    const int fd = ::open(huge.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    QVERIFY(fd >= 0);
    QCOMPARE(::ftruncate(fd, static_cast<off_t>(RunFolder::kMaxJsonlReadBytes + 1)), 0);
    ::close(fd);
    CHECK_ERROR_CONTAINS(error_of([&] { RunFolder::read_jsonl(huge); }), huge, "exceeds the limit");
    QCOMPARE(RunFolder::read_jsonl(huge, RunFolder::kMaxJsonlReadBytes - 10).lines.size(), size_t(0));
    fs::remove(huge);
  }

  void truncate_metrics_keeps_steps_up_to_the_checkpoint() {
    RunDirectory d(dir("truncate"));
    QCOMPARE(d.truncate_metrics(3), int64_t(0));  // no file: nothing to do
    QVERIFY(!d.has_file(RunFolder::kMetricsFile));
    for (int i = 1; i <= 5; ++i) d.append_metrics({{"step", i}, {"loss", 0.5 / i}});
    append_raw(d.metrics_path(), "{\"nostep\":1}\ngarbage\n{\"step\":6");
    const std::string before = grpo::read_file(d.metrics_path());
    QCOMPARE(d.truncate_metrics(3), int64_t(3));
    const std::string after = grpo::read_file(d.metrics_path());
    QCOMPARE(after, before.substr(0, after.size()));  // the kept lines verbatim, in order
    QCOMPARE(steps_of(d.read_metrics()), (std::vector<int64_t>{1, 2, 3}));
  }

  void sha256_matches_fips_vectors_and_qt() {
    QCOMPARE(grpo::io::sha256_hex(""), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    QCOMPARE(grpo::io::sha256_hex("abc"), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    QCOMPARE(grpo::io::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
             std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    QCOMPARE(grpo::io::sha256_hex(std::string(1000000, 'a')),
             std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    std::mt19937 rng(7);
    for (size_t n : {1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4097}) {
      std::string data(n, '\0');
      for (auto& c : data) c = static_cast<char>(rng());
      const std::string qt = QCryptographicHash::hash(QByteArray(data.data(), static_cast<int>(n)), QCryptographicHash::Sha256)
                                 .toHex()
                                 .toStdString();
      QCOMPARE(grpo::io::sha256_hex(data), qt);
      grpo::io::Sha256 pieces;  // fed in uneven pieces
      for (size_t i = 0; i < n; i += 7) pieces.update(std::string_view(data).substr(i, 7));
      QCOMPARE(pieces.hex(), qt);
    }
  }

  void sha256sums_written_and_verified() {
    const std::string d = dir("sums");
    fs::create_directories(d);
    grpo::write_file_atomic(d + "/b.bin", "bee");
    grpo::write_file_atomic(d + "/a.json", "{}");
    grpo::write_file_atomic(d + "/SHA256SUMS", grpo::io::sha256sums(d));
    QCOMPARE(grpo::read_file(d + "/SHA256SUMS"), grpo::io::sha256_hex("{}") + "  a.json\n" + grpo::io::sha256_hex("bee") + "  b.bin\n");
    QVERIFY(verify_sha256sums(d).empty());
    QCOMPARE(grpo::io::sha256_file(d + "/b.bin"), grpo::io::sha256_hex("bee"));
    grpo::write_file_atomic(d + "/b.bin", "wasp");
    QCOMPARE(verify_sha256sums(d), (std::vector<std::string>{"b.bin"}));
    fs::remove(d + "/a.json");
    QCOMPARE(verify_sha256sums(d), (std::vector<std::string>{"a.json", "b.bin"}));
    fs::remove(d + "/SHA256SUMS");
    QCOMPARE(verify_sha256sums(d), (std::vector<std::string>{"SHA256SUMS"}));
    // Binary-mode lines and upper-case digits parse; anything else names the line.
    const std::string h = grpo::io::sha256_hex("x");
    auto entries = grpo::io::parse_sha256sums(QByteArray::fromStdString(h).toUpper().toStdString() + " *x.bin\n\n", "S");
    QCOMPARE(entries.size(), size_t(1));
    QCOMPARE(entries[0].hex, h);
    QCOMPARE(entries[0].name, std::string("x.bin"));
    CHECK_ERROR_CONTAINS(error_of([&] { grpo::io::parse_sha256sums(h + "  ok\nnonsense\n", "S"); }), "S:2", "malformed line");
    CHECK_ERROR_CONTAINS(error_of([&] { grpo::io::parse_sha256sums(h + "  ../etc/passwd\n", "S"); }), "S:1", "not a plain name");
    CHECK_ERROR_CONTAINS(error_of([&] { grpo::io::sha256_file(d + "/nope"); }), d + "/nope", "cannot read");
  }

  void publish_adapter_writes_verified_versions() {
    RunDirectory d(dir("publish"));
    for (int64_t v = 1; v <= 4; ++v)
      d.publish_adapter(v, [](const std::string& tmp) { grpo::write_file_atomic(tmp + "/adapter_model.safetensors", "w"); },
                        RunDirectory::keep_versions(1));
    QCOMPARE(d.adapter_versions(), (std::vector<int64_t>{2, 3, 4}));
    QVERIFY(verify_sha256sums(d.adapter_dir(4)).empty());
    CHECK_ERROR_CONTAINS(error_of([&] { d.publish_adapter(4, [](const std::string&) {}, 3); }), "policy-v4",
                         "already published");
  }
};

QTEST_GUILESS_MAIN(TestRunDir)
#include "test_run_dir.moc"

// push_to_hub while a run trains (core/run/hub_pusher.h), against the loopback stand-in of the
// Hub (tests/hub/hub_standin.h, which checks every request as the Hub's API would): the pushes of
// each hub_strategy and what lands in the repo, byte for byte; a push held unanswered while the
// trainer goes on to its last step (the hold is released only there, so a trainer that waited on
// the push could not finish); failed pushes as events with advice, retried, the run going on; a
// run that could never push refused at its start. No timing dependence: the stand-in forces each
// condition and the test waits only for conditions, each wait bounded.
#include "tests/common/test_paths.h"

#include <QDirIterator>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/run/engine.h"
#include "core/run/export.h"
#include "tests/common/error_of.h"
#include "tests/engine/engine_test_util.h"
#include "tests/hub/hub_standin.h"

using engine_test::events_named;
using engine_test::tiny_config;
using grpo::testing::error_of;
using hub_test::HubStandIn;
using json = nlohmann::json;

namespace {

const char* kToken = "hf_train_push_token_0123456789";
const char* kRepo = "grpo-test/tiny-run";

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string file_text(const hub_test::Repo& r, const std::string& path) {
  for (const auto& f : r.files)
    if (f.path.toStdString() == path) return f.content.toStdString();
  return "<absent: " + path + ">";
}

std::vector<std::string> repo_paths(const hub_test::Repo& r) {
  std::vector<std::string> out;
  for (const auto& f : r.files) out.push_back(f.path.toStdString());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> commit_summaries(const HubStandIn& hub) {
  std::vector<std::string> out;
  for (const auto& c : hub.upload_stats().commit_log) out.push_back(c.summary.toStdString());
  return out;
}

// Every byte under `dir` in one string: to look for the token anywhere in a run folder.
std::string all_bytes_under(const std::string& dir) {
  std::string out;
  QDirIterator it(QString::fromStdString(dir), QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
  while (it.hasNext()) out += grpo::read_file(it.next().toStdString());
  return out;
}

}  // namespace

class TestEngineHubPush : public QObject {
  Q_OBJECT
  HubStandIn hub_;
  QTemporaryDir home_;
  QTemporaryDir tmp_;
  int n_ = 0;

  std::string fresh_run() { return tmp_.path().toStdString() + "/run" + std::to_string(++n_); }

  grpo::grpo::TrainConfig push_config(const std::string& run_dir, const std::string& strategy, const std::string& repo) {
    auto c = tiny_config(run_dir);
    c.apply({{"push_to_hub", true}, {"hub_model_id", repo}, {"hub_strategy", strategy}}, "test");
    c.validate("test");
    return c;
  }
  static grpo::run::EngineOptions quick_retries() {
    grpo::run::EngineOptions o;
    o.hub_retry_base_ms = 1;  // the backoff is exercised, not waited for
    return o;
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(home_.isValid() && tmp_.isValid());
    qputenv("HF_ENDPOINT", QByteArray::fromStdString(hub_.url()));
    qputenv("HF_TOKEN", kToken);
    qputenv("HF_HOME", home_.path().toUtf8());  // no token file of this machine's user is read
    hub_.set_upload_token(kToken);
  }
  void init() {
    hub_.clear_faults();
    hub_.reset_upload_stats();
  }

  // hub_strategy checkpoint: the adapter and its card at the root at each save (the first save
  // always: nothing runs yet), the checkpoint as last-checkpoint/, the final adapter at the end,
  // waited for; the repo's files are what `grpo export` writes from the run, byte for byte.
  void checkpoint_strategy_pushes_saves_and_the_final_adapter() {
    const std::string run = fresh_run();
    const std::string repo = std::string(kRepo) + "-ckpt";
    std::string adapter;
    {
      grpo::run::Engine engine(push_config(run, "checkpoint", repo), run, quick_retries());
      adapter = engine.run();
    }
    const auto pushed = events_named(run, "hub_pushed");
    const auto failures = events_named(run, "hub_push_failed");
    QVERIFY2(failures.empty(), failures.empty() ? "" : failures[0].dump().c_str());
    QVERIFY(pushed.size() >= 2);
    QCOMPARE(pushed.front()["push_step"].get<int64_t>(), int64_t(2));
    QCOMPARE(pushed.front()["checkpoint_path"].get<std::string>(), std::string("last-checkpoint"));
    QCOMPARE(pushed.back()["what"].get<std::string>(), std::string("the final adapter"));
    QVERIFY(!pushed.back().contains("checkpoint_path"));
    const auto finished = events_named(run, "finished");
    QCOMPARE(finished.size(), size_t(1));
    QCOMPARE(finished[0]["hub_pushed"], json(true));
    // The final push was waited for: its event comes before "finished".
    QVERIFY(pushed.back()["seq"].get<int64_t>() < finished[0]["seq"].get<int64_t>());

    const auto stats = hub_.upload_stats();
    QVERIFY2(stats.violations.empty(), stats.violations.empty() ? "" : stats.violations[0].constData());
    QCOMPARE(stats.created, 1);
    const auto summaries = commit_summaries(hub_);
    QVERIFY(std::find(summaries.begin(), summaries.end(), "Training in progress, step 2") != summaries.end());
    QVERIFY(std::find(summaries.begin(), summaries.end(), "Training in progress, step 2, checkpoint") != summaries.end());
    QCOMPARE(summaries.back(), std::string("End of training"));

    // The repo's root is the export of the final adapter; last-checkpoint/ a whole checkpoint.
    const hub_test::Repo r = hub_.repo(std::string("models/") + repo);
    const std::string exported = tmp_.path().toStdString() + "/export" + std::to_string(++n_);
    grpo::run::ExportOptions eo;
    eo.run_dir = run;
    eo.source_dir = grpo::path_join(run, "adapter");
    eo.out_dir = exported;
    grpo::run::export_run(eo);
    for (const char* f : {"adapter_config.json", "adapter_model.safetensors", "README.md"})
      QVERIFY2(file_text(r, f) == grpo::read_file(grpo::path_join(exported, f)), f);
    QVERIFY(has(file_text(r, "README.md"), "library_name: peft"));
    const auto paths = repo_paths(r);
    for (const char* f : {"last-checkpoint/adapter_model.safetensors", "last-checkpoint/adapter_config.json",
                          "last-checkpoint/optimizer.pt", "last-checkpoint/state.json", "last-checkpoint/SHA256SUMS"})
      QVERIFY2(std::find(paths.begin(), paths.end(), f) != paths.end(), f);
    // The checkpoint pushed last is the newest one pushed, and its weights are that checkpoint's.
    int64_t last_ckpt = 0;
    for (const auto& e : pushed)
      if (e.contains("checkpoint_path")) last_ckpt = std::max(last_ckpt, e["push_step"].get<int64_t>());
    const std::string ckpt_dir = grpo::path_join(run, "checkpoints/step-" + std::to_string(last_ckpt));
    QCOMPARE(file_text(r, "last-checkpoint/adapter_model.safetensors"),
             grpo::read_file(grpo::path_join(ckpt_dir, "adapter_model.safetensors")));
    // The staging folder is gone, and the token is nowhere in the run folder.
    QVERIFY(!grpo::file_exists(grpo::path_join(run, "hub-push")));
    QVERIFY(!has(all_bytes_under(run), kToken));
  }

  // A push that hangs never stalls a step: the first save's commit is held by the stand-in; the
  // test lets the trainer past step 2 only once the commit is held, and releases it only after the
  // last step, so every step from 2 on ran while that push waited. The saves meanwhile are skipped
  // (hub_always_push: false), and the end waits for the held push, then pushes the final adapter.
  void a_hanging_push_never_stalls_a_step() {
    const std::string run = fresh_run();
    auto cfg = push_config(run, "every_save", std::string(kRepo) + "-slow");
    cfg.apply({{"save_steps", 1}}, "test");
    hub_.hold_next("commit", 1);
    bool held_at_step2 = false, held_at_last = false;
    {
      grpo::run::Engine engine(cfg, run, quick_retries());
      engine.run([&](const grpo::run::StepReport& r) {
        if (r.step == 2) {
          for (int i = 0; i < 12000 && hub_.held_count() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          held_at_step2 = hub_.held_count() == 1;
        }
        if (r.step == r.max_steps) {
          held_at_last = hub_.held_count() == 1;
          hub_.release_held();
        }
      });
    }
    QVERIFY2(held_at_step2, "the first push never reached its commit");
    QVERIFY2(held_at_last, "the held commit was answered before the last step");
    const auto metrics = engine_test::read_jsonl(run + "/metrics.jsonl");
    QCOMPARE(metrics.size(), size_t(6));
    // Saves 2..6 came while step 1's push waited: each skipped, with the reason.
    const auto skipped = events_named(run, "hub_push_skipped");
    QCOMPARE(skipped.size(), size_t(5));
    for (size_t i = 0; i < skipped.size(); ++i) {
      QCOMPARE(skipped[i]["push_step"].get<int64_t>(), int64_t(i + 2));
      QVERIFY(has(skipped[i]["reason"].get<std::string>(), "previous push still runs"));
    }
    const auto pushed = events_named(run, "hub_pushed");
    QCOMPARE(pushed.size(), size_t(2));
    QCOMPARE(pushed[0]["push_step"].get<int64_t>(), int64_t(1));
    QCOMPARE(pushed[1]["what"].get<std::string>(), std::string("the final adapter"));
    QVERIFY(events_named(run, "hub_push_failed").empty());
    QCOMPARE(commit_summaries(hub_), (std::vector<std::string>{"Training in progress, step 1", "End of training"}));
  }

  // A commit answered 500 (the client does not repeat a commit on its own: it may have been
  // applied) fails that try; the push is tried again after the backoff and lands. The event says
  // what failed, that it will be retried, and what to do.
  void a_failed_push_is_an_event_and_is_retried() {
    const std::string run = fresh_run();
    hub_.fail_next("commit", 1, 500);
    {
      grpo::run::Engine engine(push_config(run, "end", std::string(kRepo) + "-retry"), run, quick_retries());
      engine.run();
    }
    const auto failed = events_named(run, "hub_push_failed");
    QCOMPARE(failed.size(), size_t(1));
    QCOMPARE(failed[0]["attempt"].get<int>(), 1);
    QCOMPARE(failed[0]["will_retry"], json(true));
    QVERIFY(has(failed[0]["message"].get<std::string>(), "500"));
    QVERIFY(!failed[0]["advice"].get<std::string>().empty());
    const auto pushed = events_named(run, "hub_pushed");
    QCOMPARE(pushed.size(), size_t(1));  // end: nothing while training
    QCOMPARE(pushed[0]["attempt"].get<int>(), 2);
    QCOMPARE(events_named(run, "hub_push_started").size(), size_t(1));
    QCOMPARE(events_named(run, "hub_push_failed_cleared").size(), size_t(1));
    QCOMPARE(commit_summaries(hub_), std::vector<std::string>{"End of training"});
  }

  // A token the Hub refuses: every try fails (401), the final failure is an error event whose
  // advice names the token and the command that pushes the adapter by hand; the run still
  // finishes with its adapter on disk, and the token is in no event and no file of the run.
  void a_refused_token_fails_the_push_not_the_run() {
    const std::string run = fresh_run();
    hub_.set_upload_token("hf_another_token_the_hub_expects");
    std::string adapter;
    {
      grpo::run::Engine engine(push_config(run, "end", std::string(kRepo) + "-denied"), run, quick_retries());
      adapter = engine.run();
    }
    hub_.set_upload_token(kToken);
    const auto failed = events_named(run, "hub_push_failed");
    QCOMPARE(failed.size(), size_t(3));
    QCOMPARE(failed.back()["severity"].get<std::string>(), std::string("error"));
    QCOMPARE(failed.back()["will_retry"], json(false));
    QVERIFY2(has(failed.back()["message"].get<std::string>(), "401"), failed.back().dump().c_str());
    const std::string advice = failed.back()["advice"].get<std::string>();
    QVERIFY2(has(advice, "HF_TOKEN") && has(advice, "grpo push"), advice.c_str());
    QVERIFY(events_named(run, "hub_pushed").empty());
    const auto finished = events_named(run, "finished");
    QCOMPARE(finished.size(), size_t(1));
    QCOMPARE(finished[0]["hub_pushed"], json(false));
    QVERIFY(grpo::file_exists(grpo::path_join(run, "adapter/adapter_model.safetensors")));
    QVERIFY(!has(all_bytes_under(run), kToken));
    QVERIFY(hub_.upload_stats().commits == 0);
  }

  // A run that could never push is refused before it trains: no token, a repo id without a
  // namespace or with characters the Hub refuses, push_to_hub without hub_model_id.
  void a_run_that_cannot_push_is_refused_at_its_start() {
    auto c = tiny_config(fresh_run());
    c.apply({{"push_to_hub", true}}, "test");
    QVERIFY(has(error_of([&] { c.validate("run.yaml"); }), "key \"hub_model_id\" is empty while push_to_hub is true"));
    c.apply({{"hub_model_id", "no-namespace"}}, "test");
    QVERIFY(has(error_of([&] { c.validate("run.yaml"); }), "expected namespace/name"));
    QVERIFY(has(error_of([&] { c.apply({{"hub_strategy", "sometimes"}}, "run.yaml"); }), "hub_strategy"));

    const std::string bad_id = fresh_run();
    auto bad = tiny_config(bad_id);
    bad.apply({{"push_to_hub", true}, {"hub_model_id", "org/bad name"}}, "test");
    QVERIFY(has(error_of([&] { grpo::run::Engine e(bad, bad_id); }), "hub_model_id"));

    const std::string run = fresh_run();
    qunsetenv("HF_TOKEN");
    const std::string err = error_of([&] { grpo::run::Engine e(push_config(run, "every_save", kRepo), run); });
    qputenv("HF_TOKEN", kToken);
    QVERIFY2(has(err, "no Hub token"), err.c_str());
    QVERIFY(!grpo::file_exists(run + "/metrics.jsonl"));
  }
};

QTEST_GUILESS_MAIN(TestEngineHubPush)
#include "test_engine_hub_push.moc"

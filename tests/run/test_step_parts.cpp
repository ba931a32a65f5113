// The parts of one GRPO step that the async engine and the synchronous loop share
// (core/run/step_assembler, step_logger, throughput_advisor): scoring groups against
// compute_advantages itself, the step's reward statistics by hand (TRL's names and semantics),
// the records the logger writes and in which order, and the bottleneck verdict's boundaries.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/grpo/advantages.h"
#include "core/grpo/config.h"
#include "core/records/run_dir.h"
#include "core/records/step_logger.h"
#include "core/records/throughput_advisor.h"
#include "core/run/policy.h"
#include "core/run/step_assembler.h"

namespace fs = std::filesystem;
using grpo::run::ScoredGroup;

namespace {

const std::string kModel = std::string(GRPO_RESOURCES) + "/models/tiny-arith";

grpo::rollout::Completion completion(std::vector<int64_t> ids, const std::string& finish = "stop") {
  grpo::rollout::Completion c;
  c.logprobs.assign(ids.size(), -0.5f);
  c.token_ids = std::move(ids);
  c.finish_reason = finish;
  return c;
}

// A scored group by hand: rewards per sample (NaN = unscorable), one reward function "acc".
ScoredGroup group(int64_t id, const std::vector<double>& rewards, int64_t version = 0) {
  ScoredGroup g;
  g.group_id = id;
  g.example.prompt_text = "p" + std::to_string(id);
  g.example.answer = "a" + std::to_string(id);
  g.prompt_ids = {1, 2, 3};
  g.result.policy_version = version;
  g.function_names = {"acc"};
  g.per_function.assign(1, {});
  double mean = 0, n = 0;
  for (double r : rewards)
    if (!std::isnan(r)) { mean += r; n += 1; }
  mean = n > 0 ? mean / n : 0;
  double var = 0;
  for (double r : rewards)
    if (!std::isnan(r)) var += (r - mean) * (r - mean);
  g.reward_std = n > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  for (size_t i = 0; i < rewards.size(); ++i) {
    g.result.completions.push_back(completion({10, 11, static_cast<int64_t>(i)}));
    g.texts.push_back("t" + std::to_string(i));
    g.rewards.push_back(rewards[i]);
    g.advantages.push_back(std::isnan(rewards[i]) ? 0.0 : rewards[i] - mean);
    g.per_function[0].push_back(rewards[i]);
  }
  return g;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  for (auto& l : grpo::split(grpo::read_file(path), '\n'))
    if (!l.empty()) out.push_back(l);
  return out;
}

}  // namespace

class TestStepParts : public QObject {
  Q_OBJECT

private Q_SLOTS:
  // Rewards and advantages of score_groups are compute_advantages' on the same rewards, for a
  // group scored alone (the engine) and for groups scored together with "batch" scaling (sync).
  void scoreGroupsMatchesComputeAdvantages() {
    grpo::grpo::TrainConfig cfg;
    cfg.model_name_or_path = kModel;
    auto policy = grpo::run::load_policy(cfg, /*with_lora=*/false);
    auto ids = [&](const std::string& s) {
      auto v = policy.tokenizer->encode(s);
      return std::vector<int64_t>(v.begin(), v.end());
    };
    auto rewards = grpo::rollout::RewardSet::from_json(nlohmann::json::array({{{"name", "accuracy"}}}));
    std::vector<ScoredGroup> groups(2);
    const std::vector<std::vector<std::string>> texts = {{"7", "7", "3", "x"}, {"1", "2", "2", "2"}};
    const std::vector<std::string> answers = {"7", "2"};
    for (size_t k = 0; k < 2; ++k) {
      groups[k].group_id = static_cast<int64_t>(k);
      groups[k].example.answer = answers[k];
      for (const auto& t : texts[k]) groups[k].result.completions.push_back(completion(ids(t)));
    }
    for (auto scale : {grpo::grpo::ScaleRewards::Group, grpo::grpo::ScaleRewards::Batch}) {
      grpo::run::score_groups(policy, rewards, scale, {&groups[0], &groups[1]});
      // The same rewards through compute_advantages directly.
      std::vector<double> flat;
      for (const auto& g : groups) flat.insert(flat.end(), g.per_function[0].begin(), g.per_function[0].end());
      auto per_func = torch::tensor(flat, torch::kFloat64).reshape({1, 8});
      auto ref = grpo::grpo::compute_advantages(per_func, {}, 4, scale);
      for (int k = 0; k < 2; ++k) {
        QCOMPARE(groups[k].texts.size(), size_t(4));
        QCOMPARE(groups[k].function_names, std::vector<std::string>{"accuracy"});
        QVERIFY(std::abs(groups[k].reward_std - ref.group_std[k].item<double>()) < 1e-12);
        for (int b = 0; b < 4; ++b) {
          QVERIFY(std::abs(groups[k].rewards[b] - ref.rewards[k * 4 + b].item<double>()) < 1e-12);
          QVERIFY(std::abs(groups[k].advantages[b] - ref.advantages[k * 4 + b].item<double>()) < 1e-12);
        }
      }
      QCOMPARE(groups[0].rewards[0], 1.0);  // "7" against "7"
      QCOMPARE(groups[0].rewards[2], 0.0);
    }
    // A group of the wrong size is refused, naming it.
    groups[1].result.completions.pop_back();
    bool threw = false;
    try {
      grpo::run::score_groups(policy, rewards, grpo::grpo::ScaleRewards::Group, {&groups[0], &groups[1]});
    } catch (const grpo::Error& e) {
      threw = std::string(e.what()).find("group 1 has 3 completions") != std::string::npos;
    }
    QVERIFY(threw);
  }

  // The step's statistics by hand: reward over trained samples, reward_std the mean of the groups'
  // std, frac_reward_zero_std over groups, unscorable over every completion, per-function
  // mean and std, and at most max_traces traces.
  void assembleStepStatistics() {
    auto g0 = group(0, {1, 0, 1, 0}, 3);
    auto g1 = group(1, {1, 1, 1, NAN}, 2);
    g1.result.completions[1].token_ids.clear();  // nothing to train on: not a sample
    auto step = grpo::run::assemble_step(7, {&g0, &g1}, 5);
    QCOMPARE(step.samples.size(), size_t(7));
    QCOMPARE(step.samples[4].policy_version, int64_t(2));
    QCOMPARE(step.samples[0].advantage, 0.5);
    QCOMPARE(step.samples[0].prompt_ids, (std::vector<int64_t>{1, 2, 3}));
    QVERIFY(!step.samples[0].truncated);
    // reward: trained samples with a reward: 1,0,1,0 and 1,1 (the NaN ignored) -> 4/6.
    QVERIFY(std::abs(step.metrics.at("reward") - 4.0 / 6.0) < 1e-12);
    const double sd0 = std::sqrt(1.0 / 3.0);  // unbiased std of 1,0,1,0
    QVERIFY(std::abs(step.metrics.at("reward_std") - (sd0 + 0.0) / 2) < 1e-12);
    QCOMPARE(step.metrics.at("frac_reward_zero_std"), 0.5);
    QCOMPARE(step.metrics.at("sample/unscorable_frac"), 1.0 / 8.0);
    QVERIFY(std::abs(step.metrics.at("rewards/acc/mean") - 4.0 / 6.0) < 1e-12);
    // std of 1,0,1,0,1,1 (unbiased).
    const double m = 4.0 / 6.0;
    const double sd = std::sqrt((4 * (1 - m) * (1 - m) + 2 * m * m) / 5.0);
    QVERIFY(std::abs(step.metrics.at("rewards/acc/std") - sd) < 1e-12);
    QCOMPARE(step.traces.size(), size_t(5));
    QCOMPARE(step.traces[0].step, int64_t(7));
    QCOMPARE(step.traces[4].group, int64_t(1));
    QCOMPARE(step.traces[4].answer, std::string("a1"));
  }

  // The logger writes the samples, then the metrics line; NaN metrics are null; every write goes
  // through the guard, named; the TensorBoard file appears beside them.
  void stepLoggerRecords() {
    const auto dir = fs::temp_directory_path() / ("grpo_step_logger_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    grpo::run::RunDirectory run(dir.string());
    std::vector<std::string> guarded;
    grpo::run::StepLogger logger(run, [&](const std::string& what, const std::function<void()>& write) {
      guarded.push_back(what);
      write();
    });
    grpo::run::StepReport r;
    r.step = 3;
    r.policy_version = 2;
    r.verdict = "balanced";
    r.metrics = {{"loss", 0.25}, {"eval/accuracy", NAN}};
    r.samples.push_back({3, 1, 0, "p", "c", "a", "stop", NAN, 0.0});
    r.samples.push_back({3, 1, 0, "p", "d", "a", "length", 1.0, 0.5});
    logger.log(r);
    QCOMPARE(guarded, (std::vector<std::string>{grpo::run::RunDirectory::kSamplesFile, grpo::run::RunDirectory::kSamplesFile,
                                                grpo::run::RunDirectory::kMetricsFile}));
    auto samples = lines_of(run.samples_path());
    QCOMPARE(samples.size(), size_t(2));
    auto s0 = nlohmann::json::parse(samples[0]);
    QVERIFY(s0.at("reward").is_null());
    QCOMPARE(s0.at("completion").get<std::string>(), std::string("c"));
    QCOMPARE(nlohmann::json::parse(samples[1]).at("finish_reason").get<std::string>(), std::string("length"));
    auto metrics = lines_of(run.metrics_path());
    QCOMPARE(metrics.size(), size_t(1));
    auto rec = nlohmann::json::parse(metrics[0]);
    QCOMPARE(rec.at("step").get<int64_t>(), int64_t(3));
    QCOMPARE(rec.at("policy_version").get<int64_t>(), int64_t(2));
    QCOMPARE(rec.at("verdict").get<std::string>(), std::string("balanced"));
    QCOMPARE(rec.at("loss").get<double>(), 0.25);
    QVERIFY(rec.at("eval/accuracy").is_null());
    QVERIFY(rec.at("time").get<double>() > 1.7e9);
    bool tfevents = false;
    for (const auto& e : fs::directory_iterator(dir))
      tfevents |= e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
    QVERIFY(tfevents);
    // The sync loop records no verdict.
    r.verdict.clear();
    QVERIFY(!grpo::run::StepLogger::metrics_record(r).contains("verdict"));
    fs::remove_all(dir);
  }

  void throughputVerdict() {
    using grpo::run::throughput_verdict;
    QCOMPARE(throughput_verdict({{"trainer_idle_frac", 0.01}, {"generation_idle_frac", 0.5}}, 0.1).verdict,
             std::string("trainer-bound"));
    QCOMPARE(throughput_verdict({{"trainer_idle_frac", 0.01}, {"generation_idle_frac", 0.0}}, 0.9).verdict,
             std::string("trainer-bound"));
    QCOMPARE(throughput_verdict({{"trainer_idle_frac", 0.5}, {"generation_idle_frac", 0.01}}, 0.0).verdict,
             std::string("generation-bound"));
    QCOMPARE(throughput_verdict({{"trainer_idle_frac", 0.1}, {"generation_idle_frac", 0.1}}, 0.5).verdict,
             std::string("balanced"));
    QVERIFY(throughput_verdict({}, 0).advice.find("keep pace") != std::string::npos);
  }

  // MFU: the step's model FLOPs over compute time and over wall time, against the peak.
  void mfuFromTheStepsFlops() {
    std::map<std::string, double> m = {{"perf/train_flops", 2e9}, {"perf/fwd_bwd_s", 0.5}, {"perf/step_s", 2.0}};
    grpo::run::add_mfu(m, 1e10);
    QCOMPARE(m.at("perf/mfu_fwd_bwd"), 0.4);
    QCOMPARE(m.at("perf/mfu_wall_clock"), 0.1);
    // A figure missing or zero adds nothing rather than an infinity or a NaN.
    std::map<std::string, double> no_step = {{"perf/train_flops", 2e9}, {"perf/fwd_bwd_s", 0.5}};
    grpo::run::add_mfu(no_step, 1e10);
    QVERIFY(no_step.count("perf/mfu_fwd_bwd") && !no_step.count("perf/mfu_wall_clock"));
    std::map<std::string, double> no_peak = {{"perf/train_flops", 2e9}, {"perf/fwd_bwd_s", 0.5}, {"perf/step_s", 2.0}};
    grpo::run::add_mfu(no_peak, 0);
    QVERIFY(!no_peak.count("perf/mfu_fwd_bwd") && !no_peak.count("perf/mfu_wall_clock"));
  }

  // The advisor's window: fractions of the window's length from the counters' differences.
  void throughputAdvisorWindow() {
    const auto before = std::chrono::steady_clock::now();  // the window opens after this
    grpo::run::ThroughputAdvisor advisor;
    grpo::run::PipelineCounters c;
    c.sources = 2;
    c.queue_capacity = 4;
    std::map<std::string, double> m = {{"perf/rollout_wait_s", 0.0}, {"sample/rollout_queue_size", 4.0}};
    QTest::qSleep(50);
    c.tokens_generated = 1000;
    c.score_block_s = 1e6;  // far more than the window: clamped to 1
    auto v = advisor.close_window(m, c);
    // At least the 50 ms slept, at most what a clock started before the window saw: bounds that
    // hold however loaded the machine is.
    const double outside = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
    QVERIFY2(m.at("perf/step_s") >= 0.045 && m.at("perf/step_s") <= outside, std::to_string(m.at("perf/step_s")).c_str());
    QVERIFY(std::abs(m.at("rollout/generated_tok_s") - 1000 / m.at("perf/step_s")) < 1e-6);
    QCOMPARE(m.at("generation_idle_frac"), 1.0);
    QCOMPARE(m.at("scorer_idle_frac"), 0.0);
    QCOMPARE(m.at("trainer_idle_frac"), 0.0);
    QCOMPARE(v.verdict, std::string("trainer-bound"));  // a full queue, a busy trainer
    // The next window counts only what happened since.
    std::map<std::string, double> m2 = {{"perf/rollout_wait_s", 0.0}};
    advisor.close_window(m2, c);
    QCOMPARE(m2.at("rollout/generated_tok_s"), 0.0);
    QCOMPARE(m2.at("generation_idle_frac"), 0.0);
  }
};

QTEST_GUILESS_MAIN(TestStepParts)
#include "test_step_parts.moc"

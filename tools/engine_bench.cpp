#include "tools/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/common/timing.h"
#include "tools/forward_bench.h"
#include "core/grpo/config.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "core/records/run_dir.h"
#include "core/run/engine.h"
#include "core/run/sync_trainer.h"

namespace fs = std::filesystem;

namespace grpo::run {
namespace {

using Clock = std::chrono::steady_clock;

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "grpo-bench-XXXXXX").string();
    check(::mkdtemp(tmpl.data()) != nullptr, tmpl, "cannot create a temporary directory");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

std::string write_bench_model(const std::string& model_dir, const std::string& size, const std::string& out) {
  auto cfg = model::bench_model_config(size);
  auto base = io::ModelConfig::load(path_join(model_dir, "config.json"));
  cfg.vocab_size = base.vocab_size;  // the tokenizer's vocabulary
  cfg.bos_token_id = base.bos_token_id;
  cfg.eos_token_ids = base.eos_token_ids;
  torch::manual_seed(0);
  model::CausalLM m{model::CausalLMOptions(cfg)};
  model::save_pretrained(*m, out);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    if (file_exists(path_join(model_dir, f))) fs::copy_file(path_join(model_dir, f), path_join(out, f));
  return out;
}

namespace {

// The model to benchmark: the given directory, or a random model of `size` that keeps the
// directory's tokenizer (written into `scratch`).
std::string prepare_model(const std::string& model_dir, const std::string& size, const std::string& scratch) {
  check(!model_dir.empty(), "bench", "no model directory", "pass --model DIR (a model with a tokenizer)");
  if (size.empty()) return model_dir;
  return write_bench_model(model_dir, size, path_join(scratch, "model-" + size));
}

grpo::TrainConfig bench_config(const std::string& model, const AsyncBenchOptions& o, const std::string& out) {
  grpo::TrainConfig c;
  c.apply({{"model_name_or_path", model}, {"task", "arith"}, {"task_difficulty", 1}, {"seed", 1},
           {"num_generations", 8}, {"prompts_per_step", 8}, {"max_completion_length", o.max_completion_length},
           {"max_prompt_length", 64}, {"learning_rate", 1e-3}, {"r", 8}, {"lora_alpha", 16},
           {"token_budget", 4096}, {"max_steps", o.steps}, {"eval_steps", 0}, {"save_steps", 0},
           {"max_staleness", 2}, {"queue_maxsize", 128}},
          "bench");
  c.output_dir = out;
  c.validate("bench");
  return c;
}

nlohmann::json sum_metrics(const std::string& run_dir, const std::vector<std::string>& keys) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& k : keys) out[k] = 0.0;
  for (const auto& j : RunFolder(run_dir).read_metrics(Malformed::Refuse)) {
    for (const auto& k : keys)
      if (j.contains(k) && j[k].is_number()) out[k] = out[k].get<double>() + j[k].get<double>();
  }
  return out;
}

// A run that stopped early would make its side look fast: both sides must train every step.
void require_all_steps(const std::string& run_dir, int64_t steps, const std::string& side) {
  int64_t last = 0;
  for (const auto& j : RunFolder(run_dir).read_metrics(Malformed::Refuse))
    if (j.contains("step") && j["step"].is_number_integer()) last = std::max<int64_t>(last, j["step"].get<int64_t>());
  check(last == steps, "bench async",
        "the " + side + " run stopped at step " + std::to_string(last) + " of " + std::to_string(steps) +
            ", so its wall time means nothing",
        std::string("see its ") + RunFolder::kEventsFile + " (run the same config with grpo train" +
            (side == "sync" ? " --sync" : "") + ")");
}

}  // namespace

nlohmann::json bench_async(const AsyncBenchOptions& o) {
  TempDir tmp;
  const std::string model = prepare_model(o.model_dir, o.size, tmp.path);
  nlohmann::json r = {{"model", o.size.empty() ? model : "generated-" + o.size}, {"steps", o.steps},
                      {"generators", o.generators}, {"max_completion_length", o.max_completion_length}};
  // Sync: the trainer idles while generating; generation idles while training.
  {
    const std::string dir = path_join(tmp.path, "sync");
    auto cfg = bench_config(model, o, dir);
    const auto t0 = Clock::now();
    SyncTrainer trainer(cfg, dir);
    const auto t_run = Clock::now();
    trainer.run();
    const double wall = seconds_since(t_run);
    require_all_steps(dir, o.steps, "sync");
    auto s = sum_metrics(dir, {"perf/generate_s", "perf/fwd_bwd_s", "perf/optimizer_s", "rollout/score_s"});
    r["sync_wall_s"] = wall;
    r["sync_setup_s"] = std::chrono::duration<double>(t_run - t0).count();
    r["sync_trainer_idle_frac"] = (s["perf/generate_s"].get<double>() + s["rollout/score_s"].get<double>()) / wall;
    r["sync_generation_idle_frac"] = (s["perf/fwd_bwd_s"].get<double>() + s["perf/optimizer_s"].get<double>()) / wall;
  }
  {
    const std::string dir = path_join(tmp.path, "async");
    auto cfg = bench_config(model, o, dir);
    EngineOptions eo;
    eo.local_generators = o.generators;
    Engine engine(cfg, dir, eo);
    const auto t_run = Clock::now();
    engine.run();
    const double wall = seconds_since(t_run);
    require_all_steps(dir, o.steps, "async");
    auto s = sum_metrics(dir, {"perf/rollout_wait_s", "perf/step_s", "rollout/backpressure_s", "generation_idle_frac",
                               "sample/staleness_mean", "sample/dropped_stale_total"});
    r["async_wall_s"] = wall;
    r["async_trainer_idle_frac"] = s["perf/rollout_wait_s"].get<double>() / std::max(1e-9, s["perf/step_s"].get<double>());
    r["async_generation_idle_frac"] = s["generation_idle_frac"].get<double>() / static_cast<double>(o.steps);
    r["async_staleness_mean"] = s["sample/staleness_mean"].get<double>() / static_cast<double>(o.steps);
    r["async_dropped_stale_total"] = s["sample/dropped_stale_total"];
  }
  r["speedup"] = r["sync_wall_s"].get<double>() / r["async_wall_s"].get<double>();
  return r;
}

nlohmann::json learn_profile(const std::vector<nlohmann::json>& metrics, int64_t last_step, double wall_s) {
  static const std::vector<std::pair<const char*, const char*>> kPhases = {
      {"forward + backward", "perf/fwd_bwd_s"}, {"optimizer", "perf/optimizer_s"},
      {"waiting for rollouts", "perf/rollout_wait_s"}, {"publishing the adapter", "perf/weight_sync_s"},
      {"eval", "perf/eval_s"}};
  std::vector<double> sums(kPhases.size(), 0.0);
  double samples = 0;
  int64_t steps = 0;
  for (const auto& m : metrics) {
    if (!m.is_object() || !m.contains("step") || !m["step"].is_number_integer() || m["step"].get<int64_t>() > last_step)
      continue;
    ++steps;
    auto number = [&](const char* key) {
      const auto it = m.find(key);
      return it != m.end() && it->is_number() && std::isfinite(it->get<double>()) ? it->get<double>() : 0.0;
    };
    for (size_t i = 0; i < kPhases.size(); ++i) sums[i] += number(kPhases[i].second);
    // Samples generated: a batch trained num_iterations times counts once (on its first pass).
    if (number("batch/reuse_pass") == 0.0) samples += number("batch/samples_per_step");
  }
  nlohmann::json phases = nlohmann::json::array();
  double accounted = 0;
  auto share = [&](double s) { return wall_s > 0 ? s / wall_s : 0.0; };
  for (size_t i = 0; i < kPhases.size(); ++i) {
    phases.push_back({{"phase", kPhases[i].first}, {"seconds", sums[i]}, {"share", share(sums[i])}});
    accounted += sums[i];
  }
  const double other = wall_s - accounted;
  phases.push_back({{"phase", "other"}, {"seconds", other}, {"share", share(other)}});
  return {{"wall_s", wall_s}, {"steps", steps}, {"samples", samples}, {"phases", phases}};
}

std::string learn_profile_table(const nlohmann::json& profile) {
  std::string out = "| phase | seconds | share of wall |\n|---|---|---|\n";
  char buf[160];
  for (const auto& p : profile.at("phases")) {
    std::snprintf(buf, sizeof buf, "| %s | %.1f | %.1f%% |\n", p.at("phase").get<std::string>().c_str(),
                  p.at("seconds").get<double>(), 100.0 * p.at("share").get<double>());
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "| wall (%lld steps, %.0f samples) | %.1f | 100%% |\n",
                static_cast<long long>(profile.at("steps").get<int64_t>()), profile.at("samples").get<double>(),
                profile.at("wall_s").get<double>());
  return out + buf;
}

namespace {

// One run, with seed (the option's, or the preset's) + `offset`.
nlohmann::json learn_once(const LearnBenchOptions& o, int64_t offset) {
  TempDir tmp;
  auto j = grpo::load_config_file(o.preset);
  const std::string model = j.value("model_name_or_path", std::string());  // relative: to resources/
  if (model.empty() || model.front() != '/') j["model_name_or_path"] = path_join(o.resources, model);
  grpo::TrainConfig cfg;
  cfg.apply(j, o.preset);
  if (o.max_steps > 0) cfg.max_steps = o.max_steps;
  if (o.eval_steps > 0) cfg.eval_steps = o.eval_steps;
  // Only the run's own randomness changes: the data (problems, eval set, order) stays the preset's.
  cfg.data_seed = cfg.resolved_data_seed();
  cfg.seed = (o.seed >= 0 ? o.seed : cfg.seed) + offset;
  check(cfg.eval_steps > 0, o.preset, "eval_steps must be > 0 to time learning");
  cfg.output_dir = path_join(tmp.path, "run");
  cfg.validate(o.preset);
  Engine engine(cfg, cfg.output_dir);
  const double base = engine.evaluate();
  nlohmann::json curve = nlohmann::json::array();
  nlohmann::json reached = nullptr;
  double final_acc = base;
  int64_t steps = 0, reached_step = 0;
  const auto t0 = Clock::now();
  engine.run([&](const StepReport& r) {
    steps = r.step;
    auto it = r.metrics.find("eval/accuracy");
    if (it == r.metrics.end()) return;
    final_acc = it->second;
    curve.push_back({r.step, seconds_since(t0), it->second});
    if (it->second >= o.target && reached.is_null()) {
      reached = seconds_since(t0);
      reached_step = r.step;
      engine.stop();
    }
  });
  const double wall = reached.is_null() ? seconds_since(t0) : reached.get<double>();
  const auto profile = learn_profile(RunFolder(cfg.output_dir).read_metrics(), reached.is_null() ? steps : reached_step, wall);
  nlohmann::json out = {{"seed", cfg.seed}, {"time_to_learn_s", reached}, {"samples_to_target", nullptr},
                        {"steps_to_target", nullptr}, {"base_accuracy", base}, {"final_accuracy", final_acc},
                        {"target", o.target}, {"steps", steps}, {"wall_s", seconds_since(t0)}, {"curve", curve},
                        {"profile", profile}};
  if (!reached.is_null()) {
    out["samples_to_target"] = profile["samples"];
    out["steps_to_target"] = reached_step;
  }
  return out;
}

// The median of values where null is "never" (sorted last, as +infinity): null when the median
// falls on one.
nlohmann::json median_or_null(const std::vector<nlohmann::json>& values) {
  std::vector<double> v;
  for (const auto& x : values) v.push_back(x.is_number() ? x.get<double>() : HUGE_VAL);
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return std::isfinite(m) ? nlohmann::json(m) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json bench_learn(const LearnBenchOptions& o) {
  check(o.seeds >= 1 && o.seeds <= 100, "bench learn", "--seeds must be between 1 and 100");
  nlohmann::json runs = nlohmann::json::array();
  std::vector<nlohmann::json> times, samples;
  for (int64_t i = 0; i < o.seeds; ++i) {
    auto r = learn_once(o, i);
    times.push_back(r["time_to_learn_s"]);
    samples.push_back(r["samples_to_target"]);
    runs.push_back(std::move(r));
  }
  if (o.seeds == 1) return runs[0];
  return {{"runs", runs}, {"target", o.target}, {"median_time_to_learn_s", median_or_null(times)},
          {"median_samples_to_target", median_or_null(samples)}};
}

nlohmann::json bench_weight_sync(const WeightSyncBenchOptions& o) {
  TempDir tmp;
  const std::string model_dir = prepare_model(o.model_dir, o.size, tmp.path);
  auto m = model::from_pretrained(model_dir);
  const double full_bytes = static_cast<double>(m->num_base_parameters()) * 4.0;  // fp32
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t r : o.ranks) {
    model::LoraConfig lc;
    lc.r = r;
    lc.lora_alpha = 2.0 * static_cast<double>(r);
    m->add_lora(lc);
    {
      torch::NoGradGuard ng;
      for (auto& p : m->lora_parameters()) p.normal_(0, 0.01);
    }
    RunDirectory dir(path_join(tmp.path, "r" + std::to_string(r)));
    std::vector<double> times;
    double bytes = 0;
    for (int i = 1; i <= o.repeats; ++i) {
      const auto t0 = Clock::now();
      const std::string d = dir.publish_adapter(i, [&](const std::string& t) { model::save_adapter(*m, t); }, 2);
      times.push_back(seconds_since(t0));
      bytes = static_cast<double>(fs::file_size(path_join(d, model::kAdapterWeightsName)));
    }
    std::sort(times.begin(), times.end());
    int64_t lora_params = 0;
    for (const auto& p : m->lora_parameters()) lora_params += p.numel();
    rows.push_back({{"r", r}, {"publish_s", times[times.size() / 2]}, {"adapter_bytes", bytes},
                    {"fraction_of_model", bytes / full_bytes}, {"lora_params", lora_params}});
  }
  return {{"model", o.size.empty() ? model_dir : "generated-" + o.size}, {"params", m->num_base_parameters()},
          {"model_bytes_fp32", full_bytes}, {"ranks", rows}};
}

}  // namespace grpo::run

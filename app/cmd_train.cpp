// `grpo train`: GRPO with LoRA from a config file (TRL key names) or on the embedded demo.
// A progress bar on a terminal, plain lines otherwise; SIGINT/SIGTERM stop gracefully, and the
// exit status then says which (130 / 143). `--set KEY=VALUE` and `--help-config` read the key table
// (core/grpo/config_schema.h); a bad config value is a usage error (exit 2).
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <chrono>
#include <ctime>
#include <thread>
#include <iostream>
#include <memory>
#include <unistd.h>

#include <QCoreApplication>

#include "app/commands.h"
#include "core/cluster/cluster_token.h"
#include "core/cluster/tls.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/grpo/config.h"
#include "core/grpo/config_schema.h"
#include "core/records/run_status.h"
#include "core/run/engine.h"
#include "core/run/sync_trainer.h"
#include "core/serve/dashboard_routes.h"
#include "core/serve/run_endpoint.h"

namespace grpo::cli {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};  // the signal that asked for the stop
std::atomic<bool> g_pause_toggle{false};
void on_signal(int sig) {
  g_signal = sig;
  g_stop = true;
}
void on_usr1(int) { g_pause_toggle = true; }

std::string default_run_dir() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "runs/run-%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

std::string format_duration(double s) {
  char buf[32];
  const int total = static_cast<int>(s + 0.5);
  if (total >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", total / 3600, (total / 60) % 60);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", total / 60, total % 60);
  return buf;
}

void print_progress(const run::StepReport& r, bool tty) {
  auto get = [&](const char* k) { auto it = r.metrics.find(k); return it == r.metrics.end() ? 0.0 : it->second; };
  const double eta = r.step > 0 ? r.elapsed_s / r.step * (r.max_steps - r.step) : 0;
  const double tok_s = get("perf/step_s") > 0 ? get("num_tokens") / get("perf/step_s") : 0;
  char line[256];
  std::string acc = r.metrics.count("eval/accuracy") ? " eval_acc " + std::to_string(get("eval/accuracy")).substr(0, 5) : "";
  if (tty) {
    const int width = 24, filled = static_cast<int>(width * r.step / std::max<int64_t>(1, r.max_steps));
    std::string bar = std::string(filled, '#') + std::string(width - filled, '.');
    std::snprintf(line, sizeof line, "\rstep %lld/%lld [%s] reward %.3f  %.0f tok/s  ETA %s%s   ",
                  static_cast<long long>(r.step), static_cast<long long>(r.max_steps), bar.c_str(), get("reward"), tok_s,
                  format_duration(eta).c_str(), acc.c_str());
    std::cout << line << (r.step == r.max_steps ? "\n" : "") << std::flush;
  } else {
    std::snprintf(line, sizeof line, "step %lld/%lld reward %.4f loss %.4f %.0f tok/s elapsed %s ETA %s%s",
                  static_cast<long long>(r.step), static_cast<long long>(r.max_steps), get("reward"), get("loss"), tok_s,
                  format_duration(r.elapsed_s).c_str(), format_duration(eta).c_str(), acc.c_str());
    std::cout << line << std::endl;
  }
  if (!r.verdict.empty() && !tty && r.step % 10 == 0) std::cout << "  " << r.verdict << ": " << r.advice << std::endl;
}

}  // namespace

void add_train_commands(CLI::App& app) {
  struct TrainArgs {
    std::string config, output, resume;
    bool demo = false, sync = false;
    int64_t steps = 0;
    int generators = -1;
    std::vector<std::string> workers;
    std::string token_file;
    bool discover = false, no_local = false;
    std::string serve, tls_cert, tls_key, tls_pin;
    std::vector<std::string> sets;
    bool help_config = false, print_config = false;
  };
  auto a = std::make_shared<TrainArgs>();
  auto* train = app.add_subcommand("train", "Train a LoRA adapter with asynchronous GRPO (TRL config keys)");
  train->add_option("CONFIG", a->config, "Run config (.json, .yaml, .yml): the keys of `grpo train --help-config`");
  train->add_flag("--demo", a->demo, "Train the embedded demo (tiny-arith model, arithmetic task)");
  train->add_option("--steps", a->steps, "Override max_steps");
  train->add_option("--output", a->output, "Run directory (default: runs/run-<date>-<time>)");
  train->add_option("--resume", a->resume, "Continue the run in RUN_DIR from its newest intact checkpoint");
  train->add_option("--generators", a->generators, "In-process generator threads (async engine; default: the config's local_generators)");
  train->add_option("--worker", a->workers, "Rollout worker URL, repeatable (grpo worker or a vLLM server): worker_urls");
  train->add_flag("--discover", a->discover, "Also use workers that announce themselves with signed beacons: discovery");
  train->add_option("--cluster-token-file", a->token_file, "The token shared with the workers: cluster_token_file");
  train->add_flag("--no-local-rollouts", a->no_local, "Leave generation to the workers: local_generators 0");
  train->add_option("--serve", a->serve, "Serve the run over HTTP on HOST:PORT (port 0: any free): state, metrics, control, adapters (cluster token)");
  train->add_option("--tls-cert", a->tls_cert, "With --serve: serve HTTPS with this PEM certificate (and --tls-key)");
  train->add_option("--tls-key", a->tls_key, "With --serve: the certificate's PEM private key");
  train->add_option("--tls-pin", a->tls_pin,
                    "Trust https:// workers whose certificate has this SHA-256 fingerprint: cluster_tls_fingerprint");
  train->add_flag("--sync", a->sync, "Synchronous loop (generate, score, train, repeat) instead of the async engine");
  train->add_option("--set", a->sets,
                    "Set any config key, after the config file and the options above: --set KEY=VALUE, repeatable "
                    "(VALUE as YAML/JSON: 1e-5, true, [q_proj, v_proj])");
  train->add_flag("--help-config", a->help_config,
                  "List every config key by group (type, range, default, retunable, what it does) and exit");
  train->add_flag("--print-config", a->print_config, "Print the resolved config as JSON and exit without training");
  train->footer(std::string("Signals: SIGINT/SIGTERM stop gracefully (final checkpoint and adapter), then exit 130/143; "
                            "SIGUSR1 pauses/resumes.\n") + kExitStatusHelp);
  train->callback([a] {
    if (a->help_config) {
      std::cout << grpo::format_config_help(
          grpo::train_config_schema(),
          "grpo train config keys (TRL names), in a .json/.yaml CONFIG or as --set KEY=VALUE. [retunable]: a live run "
          "may change it (the app's Retune, POST /grpo/run/retune).");
      return;
    }
    grpo::TrainConfig cfg;
    std::string source = a->config;
    run::RunEndpointOptions ro;  // checked before anything is created
    as_usage_errors([&] {  // a bad config file, key, value or option: exit 2
      const int sources = (a->demo ? 1 : 0) + (a->config.empty() ? 0 : 1) + (a->resume.empty() ? 0 : 1);
      check(sources == 1, "grpo train", "give exactly one of CONFIG, --demo or --resume RUN_DIR",
            "e.g. grpo train --demo, grpo train run.yaml, grpo train --resume runs/run-1");
      nlohmann::json j;
      if (a->demo) {
        source = path_join(resources_dir(), "presets/demo.yaml");
        j = grpo::load_config_file(source);
        j["model_name_or_path"] = path_join(resources_dir(), j.value("model_name_or_path", std::string()));
      } else if (!a->resume.empty()) {
        source = path_join(a->resume, "config.json");
        j = grpo::load_config_file(source);
        j["output_dir"] = a->resume;
      } else {
        j = grpo::load_config_file(source);
      }
      cfg.apply(j, source);
      if (a->steps > 0) cfg.apply({{"max_steps", a->steps}}, "--steps");
      if (!a->workers.empty()) cfg.apply({{"worker_urls", a->workers}}, "--worker");
      if (a->discover) cfg.apply({{"discovery", true}}, "--discover");
      if (!a->token_file.empty()) cfg.apply({{"cluster_token_file", a->token_file}}, "--cluster-token-file");
      if (a->no_local) cfg.apply({{"local_generators", 0}}, "--no-local-rollouts");
      if (!a->tls_pin.empty()) cfg.apply({{"cluster_tls_fingerprint", a->tls_pin}}, "--tls-pin");
      if (!a->serve.empty()) cfg.apply({{"serve", a->serve}}, "--serve");
      if (!a->sets.empty()) cfg.apply(grpo::parse_set_options(a->sets), "--set");
      check(a->tls_cert.empty() == a->tls_key.empty(), "--tls-cert/--tls-key", "give both or neither");
      check(a->tls_cert.empty() || !cfg.serve.empty(), "--tls-cert", "TLS is for the --serve endpoint", "add --serve HOST:PORT");
      check(!a->sync || cfg.serve.empty(), "--serve", "the endpoint serves the async engine", "drop --sync");
      check(!a->sync || !cfg.push_to_hub, "--sync", "push_to_hub runs with the async engine",
            "drop --sync, or push the result afterwards: grpo push RUN/adapter REPO_ID");
      check(!a->sync || (cfg.worker_urls.empty() && !cfg.discovery && cfg.slurm_workers == 0), "--sync",
            "the synchronous loop generates in-process only", "drop --sync to use workers");
      if (!a->output.empty()) cfg.output_dir = a->output;
      if (cfg.output_dir.empty()) cfg.output_dir = default_run_dir();
      cfg.validate(source);
      if (!cfg.serve.empty()) std::tie(ro.host, ro.port) = run::parse_host_port(cfg.serve, a->serve.empty() ? "serve" : "--serve");
      ro.tls_cert_file = a->tls_cert;
      ro.tls_key_file = a->tls_key;
    });
    if (a->print_config) {
      std::cout << cfg.to_json().dump(2) << std::endl;
      return;
    }

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGUSR1, on_usr1);
    const bool tty = ::isatty(STDOUT_FILENO);
    std::cout << "run directory: " << cfg.output_dir << std::endl;
    std::string adapter;
    int64_t steps_done = 0;
    if (a->sync) {
      check(a->resume.empty(), "--resume", "resuming needs the async engine", "drop --sync");
      run::SyncTrainer trainer(cfg, cfg.output_dir);
      adapter = trainer.run([tty, &steps_done](const run::StepReport& r) {
        steps_done = r.step;
        print_progress(r, tty);
      }, &g_stop);
    } else {
      // Remote workers and the Hub client talk through Qt's network event loops, which want an
      // application object.
      std::unique_ptr<QCoreApplication> qt;
      if (!cfg.worker_urls.empty() || cfg.discovery || cfg.slurm_workers > 0 || !cfg.serve.empty() || cfg.push_to_hub)
        qt = make_qt_application();
      run::EngineOptions eo;
      eo.local_generators = a->generators >= 0 ? a->generators : static_cast<int>(cfg.local_generators);
      eo.resume = !a->resume.empty();
      run::Engine engine(cfg, cfg.output_dir, eo);
      std::unique_ptr<run::RunEndpoint> endpoint;
      if (!cfg.serve.empty()) {
        ro.bearer_token = cluster::load_or_create_token(
            cfg.cluster_token_file.empty() ? cluster::default_token_path() : cfg.cluster_token_file);
        ro.max_steps = cfg.max_steps;
        endpoint = std::make_unique<run::RunEndpoint>(engine, ro);
        endpoint->start();
        std::cout << "serving run on " << endpoint->url() << std::endl;
        engine.set_join_url(endpoint->public_url());  // where Slurm-launched workers join
        // The browser view, token in the fragment (never sent to the server nor logged by it).
        std::cout << "dashboard: " << run::dashboard_url(endpoint->url(), ro.bearer_token) << std::endl;
        if (!ro.tls_cert_file.empty())  // what clients pin (the app: the URL with this fragment)
          std::cout << "TLS certificate SHA-256 " << cluster::certificate_file_fingerprint(ro.tls_cert_file)
                    << " (attach the app to " << endpoint->url() << "#sha256=<that>)" << std::endl;
      }
      // Signals only set flags; a watcher thread turns them into engine commands.
      std::atomic<bool> done{false};
      std::thread watcher([&] {
        bool paused = false;
        while (!done.load()) {
          if (g_stop.exchange(false)) engine.stop();
          if (g_pause_toggle.exchange(false)) {
            paused = !paused;
            if (paused) engine.pause(); else engine.resume();
            std::cerr << (paused ? "paused (SIGUSR1 to resume)" : "resumed") << std::endl;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      });
      try {
        adapter = engine.run([tty](const run::StepReport& r) { print_progress(r, tty); });
      } catch (...) {
        done = true;
        watcher.join();
        throw;
      }
      done = true;
      watcher.join();
      steps_done = engine.step();
      if (steps_done < cfg.max_steps) g_stop = true;
    }
    std::cout << (g_stop ? "stopped; " : "done; ") << "final adapter: " << adapter << std::endl;
    // Stopped by a signal before the last step: say which, so a scheduler can tell (130 / 143).
    if (g_signal != 0 && steps_done < cfg.max_steps) throw ExitStatus{exit_status_for_signal(g_signal)};
  });

  auto status_dir = std::make_shared<std::string>();
  auto status_json = std::make_shared<bool>(false);
  auto* status = app.add_subcommand("status", "A run's state: step, policy version, last metrics, paused or not");
  status->add_option("RUN_DIR", *status_dir, "Run directory")->required();
  status->add_flag("--json", *status_json, "Print JSON");
  status->callback([status_dir, status_json] {
    auto st = run::read_run_status(*status_dir);
    if (*status_json) print_json_line(st.dump());
    else std::cout << run::format_run_status(st);
  });
}

}  // namespace grpo::cli

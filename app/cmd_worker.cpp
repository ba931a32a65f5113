// `grpo worker`: serve a base model and runtime-loaded LoRA adapters over the vLLM-compatible
// HTTP subset (core/cluster/worker_server.h). Prints "listening on http://HOST:PORT" once ready
// (the real port when --listen asks for port 0); SIGINT/SIGTERM stop it cleanly. With
// --announce it sends signed discovery beacons built from WorkerServer::status_json().
#include <csignal>
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include <QCoreApplication>
#include <QNetworkAccessManager>

#include "app/commands.h"
#include "core/cluster/cluster_token.h"
#include "core/cluster/http_call.h"
#include "core/cluster/tls.h"
#include "core/cluster/worker_announcer.h"
#include "core/cluster/worker_joiner.h"
#include "core/cluster/worker_server.h"
#include "core/common/error.h"

namespace grpo::cli {
namespace {

// "HOST:PORT", "[v6]:PORT" or ":PORT" (all interfaces).
void parse_listen(const std::string& text, std::string& host, uint16_t& port) {
  const size_t colon = text.rfind(':');
  check(colon != std::string::npos, "--listen " + text, "expected HOST:PORT", "e.g. 127.0.0.1:8000, [::1]:0, :8000");
  host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  const std::string p = text.substr(colon + 1);
  check(!p.empty() && p.size() <= 5 && p.find_first_not_of("0123456789") == std::string::npos, "--listen " + text,
        "port must be a number in [0, 65535]");
  const int v = std::stoi(p);
  check(v <= 65535, "--listen " + text, "port must be a number in [0, 65535]");
  port = static_cast<uint16_t>(v);
}

}  // namespace

void add_worker_commands(CLI::App& app) {
  struct Args {
    std::string model, listen = "127.0.0.1:8000", token_file, bucket, name, served_name, announce, join;
    double join_interval = 15, join_give_up = 600;
    std::string tls_cert, tls_key, tls_pin;
    double announce_interval = 3.0, max_requests_per_s = 2000;
    int max_connections = 256, max_connections_per_peer = 64;
    int threads = 0, max_loras = 8, inject_delay_ms = 0;
    int64_t max_lora_rank = 64, max_batch = 256, max_body_mb = 32, max_queue = 4096;
    double max_queue_wait_s = 300;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("worker", "Serve rollouts for remote trainers (vLLM-compatible HTTP API)");
  cmd->add_option("--model", args->model, "Base model directory (Hugging Face layout)")->required()
      ->transform(model_path_transform());
  cmd->add_option("--listen", args->listen, "HOST:PORT to listen on (port 0: any free port)")->capture_default_str();
  cmd->add_option("--token-file", args->token_file,
                  "Cluster token file (default: " + cluster::default_token_path() + ", created if missing)");
  cmd->add_option("--bucket", args->bucket, "Directory adapters may be loaded from (lora_path must lie inside)");
  cmd->add_option("--name", args->name, "Worker name (default: HOSTNAME-PORT)");
  cmd->add_option("--served-model-name", args->served_name, "The base model's id in the API (default: --model)");
  cmd->add_option("--threads", args->threads, "Compute threads: torch's and OpenBLAS's pools (0: the libraries' defaults)")->check(CLI::Range(0, 1024));
  cmd->add_option("--max-loras", args->max_loras, "LoRA adapters loaded at once (>= max_staleness + 2)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--max-lora-rank", args->max_lora_rank, "Largest LoRA rank accepted")->capture_default_str();
  cmd->add_option("--max-batch", args->max_batch, "Most sequences (prompts x n) generated together")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--max-queue", args->max_queue,
                  "Most sequences (prompts x n) waiting to be generated (more: 503 with Retry-After)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--max-queue-wait-s", args->max_queue_wait_s,
                  "A completion request that waited this long for its batch is answered 503 instead")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  cmd->add_option("--max-body-mb", args->max_body_mb, "Largest request body in MiB (larger: 413)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--tls-cert", args->tls_cert, "Serve HTTPS with this PEM certificate (and --tls-key); see WORKERS.md");
  cmd->add_option("--tls-key", args->tls_key, "The certificate's PEM private key (unencrypted)");
  cmd->add_option("--tls-pin", args->tls_pin,
                  "Trust an https:// adapter URL (a trainer's bucket) whose certificate has this SHA-256 fingerprint");
  cmd->add_option("--max-connections", args->max_connections,
                  "Open connections at once (more: the oldest without the token is closed; 503 if all hold it)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-connections-per-peer", args->max_connections_per_peer,
                  "Open connections from one client address (the same rule; a trainer opens up to 30)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-requests-per-s", args->max_requests_per_s,
                  "Requests per second from one client address, bursts of twice that (more: 429); 0: no limit")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--announce", args->announce,
                  "Send signed discovery beacons to GROUP:PORT (the trainer's discovery_address, e.g. "
                  "239.255.77.42:29517)");
  cmd->add_option("--announce-interval", args->announce_interval, "Seconds between beacons")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--join", args->join,
                  "Join the run served at this URL (grpo train --serve; no multicast needed): a heartbeat every "
                  "--join-interval seconds, a leave on SIGTERM, SIGINT or SIGUSR1 (Slurm's signal before the time limit)");
  cmd->add_option("--join-interval", args->join_interval, "Seconds between join heartbeats")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--join-give-up", args->join_give_up,
                  "Seconds the joined run may stay unreachable before this worker exits (0: never)")
      ->check(CLI::Range(0.0, 1e7))
      ->capture_default_str();
  cmd->add_option("--inject-delay-ms", args->inject_delay_ms,
                  "Fault injection (benchmarks, tests): hold each completion's answer back this many ms")
      ->check(CLI::Range(0, 3600000))
      ->group("Fault injection");
  cmd->callback([args] {
    cluster::WorkerOptions o;
    parse_listen(args->listen, o.host, o.port);
    o.model_dir = args->model;
    o.served_model_name = args->served_name;
    o.token = args->token_file.empty() ? cluster::load_or_create_token(cluster::default_token_path())
                                       : cluster::read_token_file(args->token_file);
    o.bucket = args->bucket;
    o.name = args->name;
    o.version = GRPO_VERSION;
    o.threads = args->threads;
    o.max_loras = args->max_loras;
    o.max_lora_rank = args->max_lora_rank;
    o.max_batch_sequences = args->max_batch;
    o.limits.max_body_bytes = static_cast<size_t>(args->max_body_mb) << 20;
    check(args->tls_cert.empty() == args->tls_key.empty(), "--tls-cert/--tls-key", "give both or neither");
    o.tls_cert_file = args->tls_cert;
    o.tls_key_file = args->tls_key;
    o.tls_pins = cluster::parse_tls_pins(args->tls_pin, "--tls-pin");
    o.max_connections = args->max_connections;
    o.max_connections_per_peer = args->max_connections_per_peer;
    o.max_queued_sequences = args->max_queue;
    o.max_queue_wait_ms = static_cast<int64_t>(args->max_queue_wait_s * 1000);
    o.max_requests_per_s = args->max_requests_per_s;
    o.inject_delay_ms = args->inject_delay_ms;

    // Qt's event loops (the server thread's) want an application object; this thread only waits.
    const auto qt = make_qt_application();

    // Before the model loads: a stop (or Slurm's drain signal, which may come early) during the
    // load is then a flag the wait below sees at once, never the default action that kills.
    install_stop_signals();
    if (!args->join.empty()) install_stop_signal(SIGUSR1);
    cluster::WorkerServer worker(o);
    worker.start();
    std::unique_ptr<cluster::WorkerAnnouncer> announcer;
    if (!args->announce.empty())
      announcer = std::make_unique<cluster::WorkerAnnouncer>(
          o.token, args->announce,
          [&worker] {
            const auto s = worker.status_json();  // thread-safe
            cluster::Beacon b;
            b.name = s.value("name", "");
            b.url = s.value("url", "");
            b.model = s.value("model_fingerprint", "");
            b.version = s.value("version", "");
            for (const auto& d : s["devices"]) b.devices += (b.devices.empty() ? "" : ", ") + d.get<std::string>();
            b.load = static_cast<double>(s["load"].value("queued", int64_t(0)) + s["load"].value("running", int64_t(0)));
            return b;
          },
          args->announce_interval);
    std::unique_ptr<cluster::WorkerJoiner> joiner;
    if (!args->join.empty()) {
      // Slurm's drain signal (sbatch --signal=B:USR1@N) ends the worker as SIGTERM does: it leaves first.
      cluster::JoinOptions jo;
      jo.trainer_url = args->join;
      jo.token = o.token;
      const std::string url = worker.url();
      jo.scheme = url.substr(0, url.find("://"));
      jo.port = std::stoi(url.substr(url.rfind(':') + 1));
      jo.job = cluster::slurm_task_from_env();
      jo.node = cluster::slurm_node_from_env();
      jo.name = worker.status_json().value("name", std::string());
      jo.interval_s = args->join_interval;
      jo.give_up_s = args->join_give_up;
      jo.on_give_up = [] { request_stop(); };
      joiner = std::make_unique<cluster::WorkerJoiner>(jo);
    }
    std::cout << "listening on " << worker.url() << std::endl;
    std::cerr << "grpo worker " << worker.status_json()["name"].get<std::string>() << ": model " << o.model_dir
              << (o.bucket.empty() ? std::string(", no --bucket (adapter loads refused)") : ", bucket " + o.bucket)
              << std::endl;
    wait_for_stop_signal();
    std::cerr << "grpo worker: stopping" << std::endl;
    joiner.reset();  // leaves the run first, so the trainer sends nothing more here
    announcer.reset();
    worker.stop();
  });
  add_workers_commands(app);
}

// `grpo workers launch|cancel|list RUN_URL`: a live run's Slurm workers, through its endpoint
// (POST /grpo/workers/launch, /grpo/workers/cancel; GET /grpo/dashboard/workers).
void add_workers_commands(CLI::App& app) {
  struct Args {
    std::string url, token_file, job;
    int count = 1, cpus = 0;
    std::string partition, gres, mem, time_limit, account, qos;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("workers", "A live run's Slurm-launched workers, through its endpoint (grpo train --serve)");
  cmd->require_subcommand(1);
  const auto common = [a](CLI::App* c) {
    c->add_option("RUN_URL", a->url, "The run's endpoint, as `grpo train` printed it (serving run on ...)")->required();
    c->add_option("--cluster-token-file", a->token_file, "The run's cluster token (default: ~/.config/grpo-studio/cluster-token)");
  };
  const auto call = [a](const std::string& method, const std::string& path, const nlohmann::json& body) {
    const auto qt = make_qt_application();
    QNetworkAccessManager nam;
    const std::string token = cluster::read_token_file(a->token_file.empty() ? cluster::default_token_path() : a->token_file);
    std::string base = a->url.substr(0, a->url.find('#'));
    while (!base.empty() && base.back() == '/') base.pop_back();
    const auto r = cluster::http_call(nam, method, base + path, token, body.is_null() ? "" : body.dump(), 60);
    check(r.ok(), base + path, r.error);
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    check(!j.is_discarded(), base + path, "the answer is not JSON");
    return j;
  };
  auto* launch = cmd->add_subcommand("launch", "Ask Slurm for more workers for the run (one job array)");
  common(launch);
  launch->add_option("--count", a->count, "Workers")->check(CLI::Range(1, 1000))->capture_default_str();
  launch->add_option("--partition", a->partition, "Partition (default: the run's slurm_partition)");
  launch->add_option("--gres", a->gres, "GRES per worker, e.g. gpu:1");
  launch->add_option("--cpus-per-task", a->cpus, "CPUs per worker")->check(CLI::Range(0, 1024));
  launch->add_option("--mem", a->mem, "Memory per worker, e.g. 16G");
  launch->add_option("--time", a->time_limit, "Time limit: minutes, or [D-]HH:MM[:SS]");
  launch->add_option("--account", a->account, "Account");
  launch->add_option("--qos", a->qos, "QoS");
  launch->callback([a, call] {
    nlohmann::json body = {{"count", a->count}};
    const std::pair<const char*, const std::string*> fields[] = {{"partition", &a->partition}, {"gres", &a->gres},
        {"mem", &a->mem}, {"time_limit", &a->time_limit}, {"account", &a->account}, {"qos", &a->qos}};
    for (const auto& [key, value] : fields)
      if (!value->empty()) body[key] = *value;
    if (a->cpus > 0) body["cpus_per_task"] = a->cpus;
    const auto j = call("POST", "/grpo/workers/launch", body);
    std::cout << "submitted job " << j.value("job", std::string("?")) << ": " << a->count
              << " worker(s); they join the run as they start" << std::endl;
  });
  auto* cancel = cmd->add_subcommand("cancel", "Cancel one of the run's Slurm jobs (its workers leave, not replaced)");
  common(cancel);
  cancel->add_option("JOB", a->job, "The job id (123, not the task 123_4)")->required();
  cancel->callback([a, call] {
    call("POST", "/grpo/workers/cancel", {{"job", a->job}});
    std::cout << "cancelled job " << a->job << std::endl;
  });
  auto* list = cmd->add_subcommand("list", "The run's workers with their Slurm job, state and time left, as JSON lines");
  common(list);
  list->callback([call] {
    for (const auto& w : call("GET", "/grpo/dashboard/workers", nullptr)) print_json_line(w.dump());
  });
}

}  // namespace grpo::cli

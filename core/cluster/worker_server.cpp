#include "core/common/json_limits.h"
#include "core/cluster/worker_server.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include <QCryptographicHash>
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QHostAddress>
#include <QNetworkInterface>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QTemporaryDir>

#include <torch/torch.h>

#include "core/cluster/adapter_store.h"
#include "core/cluster/completion_api.h"
#include "core/cluster/http_server.h"
#include "core/cluster/tls.h"
#include "core/cluster/worker_announcer.h"
#include "core/cluster/worker_batcher.h"
#include "core/common/blas_threads.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/model/weights.h"
#include "core/text/tokenizer.h"


namespace grpo::cluster {
// Named, not anonymous: WorkerServer::Impl (external linkage) holds these types, and GCC's
// -Wsubobject-linkage rightly objects to anonymous ones there once a unity build includes this file.
namespace worker_server_impl {

using nlohmann::json;

void add_unique(std::vector<int64_t>& v, int64_t x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// The ids that end a completion by default (vLLM: the tokenizer's EOS and generation_config's).
std::vector<int64_t> default_stop_ids(const model::CausalLMImpl& m, const text::Tokenizer& tok, const std::string& dir) {
  std::vector<int64_t> ids;
  for (int64_t id : m.config().eos_token_ids) add_unique(ids, id);
  const std::string gen = path_join(dir, "generation_config.json");
  if (file_exists(gen)) {
    const std::string text = read_file(gen);
    auto j = json_depth(text) > kMaxJsonDepth ? json(json::value_t::discarded) : json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("eos_token_id")) {
      const auto& e = j["eos_token_id"];
      if (e.is_number_integer()) add_unique(ids, e.get<int64_t>());
      else if (e.is_array())
        for (const auto& x : e)
          if (x.is_number_integer()) add_unique(ids, x.get<int64_t>());
    }
  }
  if (auto eos = tok.eos_id()) add_unique(ids, *eos);
  return ids;
}

// GET `url` (with the cluster token) into the file `dest`, on the calling thread (a local event
// loop). Redirects are not followed (the token must not travel elsewhere). 404 -> HttpError 404.
void fetch_file(const std::string& url, const std::string& dest, const std::string& token, const TlsPins& pins,
                int64_t max_bytes) {
  QNetworkAccessManager nam;
  nam.setRedirectPolicy(QNetworkRequest::ManualRedirectPolicy);
  QNetworkRequest req{QUrl(QString::fromStdString(url))};
  req.setRawHeader("Authorization", QByteArray::fromStdString("Bearer " + token));
  req.setTransferTimeout(60000);  // no byte for a minute: give up
  QFile out(QString::fromStdString(dest));
  if (!out.open(QIODevice::WriteOnly)) throw HttpError(500, "cannot write " + dest);
  std::unique_ptr<QNetworkReply> reply(send_request(nam, req, "GET", {}, pins));
  int64_t written = 0;
  bool too_big = false, write_failed = false;
  auto drain = [&] {
    const QByteArray d = reply->readAll();
    written += d.size();
    if (written > max_bytes) {
      too_big = true;
      reply->abort();
    } else if (out.write(d) != d.size()) {
      write_failed = true;
      reply->abort();
    }
  };
  QEventLoop loop;
  QObject::connect(reply.get(), &QNetworkReply::readyRead, &loop, drain);
  QObject::connect(reply.get(), &QNetworkReply::finished, &loop, &QEventLoop::quit);
  if (!reply->isFinished()) loop.exec();
  if (!too_big && !write_failed) drain();
  out.close();
  const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  if (too_big) throw HttpError(400, url + " is larger than " + std::to_string(max_bytes) + " bytes");
  if (write_failed) throw HttpError(500, "cannot write " + dest + " (disk full?)");
  if (status == 404) throw HttpError(404, url + ": not found", "NotFoundError");
  if (reply->error() != QNetworkReply::NoError || status != 200)
    throw HttpError(502, "fetching " + url + " failed: " +
                             (status ? "HTTP " + std::to_string(status) : network_error(reply.get())));
}

json parse_body(const HttpRequest& req) {
  if (json_depth(req.body) > kMaxJsonDepth)
    throw HttpError(400, "request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw HttpError(400, "request body must be a JSON object");
  return j;
}

std::string string_field(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return {};
  if (!j[key].is_string()) throw HttpError(400, std::string("'") + key + "': expected a string");
  return j[key].get<std::string>();
}

// One background thread running queued tasks in order (adapter loads: slow file reads and
// hashing that must not block the HTTP thread, and that are better done one at a time).
class TaskThread {
public:
  TaskThread() : thread_([this] { run(); }) {}
  ~TaskThread() { stop(); }
  void post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    cv_.notify_all();
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, and everything queued was run
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace worker_server_impl
using namespace worker_server_impl;

struct WorkerServer::Impl {
  WorkerOptions options;
  model::CausalLM base{nullptr};
  std::shared_ptr<text::Tokenizer> tokenizer;
  ModelLimits limits;
  std::string fingerprint;
  std::string device_name;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::unique_ptr<QTemporaryDir> downloads;  // adapters fetched by URL land here briefly
  std::unique_ptr<AdapterStore> adapters;
  std::unique_ptr<WorkerBatcher> batcher;
  std::unique_ptr<TaskThread> loader;
  std::unique_ptr<TaskThread> delayer;  // inject_delay_ms > 0: holds completion answers back
  std::unique_ptr<HttpServer> http;

  void add_routes();
  void completions(const HttpRequest& req, Reply reply);
  json models_json() const;
  json server_info(bool text) const;
};

WorkerServer::WorkerServer(WorkerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.options = std::move(options);
  auto& o = d.options;
  check(!o.model_dir.empty(), "grpo worker", "no model directory given", "pass --model DIR");
  check(!o.token.empty(), "grpo worker", "no cluster token", "pass --token-file F");
  if (o.served_model_name.empty()) o.served_model_name = o.model_dir;
  // --threads is the worker's whole share of the cores: torch's intra-op pool and OpenBLAS's,
  // whose idle threads otherwise spin on every core (docs/workers.md, "Threads").
  if (o.threads > 0) {
    torch::set_num_threads(o.threads);
    set_blas_threads(o.threads);
  }
  const torch::Device device = torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  d.device_name = device.is_cuda() ? "cuda" : "cpu";
  d.base = model::from_pretrained(o.model_dir, model::default_compute_dtype(device), device);
  d.base->eval();
  d.tokenizer = std::make_shared<text::Tokenizer>(text::Tokenizer::load(o.model_dir));
  d.limits.vocab_size = d.base->config().vocab_size;
  d.limits.max_model_len = d.base->config().max_position_embeddings;
  d.limits.eos_token_ids = default_stop_ids(*d.base, *d.tokenizer, o.model_dir);
  d.limits.max_n = std::max<int64_t>(1, o.max_batch_sequences);
  d.limits.max_sequences = d.limits.max_n;
  d.fingerprint = model_fingerprint(o.model_dir);  // as discovery beacons define it
  if (int removed = remove_dead_workers_downloads(QDir::tempPath().toStdString()))
    log_info("grpo worker: removed " + std::to_string(removed) + " download folder(s) of workers that are gone");
  d.downloads = std::make_unique<QTemporaryDir>(QDir::tempPath() + "/grpo-worker-" +
                                                QString::number(static_cast<qint64>(::getpid())) + "-XXXXXX");
  check(d.downloads->isValid(), "grpo worker", "cannot create a temporary download directory",
        "is $TMPDIR writable?");
  AdapterStoreOptions ao;
  ao.bucket_root = o.bucket;
  ao.max_loras = o.max_loras;
  ao.max_lora_rank = o.max_lora_rank;
  ao.download_root = d.downloads->path().toStdString();
  ao.fetch = [token = o.token, pins = o.tls_pins](const std::string& url, const std::string& dest, int64_t max_bytes) {
    fetch_file(url, dest, token, pins, max_bytes);
  };
  d.adapters = std::make_unique<AdapterStore>(d.base, ao);
}

int remove_dead_workers_downloads(const std::string& tmp_dir, int max_entries) {
  namespace fs = std::filesystem;
  const std::string prefix = "grpo-worker-";
  int removed = 0, seen = 0;
  std::error_code ec;
  for (fs::directory_iterator it(tmp_dir, ec), end; !ec && it != end && seen < max_entries; it.increment(ec), ++seen) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t dash = name.find('-', prefix.size());
    if (dash == std::string::npos || dash == prefix.size() || dash - prefix.size() > 9) continue;  // not ours
    const std::string digits = name.substr(prefix.size(), dash - prefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 1 || pid == ::getpid()) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // running, or not ours to ask about
    std::error_code rm;
    fs::remove_all(it->path(), rm);
    if (!rm) ++removed;
  }
  return removed;
}

WorkerServer::~WorkerServer() { stop(); }

void WorkerServer::start() {
  Impl& d = *impl_;
  check(!d.http, "grpo worker", "already started");
  BatcherOptions bo;
  bo.worker_name = d.options.name;
  bo.max_batch_sequences = d.options.max_batch_sequences;
  bo.max_queued_sequences = d.options.max_queued_sequences;
  bo.max_wait_ms = d.options.max_queue_wait_ms;
  d.batcher = std::make_unique<WorkerBatcher>(d.base, d.tokenizer, bo);
  d.loader = std::make_unique<TaskThread>();
  if (d.options.inject_delay_ms > 0) d.delayer = std::make_unique<TaskThread>();
  HttpServerOptions ho;
  ho.host = d.options.host;
  ho.port = d.options.port;
  ho.bearer_token = d.options.token;
  ho.limits = d.options.limits;
  ho.request_timeout_ms = d.options.request_timeout_ms;
  ho.max_connections = d.options.max_connections;
  ho.max_connections_per_peer = d.options.max_connections_per_peer;
  ho.max_requests_per_s = d.options.max_requests_per_s;
  ho.max_request_burst = 2 * d.options.max_requests_per_s;
  ho.tls_cert_file = d.options.tls_cert_file;
  ho.tls_key_file = d.options.tls_key_file;
  d.http = std::make_unique<HttpServer>(ho);
  d.add_routes();
  d.http->route("GET", "/grpo/status", [this](const HttpRequest&, Reply r) {
    r.send(HttpResponse::json(200, status_json()));
  });
  d.http->start();
  if (d.options.name.empty()) {  // known only now when the port was 0
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    d.options.name = std::string(host) + "-" + std::to_string(d.http->port());
  }
  d.batcher->set_worker_name(d.options.name);
}

void WorkerServer::stop() {
  Impl& d = *impl_;
  // Order: fail what is queued (answered while the server still runs), finish loads, close the
  // server; only then free the objects its routes use.
  if (d.batcher) d.batcher->stop();
  if (d.loader) d.loader->stop();
  if (d.delayer) d.delayer->stop();
  if (d.http) d.http->stop();
  d.batcher.reset();
  d.loader.reset();
  d.delayer.reset();
  d.http.reset();
}

uint16_t WorkerServer::port() const { return impl_->http ? impl_->http->port() : 0; }
std::string WorkerServer::url() const { return impl_->http ? impl_->http->url() : std::string(); }

json WorkerServer::status_json() const {
  const Impl& d = *impl_;
  json adapters = json::array();
  for (const auto& a : d.adapters->list()) adapters.push_back({{"name", a->name}, {"sha256", a->sha256}});
  const BatcherStats b = d.batcher ? d.batcher->stats() : BatcherStats{};
  const HttpServerStats h = d.http ? d.http->stats() : HttpServerStats{};
  const double uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - d.started).count();
  return {{"name", d.options.name},
          {"url", advertised_url(d.options.host, port(), url())},
          {"model", d.options.served_model_name},
          {"model_fingerprint", d.fingerprint},
          {"devices", json::array({d.device_name})},
          {"version", d.options.version},
          {"load", {{"queued", b.queued}, {"running", b.running}, {"connections", h.connections_open}}},
          {"paused", b.paused},
          {"adapters", adapters},
          {"max_loras", d.options.max_loras},
          {"limits", {{"max_model_len", d.limits.max_model_len},
                      {"max_batch", d.options.max_batch_sequences},
                      {"max_queue", d.options.max_queued_sequences},
                      {"max_queue_wait_ms", d.options.max_queue_wait_ms},
                      {"max_body_bytes", d.options.limits.max_body_bytes}}},
          {"served", {{"requests", b.requests}, {"batches", b.batches}, {"completions", b.completions},
                      {"tokens", b.tokens}, {"refused", h.rejected}, {"strangers_evicted", h.evicted}}},
          {"uptime_s", uptime}};
}

json WorkerServer::Impl::models_json() const {
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  auto card = [&](const std::string& id, const std::string& root, json parent) {
    return json{{"id", id},
                {"object", "model"},
                {"created", created},
                {"owned_by", "vllm"},
                {"root", root},
                {"parent", parent},
                {"max_model_len", limits.max_model_len},
                {"permission", json::array({{{"id", "modelperm-" + id},
                                             {"object", "model_permission"},
                                             {"created", created},
                                             {"allow_create_engine", false},
                                             {"allow_sampling", true},
                                             {"allow_logprobs", true},
                                             {"allow_search_indices", false},
                                             {"allow_view", true},
                                             {"allow_fine_tuning", false},
                                             {"organization", "*"},
                                             {"group", nullptr},
                                             {"is_blocking", false}}})}};
  };
  json data = json::array({card(options.served_model_name, options.model_dir, nullptr)});
  for (const auto& a : adapters->list()) data.push_back(card(a->name, a->path, options.served_model_name));
  return {{"object", "list"}, {"data", data}};
}

json WorkerServer::Impl::server_info(bool text) const {
  json lora = {{"max_lora_rank", options.max_lora_rank}, {"max_loras", options.max_loras},
               {"max_cpu_loras", options.max_loras}};
  json config = {{"model", options.model_dir},
                 {"served_model_name", options.served_model_name},
                 {"max_model_len", limits.max_model_len},
                 {"lora_config", lora},
                 {"logprobs_mode", "processed_logprobs"},
                 {"device", device_name}};
  json vllm_config = config;
  if (text)
    vllm_config = "model=" + options.model_dir + ", served_model_name=" + options.served_model_name +
                  ", max_model_len=" + std::to_string(limits.max_model_len) +
                  ", lora_config=LoRAConfig(max_lora_rank=" + std::to_string(options.max_lora_rank) +
                  ", max_loras=" + std::to_string(options.max_loras) + "), logprobs_mode=processed_logprobs";
  return {{"vllm_config", vllm_config},
          {"vllm_env", {{"VLLM_ALLOW_RUNTIME_LORA_UPDATING", "1"}, {"VLLM_SERVER_DEV_MODE", "1"}}},
          {"system_env", {{"device", device_name}, {"torch_threads", torch::get_num_threads()},
                          {"blas_threads", blas_threads()}, {"engine", "grpo worker"},
                          {"version", options.version}}}};
}

void WorkerServer::Impl::completions(const HttpRequest& req, Reply reply) {
  CompletionJob job = parse_completion_request(req.body, limits, tokenizer.get());
  std::shared_ptr<const LoadedAdapter> adapter;
  if (job.model.empty()) job.model = options.served_model_name;
  if (job.model != options.served_model_name) {
    adapter = adapters->find(job.model);
    if (!adapter) throw HttpError(404, "The model `" + job.model + "` does not exist.", "NotFoundError");
  }
  if (!delayer) {
    batcher->submit(std::move(job), std::move(adapter), [reply](HttpResponse r) { reply.send(std::move(r)); });
    return;
  }
  // Answers are ready in order, so their due times are too: one thread sleeps until each is due.
  batcher->submit(std::move(job), std::move(adapter), [reply, d = delayer.get(), ms = options.inject_delay_ms](HttpResponse r) {
    const auto due = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    d->post([reply, r = std::move(r), due]() mutable {
      std::this_thread::sleep_until(due);
      reply.send(std::move(r));
    });
  });
}

void WorkerServer::Impl::add_routes() {
  HttpServer& s = *http;
  s.route("GET", "/health", [](const HttpRequest&, Reply r) { r.send(HttpResponse::text(200, "")); });
  s.route("GET", "/version", [this](const HttpRequest&, Reply r) {
    r.send(HttpResponse::json(200, {{"version", options.version}}));
  });
  s.route("GET", "/v1/models", [this](const HttpRequest&, Reply r) { r.send(HttpResponse::json(200, models_json())); });
  // Parsing and tokenizing a body of up to --max-body-mb runs on the server's handler pool.
  s.route("POST", "/v1/completions", [this](const HttpRequest& req, Reply r) { completions(req, std::move(r)); },
          RouteOptions{.blocking = true});
  s.route("POST", "/v1/load_lora_adapter", [this](const HttpRequest& req, Reply r) {
    const json j = parse_body(req);
    const std::string name = string_field(j, "lora_name"), path = string_field(j, "lora_path");
    bool inplace = false;
    if (j.contains("load_inplace") && !j["load_inplace"].is_null()) {
      if (!j["load_inplace"].is_boolean()) throw HttpError(400, "'load_inplace': expected true or false");
      inplace = j["load_inplace"].get<bool>();
    }
    loader->post([this, name, path, inplace, r] {
      try {
        const auto a = adapters->load(name, path, inplace);
        log_info(options.name + ": loaded LoRA adapter '" + name + "' from " + a->path + " (sha256 " +
                 a->sha256.substr(0, 12) + (a->verified ? ", verified" : ", no SHA256SUMS") + ")");
        r.send(HttpResponse::text(200, "Success: LoRA adapter '" + name + "' added successfully."));
      } catch (const HttpError& e) {
        r.send(e.response());
      } catch (const std::exception& e) {
        r.send(HttpResponse::error(500, "Loading lora " + name + " failed: " + e.what()));
      }
    });
  });
  s.route("POST", "/v1/unload_lora_adapter", [this](const HttpRequest& req, Reply r) {
    const json j = parse_body(req);
    const std::string name = string_field(j, "lora_name");
    adapters->unload(name);
    log_info(options.name + ": removed LoRA adapter '" + name + "'");
    r.send(HttpResponse::text(200, "Success: LoRA adapter '" + name + "' removed successfully."));
  });
  s.route("POST", "/pause", [this](const HttpRequest& req, Reply r) {
    std::string mode = req.query_param("mode").value_or("abort");
    // Deprecated form: wait_for_inflight_requests=true means mode=wait.
    if (!req.query_param("mode") && req.query_param("wait_for_inflight_requests").value_or("") == "true") mode = "wait";
    PauseMode m;
    if (mode == "abort") m = PauseMode::Abort;
    else if (mode == "wait") m = PauseMode::Wait;
    else if (mode == "keep") m = PauseMode::Keep;
    else throw HttpError(400, "'mode': expected abort, wait or keep, got \"" + mode + "\"");
    batcher->pause(m, [r] { r.send(HttpResponse::json(200, {{"status", "paused"}})); });
  });
  s.route("POST", "/resume", [this](const HttpRequest&, Reply r) {
    batcher->resume();
    r.send(HttpResponse::json(200, {{"status", "resumed"}}));
  });
  s.route("GET", "/is_paused", [this](const HttpRequest&, Reply r) {
    r.send(HttpResponse::json(200, {{"is_paused", batcher->is_paused()}}));
  });
  s.route("GET", "/server_info", [this](const HttpRequest& req, Reply r) {
    const std::string format = req.query_param("config_format").value_or("text");
    if (format != "text" && format != "json") throw HttpError(400, "'config_format': expected text or json");
    r.send(HttpResponse::json(200, server_info(format == "text")));
  });
  s.route("GET", "/get_world_size", [](const HttpRequest&, Reply r) {
    r.send(HttpResponse::json(200, {{"world_size", 1}}));
  });
}

// The URL others should use: the bound one, or for a wildcard address (0.0.0.0, ::) the first
// non-loopback address of this machine (beacons must carry something a trainer can reach).
std::string advertised_url(const std::string& host, uint16_t port, const std::string& bound_url) {
  if (host != "0.0.0.0" && host != "::" && host != "*") return bound_url;
  const bool v6 = host == "::";
  // The bound URL's scheme: a worker serving TLS must not be advertised as http://, or a trainer
  // would send it the bearer token in clear text before the handshake fails (issue 18).
  const std::string scheme = bound_url.rfind("https://", 0) == 0 ? "https://" : "http://";
  for (const QHostAddress& a : QNetworkInterface::allAddresses()) {
    if (a.isLoopback() || a.isLinkLocal()) continue;
    if (a.protocol() == QAbstractSocket::IPv4Protocol)
      return scheme + a.toString().toStdString() + ":" + std::to_string(port);
    if (v6 && a.protocol() == QAbstractSocket::IPv6Protocol)
      return scheme + "[" + a.toString().toStdString() + "]:" + std::to_string(port);
  }
  return bound_url;
}

}  // namespace grpo::cluster

// `grpo worker` as a user runs it: the real CLI process on the demo model (port 0, a temp bucket, a
// token file), driven over HTTP on 127.0.0.1 with QNetworkAccessManager. Checks vLLM's shapes
// (docs/workers.md, "Completion request" and "Completion response"), that the returned log-probs
// equal the model's own recomputed ones, seeded determinism, batching of requests that arrive
// together, adapter load/unload with vLLM's statuses and messages, the bucket confinement,
// SHA256SUMS checks (written by coreutils' sha256sum, the format RunDirectory::publish_adapter
// writes), auth, body limits, pause/resume, and a clean exit on SIGTERM. The process is killed on
// every path out of the test.
#include "tests/common/test_paths.h"
#include <QEventLoop>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QProcess>

#include <limits>
#include <QTemporaryDir>
#include <QTimer>
#include <QUdpSocket>
#include <QtTest>

#include <limits>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/cluster/beacon.h"
#include "core/cluster/http_server.h"
#include "core/cluster/worker_server.h"
#include "core/common/blas_threads.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "core/text/tokenizer.h"
#include "tests/cluster/worker_test_util.h"
#include "tests/common/child_process.h"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kModel = std::string(GRPO_TEST_DATA) + "/../../resources/models/tiny-arith";
const std::string kToken = "5f0e1d2c3b4a59687766554433221100ffeeddccbbaa99887766554433221100";

using worker_test::Client;
using worker_test::HttpResult;
using worker_test::error_message;
using worker_test::recompute_logprobs;
using worker_test::write_sha256sums;

}  // namespace

class TestWorkerApi : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  std::string bucket_, adapter_dir_, outside_dir_;
  std::unique_ptr<QProcess> worker_;
  std::unique_ptr<QUdpSocket> beacons_;  // where the worker's --announce beacons arrive
  std::unique_ptr<Client> client_;
  std::vector<int64_t> prompt_;
  grpo::model::CausalLM base_{nullptr}, tuned_{nullptr};
  std::string model_id_;
  std::string url_;

  json completion_body(const std::string& model, uint64_t seed, int n = 4, double temperature = 0.7) const {
    return {{"model", model}, {"prompt", prompt_}, {"n", n}, {"max_tokens", 8}, {"temperature", temperature},
            {"top_p", 1.0}, {"seed", seed}, {"logprobs", 0}, {"return_token_ids", true}};
  }

  void check_logprobs(const json& response, grpo::model::CausalLM& m, double temperature) {
    double worst = 0;
    for (const auto& c : response["choices"]) {
      const auto ids = c["token_ids"].get<std::vector<int64_t>>();
      const auto got = c["logprobs"]["token_logprobs"].get<std::vector<double>>();
      const auto want = recompute_logprobs(m, c["prompt_token_ids"].get<std::vector<int64_t>>(), ids, temperature);
      QCOMPARE(got.size(), want.size());
      for (size_t t = 0; t < got.size(); ++t) worst = std::max(worst, std::fabs(got[t] - want[t]));
    }
    QVERIFY2(worst <= 1e-4, qPrintable(QString("max |logprob diff| = %1").arg(worst)));
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const std::string root = tmp_.path().toStdString();
    bucket_ = root + "/bucket";
    adapter_dir_ = bucket_ + "/run/adapters/policy-v1";
    outside_dir_ = root + "/outside/policy-x";
    const std::string token_file = root + "/token";
    grpo::write_file_atomic(token_file, kToken + "\n");
    QCOMPARE(::chmod(token_file.c_str(), 0600), 0);

    // A real adapter: LoRA on the demo model with non-zero factors, saved in PEFT layout, plus
    // SHA256SUMS as publish_adapter writes it.
    torch::manual_seed(11);
    base_ = grpo::model::from_pretrained(kModel);
    base_->eval();
    tuned_ = grpo::model::from_pretrained(kModel);
    grpo::model::LoraConfig lc;
    lc.r = 4;
    lc.lora_alpha = 8;
    tuned_->add_lora(lc);
    {
      torch::NoGradGuard ng;
      for (auto& p : tuned_->lora_parameters()) p.normal_(0.0, 0.3);
    }
    tuned_->eval();
    grpo::model::save_adapter(*tuned_, adapter_dir_);
    QVERIFY(write_sha256sums(adapter_dir_));
    grpo::model::save_adapter(*tuned_, outside_dir_);

    auto tok = grpo::text::Tokenizer::load(kModel);
    for (int32_t id : tok.encode("12+7=")) prompt_.push_back(id);
    QVERIFY(!prompt_.empty());

    beacons_ = std::make_unique<QUdpSocket>();
    QVERIFY(beacons_->bind(QHostAddress::LocalHost, 0));
    const QString announce = "127.0.0.1:" + QString::number(beacons_->localPort());

    worker_ = std::make_unique<QProcess>();
    worker_->setProcessChannelMode(QProcess::SeparateChannels);
    // The worker dies with this test process, even if the test crashes: no leaked servers.
    worker_->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
    // The tests run with OPENBLAS_NUM_THREADS=1; a user's shell asks for more, which --threads overrides.
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("OPENBLAS_NUM_THREADS", "4");
    worker_->setProcessEnvironment(env);
    worker_->start(GRPO_CLI, {"worker", "--model", QString::fromStdString(kModel), "--listen", "127.0.0.1:0",
                              "--token-file", QString::fromStdString(token_file), "--bucket",
                              QString::fromStdString(bucket_), "--name", "test-worker", "--threads", "1",
                              "--max-loras", "3", "--max-body-mb", "1", "--announce", announce,
                              "--announce-interval", "0.2"});
    QVERIFY2(worker_->waitForStarted(10000), "grpo worker did not start");
    QByteArray out;
    const std::string url = grpo::testing::wait_for_announced_url(*worker_, "listening on ", 60, {}, &out).toStdString();
    QVERIFY2(!url.empty(), (out + worker_->readAllStandardError()).constData());
    QVERIFY2(grpo::starts_with(url, "http://127.0.0.1:") && !grpo::ends_with(url, ":0"), url.c_str());
    url_ = url;
    client_ = std::make_unique<Client>(url, kToken);
    const json models = client_->get("/v1/models").j();
    model_id_ = models["data"][0]["id"].get<std::string>();
  }

  void cleanupTestCase() {
    client_.reset();
    if (!worker_) return;
    worker_->terminate();  // SIGTERM: a clean stop
    const bool stopped = worker_->waitForFinished(30000);
    if (!stopped) worker_->kill();
    worker_->waitForFinished(5000);
    const QByteArray err = worker_->readAllStandardError();
    QVERIFY2(stopped, "grpo worker ignored SIGTERM");
    QVERIFY2(worker_->exitStatus() == QProcess::NormalExit && worker_->exitCode() == 0, err.constData());
    worker_.reset();
  }

  void deadWorkersDownloadsAreRemoved() {
    // A worker killed with SIGKILL leaves its download folder; the next worker to start removes it,
    // and only it: a pid that is gone, a folder, this user's.
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    QVERIFY(child > 0);
    int status = 0;
    QCOMPARE(::waitpid(child, &status, 0), child);  // reaped: the pid runs nothing now
    const std::filesystem::path root = tmp.path().toStdString();
    const auto dead = root / ("grpo-worker-" + std::to_string(child) + "-aBc123");
    const auto alive = root / ("grpo-worker-" + std::to_string(::getppid()) + "-aBc123");
    const auto old_style = root / "grpo-worker-aBc123";
    const auto a_file = root / ("grpo-worker-" + std::to_string(child) + "-file");
    for (const auto& d : {dead, alive, old_style}) std::filesystem::create_directories(d / "adapter");
    grpo::write_file_atomic((dead / "adapter" / "adapter_model.safetensors").string(), "x");
    grpo::write_file_atomic(a_file.string(), "not a folder");
    QCOMPARE(grpo::cluster::remove_dead_workers_downloads(root.string()), 1);
    QVERIFY(!std::filesystem::exists(dead));
    QVERIFY(std::filesystem::exists(alive) && std::filesystem::exists(old_style) && std::filesystem::exists(a_file));
    QCOMPARE(grpo::cluster::remove_dead_workers_downloads(root.string()), 0);
  }

  void healthModelsAndServerInfo() {
    HttpResult r = client_->get("/health");
    QCOMPARE(r.status, 200);
    QVERIFY(r.body.empty());
    const json m = client_->get("/v1/models").j();
    QCOMPARE(m["object"].get<std::string>(), std::string("list"));
    QCOMPARE(m["data"].size(), size_t(1));
    QCOMPARE(m["data"][0]["id"].get<std::string>(), kModel);  // vLLM's default: --model as given
    QCOMPARE(m["data"][0]["max_model_len"].get<int64_t>(), int64_t(512));
    QCOMPARE(m["data"][0]["owned_by"].get<std::string>(), std::string("vllm"));
    QVERIFY(m["data"][0]["parent"].is_null());
    const json info = client_->get("/server_info?config_format=json").j();
    QCOMPARE(info["vllm_config"]["lora_config"]["max_loras"].get<int64_t>(), int64_t(3));
    const json text = client_->get("/server_info").j();
    QVERIFY(text["vllm_config"].get<std::string>().find("lora_config=LoRAConfig(") != std::string::npos);
    // --threads 1 holds both pools to one thread: torch's, and OpenBLAS's (whose idle threads spin),
    // where this process finds OpenBLAS too (the same LibTorch, the same BLAS).
    QCOMPARE(info["system_env"]["torch_threads"].get<int>(), 1);
    QCOMPARE(info["system_env"]["blas_threads"].get<int>(), grpo::blas_threads() > 0 ? 1 : 0);
    const json st = client_->get("/grpo/status").j();
    QCOMPARE(st["name"].get<std::string>(), std::string("test-worker"));
    QCOMPARE(st["model_fingerprint"].get<std::string>().size(), size_t(16));
    QCOMPARE(client_->get("/get_world_size").j()["world_size"].get<int>(), 1);
  }

  void announcesItselfWithSignedBeacons() {
    // The trainer's side of discovery (BeaconVerifier) accepts what the worker sends.
    grpo::cluster::BeaconVerifier verifier(grpo::cluster::beacon_key(kToken));
    grpo::cluster::Beacon b;
    std::string why;
    bool got = false;
    for (int i = 0; i < 200 && !got; ++i) {  // beacons every 0.2 s; at most ~20 s
      beacons_->waitForReadyRead(100);
      while (beacons_->hasPendingDatagrams() && !got) {
        QByteArray d(static_cast<int>(beacons_->pendingDatagramSize()), 0);
        beacons_->readDatagram(d.data(), d.size());
        got = verifier.verify(d.toStdString(), static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0, b, why);
      }
    }
    QVERIFY2(got, why.c_str());
    QCOMPARE(b.name, std::string("test-worker"));
    QCOMPARE(b.url, url_);
    QCOMPARE(b.model, client_->get("/grpo/status").j()["model_fingerprint"].get<std::string>());
    QCOMPARE(b.devices, std::string("cpu"));
    // Signed with another token: refused.
    grpo::cluster::BeaconVerifier stranger(grpo::cluster::beacon_key("another-token"));
    beacons_->waitForReadyRead(2000);
    QByteArray d(static_cast<int>(std::max<qint64>(0, beacons_->pendingDatagramSize())), 0);
    if (!d.isEmpty()) {
      beacons_->readDatagram(d.data(), d.size());
      QVERIFY(!stranger.verify(d.toStdString(), static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000.0, b, why));
    }
  }

  void authIsRequiredEverywhere() {
    for (const char* path : {"/health", "/v1/models", "/grpo/status", "/nope"}) {
      HttpResult r = client_->call("GET", path, {}, "");
      QCOMPARE(r.status, 401);
      QCOMPARE(r.j()["error"]["code"].get<int>(), 401);
      QCOMPARE(client_->call("GET", path, {}, "not-the-token").status, 401);
    }
    QCOMPARE(client_->call("POST", "/v1/completions", completion_body(model_id_, 1).dump(), "").status, 401);
    QCOMPARE(client_->call("POST", "/v1/load_lora_adapter", R"({"lora_name":"x","lora_path":"y"})", "").status, 401);
  }

  // Issue 18: a body nested 100,000 levels deep (with the token) used to kill the worker the first
  // time the value was printed. It is refused with 400 before any DOM exists; the worker lives on.
  void deeplyNestedBodiesAreRefused() {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    HttpResult r = client_->call("POST", "/v1/completions", "{\"prompt\":[1],\"temperature\":" + deep + "}");
    QCOMPARE(r.status, 400);
    QVERIFY2(error_message(r).find("deeper than 64") != std::string::npos, r.body.c_str());
    r = client_->call("POST", "/v1/load_lora_adapter", "{\"lora_name\":" + deep + "}");
    QCOMPARE(r.status, 400);
    QVERIFY2(r.body.find("deeper than 64") != std::string::npos, r.body.c_str());
    // 64 levels is still a value (of the wrong type): the ordinary 400 naming the field.
    r = client_->call("POST", "/v1/completions",
                      "{\"prompt\":[1],\"temperature\":" + std::string(63, '[') + std::string(63, ']') + "}");
    QCOMPARE(r.status, 400);
    QVERIFY2(error_message(r).find("temperature") != std::string::npos, r.body.c_str());
    QCOMPARE(client_->get("/health").status, 200);
    QCOMPARE(client_->post("/v1/completions", completion_body(model_id_, 5)).status, 200);
  }

  // Issue 18: max_tokens = 2^63-1 with ignore_eos wrapped past the context check and generated
  // forever; prompts and n were bounded apart, so one request could ask for 1024 x 256 rows.
  void sizesAreBoundedAsProducts() {
    json huge = completion_body(model_id_, 9);
    huge["max_tokens"] = std::numeric_limits<int64_t>::max();
    huge["ignore_eos"] = true;
    HttpResult r = client_->post("/v1/completions", huge);
    QCOMPARE(r.status, 400);
    QVERIFY2(error_message(r).find("maximum context length is 512") != std::string::npos &&
                 error_message(r).find("more than 2^63") != std::string::npos, r.body.c_str());
    json wide = completion_body(model_id_, 9);
    wide["prompt"] = json::array({json::array({1, 2}), json::array({3, 4})});
    wide["n"] = 256;  // each factor allowed, the product (512) is not
    r = client_->post("/v1/completions", wide);
    QCOMPARE(r.status, 400);
    QVERIFY2(error_message(r).find("512 sequences") != std::string::npos, r.body.c_str());
    // Stop strings are scanned at every step: their count and length are bounded.
    json stops = completion_body(model_id_, 9);
    stops["stop"] = json::array();
    for (int i = 0; i < 33; ++i) stops["stop"].push_back("s" + std::to_string(i));
    r = client_->post("/v1/completions", stops);
    QCOMPARE(r.status, 400);
    QVERIFY2(error_message(r).find("33 stop strings") != std::string::npos, r.body.c_str());
    stops["stop"] = std::string(1025, 'x');
    r = client_->post("/v1/completions", stops);
    QCOMPARE(r.status, 400);
    QVERIFY2(error_message(r).find("1025 bytes") != std::string::npos, r.body.c_str());
    stops["stop"] = json::array({std::string(1024, 'x'), "\n\n"});  // at the limits: accepted
    QCOMPARE(client_->post("/v1/completions", stops).status, 200);
    QCOMPARE(client_->post("/v1/completions", completion_body(model_id_, 9)).status, 200);
  }

  void completionShapes() {
    const HttpResult r = client_->post("/v1/completions", completion_body(model_id_, 1234));
    QCOMPARE(r.status, 200);
    const json j = r.j();
    QCOMPARE(j["object"].get<std::string>(), std::string("text_completion"));
    QVERIFY(grpo::starts_with(j["id"].get<std::string>(), "cmpl-"));
    QCOMPARE(j["model"].get<std::string>(), model_id_);
    QCOMPARE(j["choices"].size(), size_t(4));
    int64_t completion_tokens = 0;
    for (size_t i = 0; i < 4; ++i) {
      const json& c = j["choices"][i];
      QCOMPARE(c["index"].get<size_t>(), i);
      const auto ids = c["token_ids"].get<std::vector<int64_t>>();
      QCOMPARE(c["logprobs"]["token_logprobs"].size(), ids.size());
      QCOMPARE(c["logprobs"]["tokens"].size(), ids.size());
      QCOMPARE(c["logprobs"]["top_logprobs"].size(), ids.size());
      QCOMPARE(c["prompt_token_ids"].get<std::vector<int64_t>>(), prompt_);
      QVERIFY(!ids.empty() && ids.size() <= 8);
      const std::string fr = c["finish_reason"].get<std::string>();
      if (fr == "length") QCOMPARE(ids.size(), size_t(8));
      else {
        QCOMPARE(fr, std::string("stop"));
        QVERIFY(ids.back() == 534 || ids.back() == 532);  // generation_config's eos ids
        QVERIFY(c["stop_reason"].is_null());              // EOS, not a requested stop id
      }
      for (const auto& lp : c["logprobs"]["token_logprobs"]) QVERIFY(lp.get<double>() <= 0.0);
      completion_tokens += static_cast<int64_t>(ids.size());
    }
    QCOMPARE(j["usage"]["prompt_tokens"].get<int64_t>(), int64_t(prompt_.size()));
    QCOMPARE(j["usage"]["completion_tokens"].get<int64_t>(), completion_tokens);
    QCOMPARE(j["usage"]["total_tokens"].get<int64_t>(), completion_tokens + int64_t(prompt_.size()));
    QVERIFY(j["grpo"]["adapter"].is_null());
    QCOMPARE(j["grpo"]["worker"].get<std::string>(), std::string("test-worker"));
    check_logprobs(j, base_, 0.7);

    // Without return_token_ids / logprobs those fields are null, as in vLLM.
    json plain = completion_body(model_id_, 5, 1);
    plain.erase("return_token_ids");
    plain.erase("logprobs");
    const json p = client_->post("/v1/completions", plain).j();
    QVERIFY(p["choices"][0]["token_ids"].is_null());
    QVERIFY(p["choices"][0]["logprobs"].is_null());
    QVERIFY(p["choices"][0]["text"].is_string());

    // A list of prompts: choice index = prompt * n + sample; per-prompt prompt_token_ids.
    json multi = completion_body(model_id_, 9, 2);
    const std::vector<int64_t> second = {prompt_[0]};
    multi["prompt"] = {prompt_, second};
    const json m = client_->post("/v1/completions", multi).j();
    QCOMPARE(m["choices"].size(), size_t(4));
    for (size_t i = 0; i < 4; ++i) {
      QCOMPARE(m["choices"][i]["index"].get<size_t>(), i);
      QCOMPARE(m["choices"][i]["prompt_token_ids"].get<std::vector<int64_t>>(), i < 2 ? prompt_ : second);
    }
    QCOMPARE(m["usage"]["prompt_tokens"].get<int64_t>(), int64_t(prompt_.size() + 1));

    // A requested stop id shows up as stop_reason when it ends a completion.
    const int64_t first = j["choices"][0]["token_ids"][0].get<int64_t>();
    json stop = completion_body(model_id_, 1234);
    stop["stop_token_ids"] = {first};
    const json s = client_->post("/v1/completions", stop).j();
    QCOMPARE(s["choices"][0]["token_ids"].get<std::vector<int64_t>>(), std::vector<int64_t>{first});
    QCOMPARE(s["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
    QCOMPARE(s["choices"][0]["stop_reason"].get<int64_t>(), first);
  }

  void seededRequestsAreDeterministicAndBatched() {
    const json a = client_->post("/v1/completions", completion_body(model_id_, 77)).j();
    const json b = client_->post("/v1/completions", completion_body(model_id_, 77)).j();
    const json c = client_->post("/v1/completions", completion_body(model_id_, 78)).j();
    for (size_t i = 0; i < 4; ++i) {
      QCOMPARE(a["choices"][i]["token_ids"], b["choices"][i]["token_ids"]);
      QCOMPARE(a["choices"][i]["logprobs"]["token_logprobs"], b["choices"][i]["logprobs"]["token_logprobs"]);
    }
    bool differs = false;
    for (size_t i = 0; i < 4; ++i) differs |= a["choices"][i]["token_ids"] != c["choices"][i]["token_ids"];
    QVERIFY(differs);

    // Requests that arrive together are generated together, and a request's tokens do not
    // depend on its batch: pause, queue six, resume -> one batch of six. (Control calls go
    // through a second client: QNetworkAccessManager opens at most 6 connections per host.)
    Client control(url_, kToken);
    QCOMPARE(control.call("POST", "/pause?mode=keep").j()["status"].get<std::string>(), std::string("paused"));
    std::vector<QNetworkReply*> pending;
    for (int i = 0; i < 6; ++i) pending.push_back(client_->start("POST", "/v1/completions", completion_body(model_id_, 70 + i).dump()));
    auto queued = [&] {
      const json st = control.get("/grpo/status").j();
      return st.is_object() ? st["load"]["queued"].get<int>() : -1;
    };
    for (int i = 0; i < 250 && queued() < 6; ++i) QTest::qWait(20);  // let the six arrive
    QCOMPARE(queued(), 6);
    QCOMPARE(control.get("/is_paused").j()["is_paused"].get<bool>(), true);
    for (auto* r : pending) QVERIFY(!r->isFinished());  // nothing is generated while paused
    QCOMPARE(control.call("POST", "/resume").j()["status"].get<std::string>(), std::string("resumed"));
    QCOMPARE(control.get("/is_paused").j()["is_paused"].get<bool>(), false);
    std::vector<json> results;
    for (auto* r : pending) {
      const HttpResult res = Client::finish(r);
      QCOMPARE(res.status, 200);
      results.push_back(res.j());
      QCOMPARE(results.back()["grpo"]["batch_requests"].get<int>(), 6);
    }
    const json alone = client_->post("/v1/completions", completion_body(model_id_, 70)).j();
    QCOMPARE(alone["grpo"]["batch_requests"].get<int>(), 1);
    for (size_t k = 0; k < 4; ++k) QCOMPARE(results[0]["choices"][k]["token_ids"], alone["choices"][k]["token_ids"]);
  }

  void pauseModes() {
    Client control(url_, kToken);
    auto load = [&](const char* key) {
      const json st = control.get("/grpo/status").j();
      return st.is_object() ? st["load"][key].get<int>() : -1;
    };
    QCOMPARE(control.call("POST", "/pause?mode=sideways").status, 400);
    // wait drains: requests submitted before it still run, and it answers once they are done.
    QCOMPARE(control.call("POST", "/pause?mode=keep").status, 200);
    std::vector<QNetworkReply*> before;
    for (int i = 0; i < 2; ++i) before.push_back(client_->start("POST", "/v1/completions", completion_body(model_id_, 30 + i).dump()));
    for (int i = 0; i < 250 && load("queued") < 2; ++i) QTest::qWait(20);
    QCOMPARE(load("queued"), 2);
    QCOMPARE(control.call("POST", "/pause?mode=wait").j()["status"].get<std::string>(), std::string("paused"));
    QCOMPARE(load("queued"), 0);
    QCOMPARE(load("running"), 0);
    for (auto* r : before) QCOMPARE(Client::finish(r).status, 200);
    // Still paused: a new request waits; abort answers it at once with an error clients retry.
    QNetworkReply* queued = client_->start("POST", "/v1/completions", completion_body(model_id_, 3).dump());
    for (int i = 0; i < 250 && load("queued") < 1; ++i) QTest::qWait(20);
    QCOMPARE(load("queued"), 1);
    QCOMPARE(control.call("POST", "/pause?mode=abort").status, 200);
    const HttpResult r = Client::finish(queued);
    QCOMPARE(r.status, 503);
    QVERIFY(error_message(r).find("abort") != std::string::npos);
    QCOMPARE(control.call("POST", "/resume").status, 200);
    QCOMPARE(client_->post("/v1/completions", completion_body(model_id_, 3)).status, 200);
  }

  void adapterLoadServeUnload() {
    const json load = {{"lora_name", "policy-v1"}, {"lora_path", adapter_dir_}};
    HttpResult r = client_->post("/v1/load_lora_adapter", load);
    QVERIFY2(r.status == 200, r.body.c_str());
    QCOMPARE(r.body, std::string("Success: LoRA adapter 'policy-v1' added successfully."));
    // Loaded adapters are models: id = lora_name, root = its path, parent = the base model.
    const json m = client_->get("/v1/models").j();
    QCOMPARE(m["data"].size(), size_t(2));
    QCOMPARE(m["data"][1]["id"].get<std::string>(), std::string("policy-v1"));
    QCOMPARE(m["data"][1]["root"].get<std::string>(), fs::canonical(adapter_dir_).string());
    QCOMPARE(m["data"][1]["parent"].get<std::string>(), model_id_);

    const json base = client_->post("/v1/completions", completion_body(model_id_, 4242)).j();
    const json tuned = client_->post("/v1/completions", completion_body("policy-v1", 4242)).j();
    QCOMPARE(tuned["model"].get<std::string>(), std::string("policy-v1"));
    QCOMPARE(tuned["grpo"]["adapter"].get<std::string>(), std::string("policy-v1"));
    // The weights hash is the one sha256sum wrote for adapter_model.safetensors.
    std::string want_hash;
    for (const auto& line : grpo::split(grpo::read_file(adapter_dir_ + "/SHA256SUMS"), '\n'))
      if (grpo::ends_with(line, "adapter_model.safetensors")) want_hash = line.substr(0, 64);
    QCOMPARE(tuned["grpo"]["sha256"].get<std::string>(), want_hash);
    bool differs = false;
    for (size_t i = 0; i < 4; ++i)
      differs |= base["choices"][i]["logprobs"]["token_logprobs"] != tuned["choices"][i]["logprobs"]["token_logprobs"];
    QVERIFY(differs);
    check_logprobs(tuned, tuned_, 0.7);

    // Loads and unloads do not disturb generation in flight (they run on another thread).
    {
      std::vector<QNetworkReply*> flying;
      for (int i = 0; i < 4; ++i)
        flying.push_back(client_->start("POST", "/v1/completions", completion_body("policy-v1", 500 + i).dump()));
      QCOMPARE(client_->post("/v1/load_lora_adapter", {{"lora_name", "policy-v1b"}, {"lora_path", adapter_dir_}}).status, 200);
      QCOMPARE(client_->post("/v1/unload_lora_adapter", {{"lora_name", "policy-v1b"}}).status, 200);
      for (auto* f : flying) {
        const HttpResult fr = Client::finish(f);
        QCOMPARE(fr.status, 200);
        QCOMPARE(fr.j()["grpo"]["adapter"].get<std::string>(), std::string("policy-v1"));
      }
    }

    // vLLM's statuses: a second load of the name is 400 unless load_inplace.
    r = client_->post("/v1/load_lora_adapter", load);
    QCOMPARE(r.status, 400);
    QVERIFY(error_message(r).find("has already been loaded") != std::string::npos);
    json inplace = load;
    inplace["load_inplace"] = true;
    QCOMPARE(client_->post("/v1/load_lora_adapter", inplace).status, 200);

    // Unknown model -> 404.
    r = client_->post("/v1/completions", completion_body("policy-v99", 1));
    QCOMPARE(r.status, 404);
    QVERIFY(error_message(r).find("does not exist") != std::string::npos);

    r = client_->post("/v1/unload_lora_adapter", {{"lora_name", "policy-v1"}});
    QCOMPARE(r.status, 200);
    QCOMPARE(r.body, std::string("Success: LoRA adapter 'policy-v1' removed successfully."));
    r = client_->post("/v1/unload_lora_adapter", {{"lora_name", "policy-v1"}});
    QCOMPARE(r.status, 404);
    QVERIFY(error_message(r).find("cannot be found") != std::string::npos);
    QCOMPARE(client_->get("/v1/models").j()["data"].size(), size_t(1));
    QCOMPARE(client_->post("/v1/completions", completion_body("policy-v1", 1)).status, 404);
  }

  void adapterPathsStayInsideTheBucket() {
    auto load = [&](const std::string& name, const std::string& path) {
      return client_->post("/v1/load_lora_adapter", {{"lora_name", name}, {"lora_path", path}});
    };
    // A real adapter, but outside the bucket: absolute, relative with .., and through a symlink.
    HttpResult r = load("x1", outside_dir_);
    QCOMPARE(r.status, 400);
    QVERIFY(error_message(r).find("outside") != std::string::npos);
    QCOMPARE(load("x2", "../outside/policy-x").status, 400);
    fs::create_symlink(fs::path(outside_dir_), fs::path(bucket_) / "sneaky");
    r = load("x3", bucket_ + "/sneaky");
    QCOMPARE(r.status, 400);
    QVERIFY(error_message(r).find("outside") != std::string::npos);
    QCOMPARE(load("x4", "/etc").status, 400);
    QCOMPARE(load("x5", std::string("..\0/run/adapters/policy-v1", 26)).status, 400);  // the OS would see ".."
    QCOMPARE(load("x6", "%2e%2e/outside/policy-x").status, 404);  // JSON is not URL-decoded: a plain name
    // Not there yet (a mount catching up): vLLM's "No adapter found" (404), which routers retry.
    r = load("policy-v9", bucket_ + "/run/adapters/policy-v9");
    QCOMPARE(r.status, 404);
    QVERIFY(error_message(r).find("No adapter found for") != std::string::npos);
    // A relative path inside the bucket is fine.
    r = load("rel", "run/adapters/policy-v1");
    QVERIFY2(r.status == 200, r.body.c_str());
    QCOMPARE(client_->post("/v1/unload_lora_adapter", {{"lora_name", "rel"}}).status, 200);
    QCOMPARE(load("", adapter_dir_).status, 400);
  }

  void tamperedAdapterIsRefused() {
    const std::string dir = bucket_ + "/run/adapters/policy-v2";
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(adapter_dir_)) fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
    {
      std::fstream f(dir + "/adapter_model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(-3, std::ios::end);
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x5a);
      f.seekp(-3, std::ios::end);
      f.write(&c, 1);
    }
    const HttpResult r = client_->post("/v1/load_lora_adapter", {{"lora_name", "policy-v2"}, {"lora_path", dir}});
    QCOMPARE(r.status, 400);
    QVERIFY2(error_message(r).find("SHA256SUMS") != std::string::npos, r.body.c_str());
    QVERIFY(error_message(r).find("adapter_model.safetensors") != std::string::npos);
    QCOMPARE(client_->get("/v1/models").j()["data"].size(), size_t(1));
    // Re-summed (as a new publication would be), it loads.
    QVERIFY(write_sha256sums(dir));
    QCOMPARE(client_->post("/v1/load_lora_adapter", {{"lora_name", "policy-v2"}, {"lora_path", dir}}).status, 200);
    QCOMPARE(client_->post("/v1/unload_lora_adapter", {{"lora_name", "policy-v2"}}).status, 200);
  }

  void adapterFromTheTrainersBucketUrl() {
    // A stand-in for the trainer's read-only bucket endpoint: our HttpServer, same token,
    // serving the published files (and a tampered copy under another version).
    using namespace grpo::cluster;
    HttpServerOptions o;
    o.bearer_token = kToken;
    HttpServer bucket(o);
    const std::string prefix = "/grpo/bucket/run/adapters/";
    std::atomic<int> fetched{0};
    for (const char* file : {"SHA256SUMS", "adapter_config.json", "adapter_model.safetensors"}) {
      std::string bytes = grpo::read_file(adapter_dir_ + "/" + file);
      bucket.route("GET", prefix + "policy-v1/" + file, [bytes, &fetched](const HttpRequest&, Reply r) {
        HttpResponse resp;
        resp.content_type = "application/octet-stream";
        resp.body = bytes;
        ++fetched;
        r.send(resp);
      });
      if (std::string(file) == "adapter_model.safetensors") bytes[bytes.size() - 2] ^= 0x11;
      bucket.route("GET", prefix + "policy-v3/" + file, [bytes](const HttpRequest&, Reply r) {
        HttpResponse resp;
        resp.content_type = "application/octet-stream";
        resp.body = bytes;
        r.send(resp);
      });
    }
    bucket.start();
    const std::string url = bucket.url() + prefix + "policy-v1";
    HttpResult r = client_->post("/v1/load_lora_adapter", {{"lora_name", "url-v1"}, {"lora_path", url}});
    QVERIFY2(r.status == 200, r.body.c_str());
    QCOMPARE(fetched.load(), 3);  // with the bearer token, or the stand-in would have answered 401
    const json m = client_->get("/v1/models").j();
    QCOMPARE(m["data"][1]["root"].get<std::string>(), url);
    const json tuned = client_->post("/v1/completions", completion_body("url-v1", 4242)).j();
    std::string want_hash;
    for (const auto& line : grpo::split(grpo::read_file(adapter_dir_ + "/SHA256SUMS"), '\n'))
      if (grpo::ends_with(line, "adapter_model.safetensors")) want_hash = line.substr(0, 64);
    QCOMPARE(tuned["grpo"]["sha256"].get<std::string>(), want_hash);
    check_logprobs(tuned, tuned_, 0.7);
    QCOMPARE(client_->post("/v1/unload_lora_adapter", {{"lora_name", "url-v1"}}).status, 200);
    // Not published yet -> vLLM's "No adapter found" (404); tampered in transit -> 400.
    r = client_->post("/v1/load_lora_adapter", {{"lora_name", "url-v2"}, {"lora_path", bucket.url() + prefix + "policy-v2"}});
    QCOMPARE(r.status, 404);
    QVERIFY(error_message(r).find("No adapter found for") != std::string::npos);
    r = client_->post("/v1/load_lora_adapter", {{"lora_name", "url-v3"}, {"lora_path", bucket.url() + prefix + "policy-v3"}});
    QCOMPARE(r.status, 400);
    QVERIFY2(error_message(r).find("SHA256SUMS") != std::string::npos, r.body.c_str());
    QCOMPARE(client_->get("/v1/models").j()["data"].size(), size_t(1));
  }

  void maxLorasIsEnforcedWithoutEviction() {
    for (int i = 0; i < 3; ++i)
      QCOMPARE(client_->post("/v1/load_lora_adapter", {{"lora_name", "m" + std::to_string(i)}, {"lora_path", adapter_dir_}}).status, 200);
    const HttpResult r = client_->post("/v1/load_lora_adapter", {{"lora_name", "m3"}, {"lora_path", adapter_dir_}});
    QCOMPARE(r.status, 400);
    QVERIFY(error_message(r).find("max-loras") != std::string::npos);
    for (int i = 0; i < 3; ++i)
      QCOMPARE(client_->post("/v1/unload_lora_adapter", {{"lora_name", "m" + std::to_string(i)}}).status, 200);
  }

  void badRequestsAreRefusedAndTheWorkerKeepsServing() {
    // Over --max-body-mb 1.
    HttpResult r = client_->call("POST", "/v1/completions", std::string((1 << 20) + 10, ' '));
    QCOMPARE(r.status, 413);
    QCOMPARE(r.j()["error"]["code"].get<int>(), 413);
    r = client_->call("POST", "/v1/completions", "{not json");
    QCOMPARE(r.status, 400);
    QVERIFY(error_message(r).find("JSON") != std::string::npos);
    json bad = completion_body(model_id_, 1);
    bad["prompt"] = {1, 2, 99999};
    r = client_->post("/v1/completions", bad);
    QCOMPARE(r.status, 400);
    QVERIFY(error_message(r).find("vocabulary") != std::string::npos);
    bad = completion_body(model_id_, 1);
    bad["logprobs"] = 5;
    QCOMPARE(client_->post("/v1/completions", bad).status, 400);
    bad = completion_body(model_id_, 1);
    bad["max_tokens"] = 600;
    r = client_->post("/v1/completions", bad);
    QCOMPARE(r.status, 400);
    QVERIFY(error_message(r).find("maximum context length is 512") != std::string::npos);
    bad = completion_body(model_id_, 1);
    bad["n"] = "four";
    QCOMPARE(client_->post("/v1/completions", bad).status, 400);
    QCOMPARE(client_->call("DELETE", "/v1/models").status, 405);
    QCOMPARE(client_->get("/health").status, 200);
    QCOMPARE(client_->post("/v1/completions", completion_body(model_id_, 1)).status, 200);
  }
};

QTEST_GUILESS_MAIN(TestWorkerApi)
#include "test_worker_api.moc"

// StubWorker: a test seam standing in for `grpo worker` / vLLM in router tests. A minimal HTTP/1.1
// responder on 127.0.0.1 (QTcpServer, one request per connection) that answers the routes the
// Router uses with the shapes of docs/workers.md ("Routes", "Completion request", "Completion
// response"), checks the bearer token, records what it was asked, and can be told to misbehave:
// refuse adapter loads, say "No adapter found" a few times, hang on completions, answer them with
// garbage, report the wrong adapter hash, or die (close everything) after N answers.
#pragma once

#include <QHostAddress>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTimer>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::testing {

class StubWorker {
public:
  std::string token = "stub-token";
  std::string base_model = "base-model";
  int index = 0;                         // written into every token id it "generates"
  // Misbehaviour switches.
  bool load_fails = false;               // 400 on every load
  int no_adapter_found = 0;              // answer "No adapter found" this many times first
  bool hang_completions = false;         // never answer /v1/completions
  std::string report_sha;                // adapter_sha256 to report ("" = none)
  std::string garbage;                   // answer /v1/completions with this body, HTTP 200 ("" = off)
  int die_after = -1;                    // close the server after this many completions
  // What it saw.
  std::map<std::string, std::string> loaded;  // name -> path
  std::vector<std::string> load_attempts, unloads, paths_seen;
  int completions = 0, unauthorized = 0;
  std::vector<nlohmann::json> completion_bodies;

  StubWorker() = default;
  // Sockets are the server's children: close them while the bookkeeping they update still exists.
  ~StubWorker() { kill(); }
  StubWorker(const StubWorker&) = delete;
  StubWorker& operator=(const StubWorker&) = delete;

  bool start(quint16 port = 0) {
    if (!connected_) QObject::connect(&server_, &QTcpServer::newConnection, &server_, [this] { accept(); });
    connected_ = true;
    if (!server_.listen(QHostAddress::LocalHost, port)) return false;
    port_ = server_.serverPort();
    return true;
  }
  // Like a SIGKILL: the port closes and every open connection is reset.
  void kill() {
    server_.close();
    const std::set<QTcpSocket*> open = sockets_;  // abort() emits disconnected, which edits the set
    for (auto* s : open) s->abort();
    sockets_.clear();
  }
  // Back on the same port with an empty adapter table (a fresh process).
  bool restart() {
    loaded.clear();
    return start(port_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  quint16 port() const { return port_; }

private:
  void accept() {
    while (QTcpSocket* s = server_.nextPendingConnection()) {
      sockets_.insert(s);
      auto* buf = new QByteArray;
      QObject::connect(s, &QTcpSocket::readyRead, s, [this, s, buf] {
        buf->append(s->readAll());
        const int end = buf->indexOf("\r\n\r\n");
        if (end < 0) return;
        const QByteArray head = buf->left(end);
        int length = 0;
        for (const QByteArray& line : head.split('\n'))
          if (line.toLower().startsWith("content-length:")) length = line.mid(15).trimmed().toInt();
        if (buf->size() < end + 4 + length) return;
        const QByteArray body = buf->mid(end + 4, length);
        const QList<QByteArray> first = head.split('\n').front().trimmed().split(' ');
        std::string auth;
        for (const QByteArray& line : head.split('\n'))
          if (line.toLower().startsWith("authorization:")) auth = line.mid(14).trimmed().toStdString();
        buf->clear();
        handle(s, first.value(0).toStdString(), first.value(1).toStdString(), auth, body.toStdString());
      });
      QObject::connect(s, &QTcpSocket::disconnected, s, [this, s, buf] {
        sockets_.erase(s);
        delete buf;
        s->deleteLater();
      });
    }
  }

  void reply(QTcpSocket* s, int status, const std::string& body) {
    const char* reason = status == 200 ? "OK" : status == 400 ? "Bad Request" : status == 401 ? "Unauthorized"
                                                : status == 404 ? "Not Found" : "Error";
    const std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                            "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    s->write(out.data(), static_cast<qint64>(out.size()));
    s->flush();  // on its way before a kill() can abort the socket
    s->disconnectFromHost();
  }

  void handle(QTcpSocket* s, const std::string& method, const std::string& path, const std::string& auth,
              const std::string& body) {
    paths_seen.push_back(method + " " + path);
    if (auth != "Bearer " + token) {
      ++unauthorized;
      return reply(s, 401, R"({"error":"Unauthorized"})");
    }
    const auto j = nlohmann::json::parse(body.empty() ? "{}" : body, nullptr, false);
    if (path == "/health") return reply(s, 200, "");
    if (path == "/v1/models") {
      nlohmann::json data = nlohmann::json::array();
      data.push_back({{"id", base_model}, {"object", "model"}, {"root", "/models/base"}, {"parent", nullptr},
                      {"max_model_len", 4096}});
      for (const auto& [name, p] : loaded)
        data.push_back({{"id", name}, {"object", "model"}, {"root", p}, {"parent", base_model}});
      return reply(s, 200, nlohmann::json{{"object", "list"}, {"data", data}}.dump());
    }
    if (path == "/v1/load_lora_adapter") {
      const std::string name = j.value("lora_name", ""), p = j.value("lora_path", "");
      load_attempts.push_back(name);
      if (no_adapter_found > 0) {
        --no_adapter_found;
        return reply(s, 400, nlohmann::json{{"error", {{"message", "No adapter found for " + p}}}}.dump());
      }
      if (load_fails) return reply(s, 400, R"({"error":{"message":"LoRA rank 512 is greater than max_lora_rank 64"}})");
      if (loaded.count(name))
        return reply(s, 400, nlohmann::json{{"error", {{"message", "The lora adapter '" + name + "' has already been loaded."}}}}.dump());
      loaded[name] = p;
      return reply(s, 200, "\"Success: LoRA adapter '" + name + "' added successfully.\"");
    }
    if (path == "/v1/unload_lora_adapter") {
      const std::string name = j.value("lora_name", "");
      unloads.push_back(name);
      if (!loaded.erase(name)) return reply(s, 404, R"({"error":"not loaded"})");
      return reply(s, 200, "\"Success\"");
    }
    if (path.rfind("/pause", 0) == 0) return reply(s, 200, R"({"status":"paused"})");
    if (path == "/resume") return reply(s, 200, R"({"status":"resumed"})");
    if (path == "/v1/completions") {
      completion_bodies.push_back(j);
      const std::string model = j.value("model", "");
      if (model != base_model && !loaded.count(model))
        return reply(s, 404, nlohmann::json{{"error", {{"message", "The model `" + model + "` does not exist."}}}}.dump());
      if (hang_completions) return;  // the connection stays open, unanswered
      if (!garbage.empty()) {
        ++completions;
        return reply(s, 200, garbage);
      }
      if (die_after >= 0 && completions >= die_after) {  // dead: this request gets a reset, not an answer
        s->abort();
        QTimer::singleShot(0, &server_, [this] { kill(); });
        return;
      }
      ++completions;
      const auto prompt = j.value("prompt", std::vector<int64_t>{});
      nlohmann::json choices = nlohmann::json::array();
      for (int64_t i = 0; i < j.value("n", int64_t(1)); ++i)
        choices.push_back({{"index", i}, {"text", "xy"},
                           {"logprobs", {{"text_offset", {0, 1}}, {"token_logprobs", {-0.5, -0.25}},
                                         {"tokens", {"token_id:" + std::to_string(index), "token_id:2"}},
                                         {"top_logprobs", nullptr}}},
                           {"finish_reason", "length"}, {"stop_reason", nullptr},
                           {"token_ids", {index, static_cast<int64_t>(prompt.size())}},
                           {"prompt_token_ids", prompt}, {"prompt_logprobs", nullptr}});
      nlohmann::json out = {{"id", "cmpl-stub"}, {"object", "text_completion"}, {"created", 1757}, {"model", model},
                            {"choices", choices},
                            {"usage", {{"prompt_tokens", prompt.size()}, {"completion_tokens", 2 * choices.size()},
                                       {"total_tokens", prompt.size() + 2 * choices.size()}}}};
      if (!report_sha.empty()) out["grpo"] = {{"adapter", model}, {"sha256", report_sha}};
      return reply(s, 200, out.dump());
    }
    reply(s, 404, R"({"detail":"Not Found"})");
  }

  QTcpServer server_;
  quint16 port_ = 0;
  bool connected_ = false;
  std::set<QTcpSocket*> sockets_;
};

}  // namespace grpo::testing

// Helpers for tests that drive a worker over HTTP: a blocking QNetworkAccessManager client
// with bounded waits, vLLM error messages, SHA256SUMS written by coreutils' sha256sum, and the
// trainer-side recompute of a completion's log-probs (one teacher-forced forward).
#pragma once

#include <QEventLoop>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QProcess>
#include <QTimer>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/common/files.h"
#include "core/model/causal_lm.h"

namespace worker_test {

using nlohmann::json;

struct HttpResult {
  int status = 0;  // 0: no answer (connection error or timeout)
  std::string body;
  std::string error;
  json j() const { return json::parse(body, nullptr, false); }
};

class Client {
public:
  Client(std::string base, std::string token) : base_(std::move(base)), token_(std::move(token)) {}

  // `token`: "" sends no Authorization header; default: the client's token.
  QNetworkReply* start(const std::string& method, const std::string& path, const std::string& body = {},
                       const std::optional<std::string>& token = std::nullopt) {
    const std::string t = token.value_or(token_);
    QNetworkRequest req(QUrl(QString::fromStdString(base_ + path)));
    req.setHeader(QNetworkRequest::ContentTypeHeader, "application/json");
    if (!t.empty()) req.setRawHeader("Authorization", QByteArray::fromStdString("Bearer " + t));
    req.setTransferTimeout(120000);
    const QByteArray data = QByteArray::fromStdString(body);
    if (method == "GET") return nam_.get(req);
    return nam_.sendCustomRequest(req, QByteArray::fromStdString(method), data);
  }

  static HttpResult finish(QNetworkReply* r, int timeout_ms = 120000) {
    if (!r->isFinished()) {
      QEventLoop loop;
      QTimer t;
      t.setSingleShot(true);
      QObject::connect(r, &QNetworkReply::finished, &loop, &QEventLoop::quit);
      QObject::connect(&t, &QTimer::timeout, &loop, &QEventLoop::quit);
      t.start(timeout_ms);
      loop.exec();
    }
    HttpResult out;
    if (r->isFinished()) {
      out.status = r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
      out.body = r->readAll().toStdString();
      if (r->error() != QNetworkReply::NoError && out.status == 0) out.error = r->errorString().toStdString();
    } else {
      r->abort();
      out.error = "timed out";
    }
    r->deleteLater();
    return out;
  }

  HttpResult call(const std::string& method, const std::string& path, const std::string& body = {},
                  const std::optional<std::string>& token = std::nullopt) {
    return finish(start(method, path, body, token));
  }
  HttpResult post(const std::string& path, const json& body) { return call("POST", path, body.dump()); }
  HttpResult get(const std::string& path) { return call("GET", path); }

private:
  std::string base_, token_;
  QNetworkAccessManager nam_;
};

inline std::string error_message(const HttpResult& r) {
  const json j = r.j();
  return j.is_object() && j.contains("error") ? j["error"].value("message", "") : r.body;
}

// Writes SHA256SUMS in `dir` with coreutils' sha256sum over every other file.
inline bool write_sha256sums(const std::string& dir) {
  QStringList names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "SHA256SUMS") names << QString::fromStdString(e.path().filename());
  names.sort();
  QProcess p;
  p.setWorkingDirectory(QString::fromStdString(dir));
  p.start("sha256sum", names);
  if (!p.waitForFinished(30000) || p.exitCode() != 0) return false;
  grpo::write_file_atomic(dir + "/SHA256SUMS", p.readAllStandardOutput().toStdString());
  return true;
}

// log p(token_t | prefix) under softmax(logits / T) for every completion token, recomputed with
// one teacher-forced forward of prompt + completion (what the trainer does).
inline std::vector<double> recompute_logprobs(grpo::model::CausalLM& m, const std::vector<int64_t>& prompt,
                                       const std::vector<int64_t>& completion, double temperature) {
  torch::NoGradGuard ng;
  std::vector<int64_t> ids = prompt;
  ids.insert(ids.end(), completion.begin(), completion.end());
  auto logits = m->forward(torch::tensor(ids, torch::kInt64).unsqueeze(0))[0];  // (T, V)
  auto lp = torch::log_softmax(logits.to(torch::kFloat64) / temperature, -1);
  std::vector<double> out;
  for (size_t t = 0; t < completion.size(); ++t)
    out.push_back(lp[static_cast<int64_t>(prompt.size() + t - 1)][completion[t]].item<double>());
  return out;
}

}  // namespace worker_test

#include "core/run/hub_pusher.h"

#include <chrono>
#include <filesystem>

#include <QCoreApplication>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/hub/hf_cache.h"
#include "core/hub/hub_upload.h"
#include "core/records/run_dir.h"
#include "core/run/export.h"

namespace grpo::run {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// What a person can do about a failed push, from its message.
std::string advice_for(const std::string& error, const HubPusherOptions& o, bool final) {
  std::string a;
  if (error.find("401") != std::string::npos || error.find("403") != std::string::npos ||
      error.find("token") != std::string::npos || error.find("credentials") != std::string::npos)
    a = "check that the token (HF_TOKEN, else the huggingface_hub token file) may write to " + o.repo_id + "; ";
  if (final)
    return a + "the trained adapter is safe in " + path_join(o.run_dir, "adapter") + ": push it with `grpo push " +
           path_join(o.run_dir, "adapter") + " " + o.repo_id + "`";
  return a + "training goes on; the next checkpoint pushes again, and the end of the run pushes the final adapter";
}

// Hard links (a checkpoint's files are written once and renamed into place, never changed), else
// copies: a snapshot that checkpoint rotation cannot delete.
void snapshot_folder(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::remove_all(to, ec);
  fs::create_directories(to, ec);
  check(!ec, to, "cannot create folder: " + ec.message());
  for (const auto& entry : fs::recursive_directory_iterator(from)) {
    const fs::path rel = fs::relative(entry.path(), from);
    if (entry.is_directory()) {
      fs::create_directories(fs::path(to) / rel, ec);
      check(!ec, to, "cannot create folder: " + ec.message());
      continue;
    }
    if (!entry.is_regular_file()) continue;
    fs::create_hard_link(entry.path(), fs::path(to) / rel, ec);
    if (ec) {
      ec.clear();
      fs::copy_file(entry.path(), fs::path(to) / rel, fs::copy_options::overwrite_existing, ec);
      check(!ec, entry.path().string(), "cannot copy for the Hub push: " + ec.message());
    }
  }
}

}  // namespace

HubPusher::HubPusher(HubPusherOptions o) : o_(std::move(o)), staging_(path_join(o_.run_dir, "hub-push")) {
  try {
    hub::validate_repo_id(o_.repo_id);
  } catch (const Error& e) {
    throw Error("hub_model_id", e.what(), "namespace/name, e.g. your-name/grpo-arith-lora");
  }
  const auto token = hub::hub_token();
  check(token && !token->empty(), "push_to_hub", "no Hub token: HF_TOKEN is unset and there is no token file",
        "set HF_TOKEN to a token with write access, or run `huggingface-cli login`; or set push_to_hub: false");
  check(QCoreApplication::instance() != nullptr, "push_to_hub", "the Hub client needs a Qt application object in this program");
  check(o_.attempts >= 1, "push_to_hub", "attempts must be at least 1");
  std::error_code ec;
  fs::remove_all(staging_, ec);  // a killed run's leftovers: nothing in them is waited for
  thread_ = std::thread([this] { thread_main(); });
}

HubPusher::~HubPusher() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

void HubPusher::on_checkpoint(int64_t step, const std::string& checkpoint_dir) {
  if (o_.strategy == grpo::HubStrategy::End) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    const bool in_progress = busy_ || !queue_.empty();
    std::string why;
    if (in_progress && !o_.always_push) why = "the previous push still runs (hub_always_push: false)";
    else if (queue_.size() >= o_.max_queued) why = std::to_string(queue_.size()) + " checkpoints already wait to be pushed";
    if (!why.empty()) {
      if (o_.event) o_.event({{"event", "hub_push_skipped"}, {"push_step", step}, {"repo", o_.repo_id}, {"reason", why}});
      return;
    }
  }
  Job job{step, path_join(staging_, RunFolder::checkpoint_name(step)), false};
  if (!snapshot(job, checkpoint_dir)) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
}

bool HubPusher::push_final(int64_t step, const std::string& adapter_dir) {
  Job job{step, path_join(staging_, "final"), true};
  if (!snapshot(job, adapter_dir)) return false;
  std::unique_lock<std::mutex> lock(mu_);
  // Checkpoints still waiting their turn are older than the final adapter: it supersedes them.
  while (!queue_.empty()) {
    Job old = std::move(queue_.front());
    queue_.pop_front();
    if (o_.event)
      o_.event({{"event", "hub_push_skipped"}, {"push_step", old.step}, {"repo", o_.repo_id},
                {"reason", "the final adapter is pushed instead"}});
    drop(old);
  }
  if (busy_) log_info("waiting for the push to " + o_.repo_id + " in progress before the final one");
  queue_.push_back(std::move(job));
  cv_.notify_all();
  cv_.wait(lock, [&] { return final_result_.has_value() || stopping_; });
  return final_result_.value_or(false);
}

std::string HubPusher::what_of(const Job& job) {
  return job.final ? "the final adapter" : "checkpoint " + RunFolder::checkpoint_name(job.step);
}

bool HubPusher::snapshot(const Job& job, const std::string& from) {
  try {
    snapshot_folder(from, job.snapshot);
    return true;
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> g(mu_);
    failing_ = true;
    json ev = {{"event", "hub_push_failed"}, {"push_step", job.step}, {"repo", o_.repo_id}, {"what", what_of(job)},
               {"message", e.what()}, {"advice", advice_for(e.what(), o_, job.final)}, {"attempt", 0}, {"will_retry", false}};
    if (job.final) ev["severity"] = "error";
    if (o_.event) o_.event(ev);
    drop(job);
    return false;
  }
}

void HubPusher::drop(const Job& job) {
  std::error_code ec;
  fs::remove_all(job.snapshot, ec);
}

void HubPusher::thread_main() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) {
        for (const auto& j : queue_) drop(j);
        queue_.clear();
        return;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    const bool ok = run_job(job);
    drop(job);
    {
      std::lock_guard<std::mutex> g(mu_);
      busy_ = false;
      if (job.final) final_result_ = ok;
    }
    cv_.notify_all();
  }
}

bool HubPusher::run_job(const Job& job) {
  const std::string what = what_of(job);
  if (o_.event) o_.event({{"event", "hub_push_started"}, {"push_step", job.step}, {"repo", o_.repo_id}, {"what", what}});
  for (int attempt = 1; attempt <= o_.attempts; ++attempt) {
    const auto t0 = std::chrono::steady_clock::now();
    json done = {{"event", "hub_pushed"}, {"push_step", job.step}, {"repo", o_.repo_id}, {"what", what}, {"attempt", attempt}};
    const std::string error = push_once(job, done);
    if (error.empty()) {
      done["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard<std::mutex> g(mu_);
      if (o_.event) o_.event(done);
      if (failing_ && o_.event)  // the fault convention (core/records/catalogue.h): cleared
        o_.event({{"event", "hub_push_failed_cleared"}, {"push_step", job.step}, {"repo", o_.repo_id}});
      failing_ = false;
      return true;
    }
    const bool again = attempt < o_.attempts;
    int wait_ms = o_.retry_base_ms;
    for (int i = 1; i < attempt; ++i) wait_ms = std::min(wait_ms * 4, 600000);
    {
      std::lock_guard<std::mutex> g(mu_);
      failing_ = true;
      json e = {{"event", "hub_push_failed"}, {"push_step", job.step}, {"repo", o_.repo_id}, {"what", what},
                {"message", error}, {"advice", advice_for(error, o_, job.final)}, {"attempt", attempt},
                {"attempts", o_.attempts}, {"will_retry", again}};
      if (again) e["retry_in_s"] = wait_ms / 1000.0;
      if (job.final && !again) e["severity"] = "error";
      if (o_.event) o_.event(e);
    }
    log_warn("push to " + o_.repo_id + " (" + what + ", try " + std::to_string(attempt) + "): " + error);
    if (!again) return false;
    std::unique_lock<std::mutex> lock(mu_);
    // A newer checkpoint waiting (or the final adapter) supersedes a checkpoint's retry.
    const bool superseded = cv_.wait_for(lock, std::chrono::milliseconds(wait_ms),
                                         [&] { return stopping_ || (!job.final && !queue_.empty()); });
    if (superseded) {
      if (!stopping_ && o_.event) {
        o_.event({{"event", "hub_push_skipped"}, {"push_step", job.step}, {"repo", o_.repo_id},
                  {"reason", "a newer push replaces its retry"}});
      }
      return false;
    }
  }
  return false;
}

std::string HubPusher::push_once(const Job& job, json& done) {
  const std::string out = path_join(staging_, "export-" + fs::path(job.snapshot).filename().string());
  std::error_code ec;
  try {
    fs::remove_all(out, ec);
    ExportOptions eo;
    eo.run_dir = o_.run_dir;
    eo.source_dir = job.snapshot;
    if (!job.final) eo.checkpoint_step = job.step;
    eo.out_dir = out;
    export_run(eo);
    hub::PushOptions po;
    po.folder = out;
    po.repo_id = o_.repo_id;
    po.revision = o_.revision.empty() ? "main" : o_.revision;
    po.private_repo = o_.private_repo;
    po.commit_message = job.final ? "End of training" : "Training in progress, step " + std::to_string(job.step);
    const hub::PushResult r = hub::push_folder(po);
    done["commit_url"] = r.commit_url;
    done["no_changes"] = r.no_changes;
    done["files"] = r.files;
    done["lfs_bytes_sent"] = r.lfs_bytes_sent;
    done["retries"] = r.retries;
    if (!job.final && (o_.strategy == grpo::HubStrategy::Checkpoint || o_.strategy == grpo::HubStrategy::AllCheckpoints)) {
      po.folder = job.snapshot;
      po.path_in_repo = o_.strategy == grpo::HubStrategy::Checkpoint ? "last-checkpoint" : RunFolder::checkpoint_name(job.step);
      po.commit_message += ", checkpoint";
      const hub::PushResult c = hub::push_folder(po);
      done["checkpoint_path"] = po.path_in_repo;
      done["checkpoint_commit_url"] = c.commit_url;
      done["lfs_bytes_sent"] = r.lfs_bytes_sent + c.lfs_bytes_sent;
      done["retries"] = r.retries + c.retries;
    }
  } catch (const std::exception& e) {
    fs::remove_all(out, ec);
    return e.what();
  }
  fs::remove_all(out, ec);
  return "";
}

}  // namespace grpo::run

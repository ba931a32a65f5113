// `grpo download REPO_ID`: fetch a Hub repo into the Hugging Face cache (the layout
// huggingface_hub writes; core/hub/hub_download.h), printing a progress line on stderr and the
// snapshot folder on stdout. Options only.
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <unistd.h>

#include <QCoreApplication>

#include "app/commands.h"
#include "core/common/strings.h"
#include "core/hub/hub_download.h"

namespace grpo::cli {

StderrProgress::StderrProgress(std::string label)
    : label_(std::move(label)), tty_(::isatty(STDERR_FILENO)), last_(std::chrono::steady_clock::now() - std::chrono::seconds(1)) {}

void StderrProgress::update(const std::string& text, bool end, const std::string& stage) {
  const auto now = std::chrono::steady_clock::now();
  if (stage == stage_ && !end && now - last_ < std::chrono::milliseconds(tty_ ? 200 : 2000)) return;
  last_ = now;
  stage_ = stage;
  std::cerr << (tty_ ? "\r\033[K" : "") << label_ << " " << text << (tty_ && !end ? "" : "\n") << std::flush;
}

void add_download_commands(CLI::App& app) {
  struct Args {
    std::string repo, repo_type = "model", revision = "main", cache_dir;
    std::vector<std::string> include;
    int parallel = 4;
    bool quiet = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("download", "Download a Hub repo into the Hugging Face cache (as huggingface_hub does)");
  cmd->add_option("REPO_ID", a->repo, "org/name on the Hub (HF_ENDPOINT; token: HF_TOKEN or the huggingface_hub token file)")
      ->required();
  cmd->add_option("--repo-type", a->repo_type, "model | dataset")->check(CLI::IsMember({"model", "dataset"}));
  cmd->add_option("--revision", a->revision, "Branch, tag or commit (default main)");
  cmd->add_option("--include", a->include, "Only files matching this glob (repeatable), e.g. '*.json'")
      ->allow_extra_args(false);  // one glob per --include: REPO_ID may follow
  cmd->add_option("--cache-dir", a->cache_dir, "Cache folder (default: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub)");
  cmd->add_option("--max-workers", a->parallel, "Files downloaded at once")->check(CLI::Range(1, 16));
  cmd->add_flag("--quiet", a->quiet, "No progress line");
  cmd->callback([a] {
    const auto qt = make_qt_application();

    hub::DownloadOptions o;
    o.repo_id = a->repo;
    o.repo_type = hub::parse_repo_type(a->repo_type);
    o.revision = a->revision;
    o.include = a->include;
    o.cache_dir = a->cache_dir;
    o.parallel = a->parallel;
    StderrProgress line("download");
    if (!a->quiet) {
      o.on_progress = [&line](const hub::DownloadProgress& p) {
        line.update(std::to_string(p.files_done) + "/" + std::to_string(p.files_total) + " files, " +
                        format_bytes(double(p.bytes_done)) + " / " + format_bytes(double(p.bytes_total)),
                    p.files_done == p.files_total);
      };
    }
    const hub::DownloadResult r = hub::download_snapshot(o);
    if (r.offline) std::cerr << "offline (HF_HUB_OFFLINE): using the cached snapshot " << r.commit << std::endl;
    else
      std::cerr << a->repo << " at " << r.commit << ": " << r.files << " files, " << r.fetched << " fetched ("
                << format_bytes(double(r.bytes)) << ")" << std::endl;
    std::cout << r.snapshot_dir << std::endl;
  });
}

}  // namespace grpo::cli

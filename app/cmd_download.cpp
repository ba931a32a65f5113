// `grpo download REPO_ID`: fetch a Hub repo into the Hugging Face cache (the layout
// huggingface_hub writes; core/hub/hub_download.h), printing a progress line on stderr and the
// snapshot folder on stdout. Options only.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <unistd.h>

#include <QCoreApplication>

#include "app/commands.h"
#include "core/common/strings.h"
#include "core/hub/hub_download.h"

namespace grpo::cli {

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
    const bool tty = ::isatty(STDERR_FILENO);
    auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    if (!a->quiet) {
      o.on_progress = [tty, &last](const hub::DownloadProgress& p) {
        const auto now = std::chrono::steady_clock::now();
        const bool end = p.files_done == p.files_total;
        if (!end && now - last < std::chrono::milliseconds(tty ? 200 : 2000)) return;
        last = now;
        char line[160];
        std::snprintf(line, sizeof line, "%zu/%zu files, %s / %s", p.files_done, p.files_total,
                      format_bytes(double(p.bytes_done)).c_str(), format_bytes(double(p.bytes_total)).c_str());
        std::cerr << (tty ? "\r\033[K" : "") << "download " << line << (tty && !end ? "" : "\n") << std::flush;
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

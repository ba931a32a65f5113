// `grpo push PATH REPO_ID`: upload a folder (an exported adapter or merged model) to the Hugging
// Face Hub as one commit (core/hub/hub_upload.h), printing progress on stderr and, as the last
// line on stdout, a JSON summary with the commit URL. `grpo export --push-to-hub` calls the same.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include <QCoreApplication>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/common/strings.h"
#include "core/hub/hub_upload.h"

namespace grpo::cli {

void add_hub_push_options(CLI::App* cmd, HubPushArgs& a) {
  cmd->add_flag("--private", a.private_repo, "Create the repo private (a repo that exists keeps its visibility)");
  cmd->add_option("--revision", a.revision, "Branch to commit to (created from main when missing; default main)");
  cmd->add_flag("--create-pr", a.create_pr, "Open a pull request with the commit instead of committing to the branch");
  cmd->add_option("--message,--commit-message", a.message, "Commit message (default: Upload folder with GRPO Studio)");
  cmd->add_option("--description,--commit-description", a.description, "Commit description");
  cmd->add_option("--repo-type", a.repo_type, "model | dataset")->check(CLI::IsMember({"model", "dataset"}));
}

hub::PushResult push_folder_from_cli(const std::string& folder, const HubPushArgs& a) {
  const auto qt = make_qt_application();
  hub::PushOptions o;
  o.folder = folder;
  o.repo_id = a.repo_id;
  o.repo_type = hub::parse_repo_type(a.repo_type);
  o.revision = a.revision;
  o.private_repo = a.private_repo;
  o.create_pr = a.create_pr;
  o.commit_message = a.message;
  o.commit_description = a.description;
  StderrProgress line("push");
  if (!a.quiet) {
    o.on_progress = [&line](const hub::PushProgress& p) {
      if (p.stage == "done") return;
      line.update(p.stage + ": " + std::to_string(p.files_done) + "/" + std::to_string(p.files_total) + " files, " +
                      format_bytes(double(p.bytes_done)) + " / " + format_bytes(double(p.bytes_total)),
                  p.files_done == p.files_total, p.stage);
    };
  }
  const hub::PushResult r = hub::push_folder(o);
  if (r.no_changes) {
    std::cerr << a.repo_id << ": every file is already there (" << r.files << " files); no commit made" << std::endl;
  } else {
    std::cerr << "pushed " << (r.files - r.unchanged) << " of " << r.files << " files to " << a.repo_id
              << (r.created ? " (created)" : "") << ": " << r.lfs_uploaded << " LFS objects sent ("
              << format_bytes(double(r.lfs_bytes_sent)) << (r.parts ? ", " + std::to_string(r.parts) + " parts" : "")
              << "), " << r.lfs_present << " already stored" << std::endl;
    std::cerr << (r.pr_url.empty() ? r.commit_url : r.pr_url) << std::endl;
  }
  return r;
}

void add_push_commands(CLI::App& app) {
  struct Args {
    HubPushArgs hub;
    std::string folder;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("push", "Upload a folder (an exported adapter or merged model) to a Hub repo as one commit");
  cmd->add_option("PATH", a->folder, "The folder, e.g. written by `grpo export`")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("REPO_ID", a->hub.repo_id,
                  "org/name on the Hub, created when missing (HF_ENDPOINT; token: HF_TOKEN or the huggingface_hub token file)")
      ->required();
  add_hub_push_options(cmd, a->hub);
  cmd->add_flag("--quiet", a->hub.quiet, "No progress lines");
  cmd->callback([a] {
    const hub::PushResult r = push_folder_from_cli(a->folder, a->hub);
    print_json_line(nlohmann::json{{"repo_url", r.repo_url},
                                   {"commit_url", r.commit_url},
                                   {"commit_oid", r.commit_oid},
                                   {"pr_url", r.pr_url},
                                   {"no_changes", r.no_changes},
                                   {"files", r.files},
                                   {"lfs_uploaded", r.lfs_uploaded},
                                   {"lfs_bytes_sent", r.lfs_bytes_sent}}
                        .dump());
  });
}

}  // namespace grpo::cli

// `grpo export` (a run's adapter as a PEFT folder or a merged model; its metrics as CSV) and
// `grpo runs csv|tensorboard` (a run's metrics in other formats).
#include <CLI/CLI.hpp>

#include <cctype>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/hub/hf_cache.h"
#include "core/records/metrics_export.h"
#include "core/records/run_dir.h"
#include "core/run/export.h"

namespace grpo::cli {
namespace {

// "5GB" (10^9), "2GiB" (2^30), "500MB", "64KiB", "1000" (bytes), as transformers' max_shard_size.
int64_t parse_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string unit = text.substr(i);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double n = 0;
  try {
    n = std::stod(text.substr(0, i));
  } catch (const std::exception&) {
    throw Error("--max-shard-size", "'" + text + "' is not a size", "e.g. 5GB, 500MB, 2GiB or a byte count");
  }
  double mult = 0;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "KB") mult = 1e3;
  else if (unit == "MB") mult = 1e6;
  else if (unit == "GB") mult = 1e9;
  else if (unit == "KIB") mult = 1024.0;
  else if (unit == "MIB") mult = 1024.0 * 1024;
  else if (unit == "GIB") mult = 1024.0 * 1024 * 1024;
  check(mult > 0 && n > 0, "--max-shard-size", "'" + text + "' is not a size", "e.g. 5GB, 500MB, 2GiB or a byte count");
  return static_cast<int64_t>(n * mult);
}

// The run's metrics file, as help texts name it.
constexpr const char* kMetrics = run::RunFolder::kMetricsFile;

void write_text(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") std::cout << text << std::flush;
  else write_file_atomic(path, text);
}

}  // namespace

void add_export_commands(CLI::App& app) {
  struct ExportArgs {
    run::ExportOptions o;
    int64_t version = -1, checkpoint = -1;
    std::string max_shard = "5GB", csv;
#ifdef GRPO_WITH_DOWNLOAD
    HubPushArgs push;  // --push-to-hub REPO_ID and its options
#endif
  };
  auto a = std::make_shared<ExportArgs>();
  auto* exp = app.add_subcommand("export", "Export a run's adapter (Hugging Face PEFT, or merged into the base model)");
  exp->add_option("--run", a->o.run_dir, "Run directory")->required();
  auto* v = exp->add_option("--version", a->version, "Published adapter version N (adapters/policy-vN); default: newest");
  auto* c = exp->add_option("--checkpoint", a->checkpoint, "Checkpoint step S (checkpoints/step-S) instead of a version");
  v->excludes(c);
  exp->add_option("--output,--out", a->o.out_dir,
                  "Output directory, absent or empty (default: RUN/export/<version>[-merged]); --out is an alias");
  exp->add_flag("--merged", a->o.merged, "A full model with the adapter merged into the weights (HF layout)");
  exp->add_option("--dtype", a->o.dtype, "Tensor dtype of the written files")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->default_val("f32");
  exp->add_option("--max-shard-size", a->max_shard, "Merged: largest safetensors shard, e.g. 5GB, 500MB, 2GiB")
      ->default_val("5GB");
  exp->add_option("--base-model-name", a->o.base_model_name,
                  "base_model_name_or_path to write (e.g. a Hub id; default: the run's model_name_or_path)");
  exp->add_option("--csv", a->csv,
                  std::string("Only write ") + kMetrics + " as a CSV table to this file ('-' = stdout)");
#ifdef GRPO_WITH_DOWNLOAD
  exp->add_option("--push-to-hub", a->push.repo_id,
                  "Then upload the exported folder to this Hub repo (org/name; created when missing) as one commit, "
                  "as `grpo push` does");
  add_hub_push_options(exp, a->push);
#endif
  exp->callback([a] {
    if (!a->csv.empty()) {
#ifdef GRPO_WITH_DOWNLOAD
      if (!a->push.repo_id.empty()) throw Error("--push-to-hub", "pushes an exported folder, not --csv");
#endif
      write_text(a->csv, run::metrics_csv(a->o.run_dir));
      return;
    }
    if (a->version >= 0) a->o.version = a->version;
    if (a->checkpoint >= 0) a->o.checkpoint_step = a->checkpoint;
    a->o.max_shard_bytes = parse_size(a->max_shard);
#ifdef GRPO_WITH_DOWNLOAD
    if (!a->push.repo_id.empty())  // a bad repo id or revision stops before the export is written
      as_usage_errors([&] {
        hub::validate_repo_id(a->push.repo_id);
        hub::validate_revision(a->push.revision);
      });
#endif
    const auto r = run::export_run(a->o);
    std::cerr << "exported to " << r.out_dir << std::endl;
    nlohmann::json out{{"out_dir", r.out_dir}, {"files", r.files}};
#ifdef GRPO_WITH_DOWNLOAD
    if (!a->push.repo_id.empty()) {
      const hub::PushResult p = push_folder_from_cli(r.out_dir, a->push);
      out["repo_url"] = p.repo_url;
      out["commit_url"] = p.commit_url;
      out["pr_url"] = p.pr_url;
      out["no_changes"] = p.no_changes;
    }
#endif
    print_json_line(out.dump());
  });

  auto* runs = app.add_subcommand("runs", "A run's metrics in other formats");
  runs->require_subcommand(1);
  struct RunsArgs { std::string run_dir, out, logdir; };
  auto r = std::make_shared<RunsArgs>();
  auto* csv = runs->add_subcommand("csv", std::string(kMetrics) + " as a wide CSV table (one column per metric)");
  csv->add_option("RUN_DIR", r->run_dir, "Run directory")->required();
  csv->add_option("-o,--output,--out", r->out, "Output file (default: stdout); --out is an alias");
  csv->callback([r] { write_text(r->out, run::metrics_csv(r->run_dir)); });
  auto* tb = runs->add_subcommand("tensorboard", std::string("Write a TensorBoard event file from ") + kMetrics);
  tb->add_option("RUN_DIR", r->run_dir, "Run directory")->required();
  tb->add_option("--logdir", r->logdir, "Directory for the event file (default: the run directory)");
  tb->callback([r] {
    const std::string path = run::metrics_to_tensorboard(r->run_dir, r->logdir);
    print_json_line(nlohmann::json{{"event_file", path}}.dump());
  });
}

}  // namespace grpo::cli

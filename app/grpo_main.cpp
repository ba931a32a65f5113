// grpo: the headless CLI. main() builds the command tree and reports errors; each subcommand's
// options live in cmd_*.cpp and call into core/. Every library error is a grpo::Error, caught
// once here and printed with its context and hint.
#include <CLI/CLI.hpp>

#include <csignal>
#include <iostream>

#include "app/commands.h"
#include "core/common/error.h"

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) must fail the write with EFBIG, which the engine treats as a
  // full bucket (pause, retry), instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"GRPO Studio: asynchronous GRPO fine-tuning of LoRA adapters for Hugging Face models"};
  app.set_version_flag("--version", std::string("grpo ") + GRPO_VERSION);
  app.require_subcommand(1);
  grpo::cli::add_inspect_commands(app);
  grpo::cli::add_bench_commands(app);
#ifdef GRPO_WITH_RUN
  grpo::cli::add_train_commands(app);
  grpo::cli::add_sft_commands(app);
  grpo::cli::add_run_bench_commands(app);
  grpo::cli::add_cluster_bench_commands(app);
#endif
#ifdef GRPO_WITH_EXPORT
  grpo::cli::add_export_commands(app);
#endif
#ifdef GRPO_WITH_CLUSTER
  grpo::cli::add_worker_commands(app);
#endif
#ifdef GRPO_WITH_DOWNLOAD
  grpo::cli::add_download_commands(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const grpo::Error& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}

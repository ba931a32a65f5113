// grpo: the headless CLI. main() builds the command tree and reports errors; each subcommand's
// options live in cmd_*.cpp and call into core/. Every library error is a grpo::Error, caught
// once here and printed with its context and hint. Exit statuses: see kExitStatusHelp.
#include <CLI/CLI.hpp>

#include <csignal>
#include <functional>
#include <iostream>

#include "app/commands.h"
#include "core/common/blas_kernels.h"
#include "core/common/error.h"
#include "core/common/process_setup.h"

#ifdef GRPO_WITH_RUN
namespace grpo::cli {
void add_serve_commands(CLI::App& app);  // `grpo serve RUN_DIR --listen HOST:PORT` (cmd_serve.cpp)
}
#endif

namespace grpo::cli {

const char* const kExitStatusHelp =
    "Exit status: 0 finished; 1 error; 2 usage error (a bad option, or a bad config file, key or value: "
    "CONFIG, --set); 130 / 143 stopped gracefully by SIGINT / SIGTERM before finishing (grpo train). "
    "grpo worker, a server, exits 0 when a signal stops it.";

int exit_status_for_signal(int sig) { return sig == SIGINT ? kExitSigint : sig == SIGTERM ? kExitSigterm : kExitError; }

}  // namespace grpo::cli

int main(int argc, char** argv) {
  grpo::prepare_process();  // SIGXFSZ ignored, the allocator kept from unmapping tensors
  CLI::App app{"GRPO Studio: asynchronous GRPO fine-tuning of LoRA adapters for Hugging Face models"};
  // The BLAS line is looked up only when --version is asked for, not at every start.
  app.set_version_flag("--version", std::function<std::string()>([] {
    return std::string("grpo ") + GRPO_VERSION + "\nblas: " + grpo::blas_description();
  }));
  app.require_subcommand(1);
  app.footer(grpo::cli::kExitStatusHelp);
  grpo::cli::add_inspect_commands(app);
  grpo::cli::add_bench_commands(app);
#ifdef GRPO_WITH_RUN
  grpo::cli::add_train_commands(app);
  grpo::cli::add_sft_commands(app);
  grpo::cli::add_run_bench_commands(app);
  grpo::cli::add_cluster_bench_commands(app);
  grpo::cli::add_serve_commands(app);
#endif
#ifdef GRPO_WITH_EXPORT
  grpo::cli::add_export_commands(app);
#endif
#ifdef GRPO_WITH_CLUSTER
  grpo::cli::add_worker_commands(app);
#endif
#ifdef GRPO_WITH_DOWNLOAD
  grpo::cli::add_download_commands(app);
  grpo::cli::add_push_commands(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the help, the version, or the error
    return code == 0 ? grpo::cli::kExitOk : grpo::cli::kExitUsage;
  } catch (const grpo::cli::ExitStatus& s) {
    return s.code;
  } catch (const grpo::cli::UsageError& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return grpo::cli::kExitUsage;
  } catch (const grpo::Error& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}

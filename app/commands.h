// The `grpo` subcommands. Each add_*_commands() declares its options on the CLI11 app and sets
// a callback that calls into core/; errors propagate as grpo::Error to main().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/common/error.h"
#include "core/common/resources.h"
#ifdef GRPO_WITH_DOWNLOAD
#include "core/hub/hub_upload.h"
#endif

namespace CLI { class App; class Validator; }
class QCoreApplication;

namespace grpo::cli {

// Exit statuses of every command (the footer of `grpo --help` says the same).
inline constexpr int kExitOk = 0;        // finished
inline constexpr int kExitError = 1;     // any other error (a missing file, a failed run, ...)
inline constexpr int kExitUsage = 2;     // bad options, or a bad config file / --set value
inline constexpr int kExitSigint = 130;  // stopped gracefully by SIGINT (128 + 2)
inline constexpr int kExitSigterm = 143; // stopped gracefully by SIGTERM (128 + 15)
extern const char* const kExitStatusHelp;  // that list, worded for --help

// A usage error: main() prints it like any grpo::Error and exits kExitUsage.
struct UsageError : ::grpo::Error {
  explicit UsageError(const ::grpo::Error& e) : ::grpo::Error(e) {}
};
// Thrown by a command that ended as asked but not by finishing (a graceful stop on a signal):
// main() exits with `code`.
struct ExitStatus {
  int code;
};
// Runs `f`; a grpo::Error it throws is a usage error (reading and checking config and options).
template <class F>
void as_usage_errors(F&& f) {
  try {
    f();
  } catch (const UsageError&) {
    throw;
  } catch (const ::grpo::Error& e) {
    throw UsageError(e);
  }
}
// The exit status of a run stopped by signal `sig` (SIGINT or SIGTERM).
int exit_status_for_signal(int sig);

void add_inspect_commands(CLI::App& app);
void add_bench_commands(CLI::App& app);
#ifdef GRPO_WITH_RUN
void add_train_commands(CLI::App& app);
void add_sft_commands(CLI::App& app);
// After add_bench_commands: adds `bench async` and `bench weight-sync`.
void add_run_bench_commands(CLI::App& app);
// After add_bench_commands: `bench cluster` and `bench soak` (cmd_bench_cluster.cpp).
void add_cluster_bench_commands(CLI::App& app);
// resources_dir(): core/common/resources.h ($GRPO_RESOURCES, the installed share dir, or the
// source tree's resources/), found from grpo::cli by ordinary lookup.
#endif
#ifdef GRPO_WITH_EXPORT
void add_export_commands(CLI::App& app);    // grpo export (cmd_export.cpp)
#endif
#ifdef GRPO_WITH_CLUSTER
void add_worker_commands(CLI::App& app);    // grpo worker (cmd_worker.cpp)
void add_workers_commands(CLI::App& app);  // grpo workers launch|cancel|list (cmd_worker.cpp)
#endif
#ifdef GRPO_WITH_DOWNLOAD
void add_download_commands(CLI::App& app);  // grpo download (cmd_download.cpp)
void add_push_commands(CLI::App& app);      // grpo push (cmd_push.cpp)
// The options of a push, shared by `grpo push` and `grpo export --push-to-hub`.
struct HubPushArgs {
  std::string repo_id, repo_type = "model", revision = "main", message, description;
  bool private_repo = false, create_pr = false, quiet = false;
};
// --private, --revision, --create-pr, --message, --description, --repo-type.
void add_hub_push_options(CLI::App* cmd, HubPushArgs& a);
// Pushes `folder` (core/hub/hub_upload.h) with progress and the commit URL on stderr.
hub::PushResult push_folder_from_cli(const std::string& folder, const HubPushArgs& a);
// A progress line on stderr for the Hub commands: redrawn in place on a terminal at most every
// 200 ms, else one line every 2 s. A line that ends a stage (`end`), or the first of a new `stage`,
// always prints, and ends with a newline.
class StderrProgress {
public:
  explicit StderrProgress(std::string label);
  void update(const std::string& text, bool end, const std::string& stage = {});

private:
  std::string label_, stage_;
  bool tty_;
  std::chrono::steady_clock::time_point last_;
};
#endif

// "1,2,3" -> {1, 2, 3}; errors name the option.
std::vector<int64_t> parse_id_list(const std::string& text, const std::string& option);
// For --model style options: a value that is an existing file or folder stays as given; anything
// else is read as a Hub repo id and becomes its snapshot folder in the Hugging Face cache at
// `revision` (core/hub/hf_cache.h), or fails saying which cache was searched.
CLI::Validator model_path_transform(const std::string& revision = "main");
// Prints a JSON document as the last line of output (what scripts read).
void print_json_line(const std::string& json);

// The application object that Qt's event loops (servers, routers, downloads, child processes) want,
// for a command that runs them; null when one exists already (the desktop app, a test). Keep it
// alive for as long as they run. Only in builds with Qt (app/qt_app.cpp).
std::unique_ptr<QCoreApplication> make_qt_application();

// For a command that serves until told to stop (grpo worker, grpo serve): SIGINT and SIGTERM only
// set a flag (install first, before the server starts), and the main thread waits on it.
void install_stop_signals();  // SIGINT, SIGTERM
void install_stop_signal(int signal);  // one more signal that stops (grpo worker --join: SIGUSR1)
void wait_for_stop_signal();
void request_stop();  // what a stop signal does, from the program itself (grpo worker --join-give-up)

}  // namespace grpo::cli

// StepLogger: what every training loop records of a step, written once for all of them: a few
// sampled completions into the run's samples file, the step's metrics line (TRL's names; the
// record RunEndpoint, `grpo status` and the app read), and the TensorBoard event file beside it.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/records/engine_types.h"
#include "core/records/run_dir.h"
#include "core/records/tensorboard.h"

namespace grpo::run {

class StepLogger {
public:
  // Runs one write into the run directory; `what` names it. The engine passes its bucket retry
  // (a full disk pauses the run until the write succeeds); by default the write just runs.
  using WriteGuard = std::function<void(const std::string& what, const std::function<void()>& write)>;
  explicit StepLogger(RunDirectory& dir, WriteGuard guard = {});

  // The metrics record of a step: {"step", "time", "policy_version", "verdict" (when set),
  // <metric>: number, or null when not finite}.
  static nlohmann::json metrics_record(const StepReport& report);

  // The step's samples, then its metrics line, then TensorBoard (which never throws: event files
  // are a convenience, so a failure there logs one warning and turns them off).
  void log(const StepReport& report);

private:
  RunDirectory& dir_;
  WriteGuard guard_;
  TensorBoardWriter tensorboard_;
};

}  // namespace grpo::run

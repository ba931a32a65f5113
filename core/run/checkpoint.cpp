#include "core/run/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <unistd.h>

#include <torch/cuda.h>
#include <torch/serialize.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/json_limits.h"
#include "core/common/log.h"
#include "core/common/strings.h"
#include "core/grpo/optimizer.h"
#include "core/model/causal_lm.h"
#include "core/model/peft_io.h"
#include "core/model/rng_state.h"

namespace fs = std::filesystem;

namespace grpo::run {
namespace {

// The global CPU generator (LoRA dropout, random init) as a tensor, and back; on a machine with
// CUDA also every GPU's default generator (dropout masks of CUDA tensors), as torch.cuda's
// get_rng_state_all(), in rng_cuda.pt.
using model::generator_state;
using model::set_generator_state;

// state.json holds the resolved config and a data cursor: small.
constexpr size_t kMaxStateBytes = size_t(16) << 20;

c10::Device cuda_device(int64_t i) { return c10::Device(c10::kCUDA, c10::DeviceIndex(i)); }

void save_rng(const std::string& path, const std::string& cuda_path) {
  std::ostringstream bytes;  // checked write + fsync, as the optimizer's (Optimizer::save)
  torch::save(generator_state(torch::kCPU), bytes);
  write_file_atomic(path, bytes.str());
  if (!torch::cuda::is_available()) return;
  std::vector<torch::Tensor> states;
  for (int64_t i = 0; i < int64_t(torch::cuda::device_count()); ++i)
    states.push_back(generator_state(cuda_device(i)));
  std::ostringstream cuda_bytes;
  torch::save(states, cuda_bytes);
  write_file_atomic(cuda_path, cuda_bytes.str());
}

void load_rng(const std::string& path, const std::string& cuda_path) {
  torch::Tensor state;
  torch::load(state, path);
  set_generator_state(torch::kCPU, state);
  if (!file_exists(cuda_path)) return;
  std::vector<torch::Tensor> states;
  torch::load(states, cuda_path);
  const int64_t gpus = torch::cuda::is_available() ? int64_t(torch::cuda::device_count()) : 0;
  if (gpus != int64_t(states.size())) {
    log_warn(cuda_path + ": saved the random state of " + std::to_string(states.size()) + " GPU(s), this machine has " +
             std::to_string(gpus) + "; GPU dropout masks after the resume will differ from an uninterrupted run");
    return;
  }
  for (int64_t i = 0; i < gpus; ++i) set_generator_state(cuda_device(i), states[size_t(i)]);
}

}  // namespace

nlohmann::json CheckpointState::to_json() const {
  return {{"step", step}, {"policy_version", policy_version}, {"data_cursor", data_cursor},
          {"next_group_id", next_group_id}, {"config", config}, {"trainer", trainer},
          {"format", "grpo-studio-checkpoint-1"}};
}

CheckpointState CheckpointState::from_json(const nlohmann::json& j, const std::string& context) {
  CheckpointState s;
  try {
    s.step = j.at("step").get<int64_t>();
    s.policy_version = j.at("policy_version").get<int64_t>();
    s.data_cursor = j.at("data_cursor");
    s.next_group_id = j.value("next_group_id", int64_t(0));
    s.config = j.at("config");
    s.trainer = j.value("trainer", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    throw Error(context, std::string("bad checkpoint state: ") + e.what());
  }
  return s;
}

std::string save_checkpoint(RunDirectory& dir, const model::CausalLMImpl& model, const grpo::Optimizer& optimizer,
                            const CheckpointState& state, int64_t keep) {
  const std::string tmp = dir.checkpoint_temporary(state.step);
  try {
    model::save_adapter(model, tmp);
    optimizer.save(path_join(tmp, "optimizer.pt"));
    save_rng(path_join(tmp, "rng.pt"), path_join(tmp, "rng_cuda.pt"));
    write_file_atomic(path_join(tmp, "state.json"), state.to_json().dump(2) + "\n");
    write_file_atomic(path_join(tmp, io::kSha256SumsFile), sha256sums(tmp));
  } catch (const fs::filesystem_error& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw Error(dir.checkpoint_dir(state.step), std::string("checkpoint failed: ") + e.code().message());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  return dir.commit_checkpoint(state.step, tmp, keep);
}

std::optional<LoadedCheckpoint> find_latest_checkpoint(const std::string& run_dir) {
  const RunFolder folder(run_dir);
  const auto steps = folder.checkpoint_steps();
  std::vector<std::string> skipped;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::string d = folder.checkpoint_dir(*it);
    auto bad = verify_sha256sums(d);
    if (!bad.empty()) {
      skipped.push_back(d + ": " + join(bad, ", ") + " missing or not matching SHA256SUMS");
      log_warn("checkpoint " + d + " is torn or corrupt (" + join(bad, ", ") + "); trying an older one");
      continue;
    }
    try {
      const std::string state_file = path_join(d, "state.json");
      auto state = CheckpointState::from_json(parse_json_bounded(read_file(state_file, kMaxStateBytes), state_file), d);
      return LoadedCheckpoint{d, state, skipped};
    } catch (const std::exception& e) {
      skipped.push_back(d + ": " + e.what());
      log_warn("checkpoint " + d + " unreadable (" + e.what() + "); trying an older one");
    }
  }
  return std::nullopt;
}

void restore_checkpoint(const LoadedCheckpoint& ckpt, model::CausalLMImpl& model, grpo::Optimizer& optimizer) {
  model::load_adapter_weights(model, ckpt.dir);
  optimizer.load(path_join(ckpt.dir, "optimizer.pt"));
  if (file_exists(path_join(ckpt.dir, "rng.pt"))) load_rng(path_join(ckpt.dir, "rng.pt"), path_join(ckpt.dir, "rng_cuda.pt"));
}


}  // namespace grpo::run

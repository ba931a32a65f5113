#include "core/run/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <unistd.h>

#include <torch/cuda.h>
#include <torch/serialize.h>

#include "core/common/error.h"
#include "core/common/files.h"
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

std::vector<std::pair<int64_t, std::string>> checkpoint_dirs(const std::string& run_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path_join(run_dir, "checkpoints"), ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !starts_with(name, "step-")) continue;
    const std::string num = name.substr(5);
    if (num.empty() || !std::all_of(num.begin(), num.end(), ::isdigit)) continue;
    out.emplace_back(std::stoll(num), e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

nlohmann::json CheckpointState::to_json() const {
  return {{"step", step}, {"policy_version", policy_version}, {"data_cursor", data_cursor},
          {"next_group_id", next_group_id}, {"config", config}, {"format", "grpo-studio-checkpoint-1"}};
}

CheckpointState CheckpointState::from_json(const nlohmann::json& j, const std::string& context) {
  CheckpointState s;
  try {
    s.step = j.at("step").get<int64_t>();
    s.policy_version = j.at("policy_version").get<int64_t>();
    s.data_cursor = j.at("data_cursor");
    s.next_group_id = j.value("next_group_id", int64_t(0));
    s.config = j.at("config");
  } catch (const nlohmann::json::exception& e) {
    throw Error(context, std::string("bad checkpoint state: ") + e.what());
  }
  return s;
}

std::string save_checkpoint(RunDirectory& dir, const model::CausalLMImpl& model, const grpo::Optimizer& optimizer,
                            const CheckpointState& state, int64_t keep) {
  const std::string final_dir = dir.path("checkpoints/step-" + std::to_string(state.step));
  const std::string tmp = dir.path("checkpoints/.tmp-step-" + std::to_string(state.step) + "-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw Error(tmp, "cannot create checkpoint directory: " + ec.message());
  try {
    model::save_adapter(model, tmp);
    optimizer.save(path_join(tmp, "optimizer.pt"));
    save_rng(path_join(tmp, "rng.pt"), path_join(tmp, "rng_cuda.pt"));
    write_file_atomic(path_join(tmp, "state.json"), state.to_json().dump(2) + "\n");
    write_file_atomic(path_join(tmp, "SHA256SUMS"), sha256sums(tmp));
    fs::remove_all(final_dir, ec);  // a re-run of the same step after a resume replaces it
    fs::rename(tmp, final_dir);
    fsync_directory(fs::path(final_dir).parent_path().string());  // the rename survives a power cut
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw Error(final_dir, std::string("checkpoint failed: ") + e.code().message());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  auto all = checkpoint_dirs(dir.root());
  for (size_t i = 0; keep > 0 && i + static_cast<size_t>(keep) < all.size(); ++i) fs::remove_all(all[i].second, ec);
  return final_dir;
}

std::optional<LoadedCheckpoint> find_latest_checkpoint(const std::string& run_dir) {
  auto all = checkpoint_dirs(run_dir);
  std::vector<std::string> skipped;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::string& d = it->second;
    auto bad = verify_sha256sums(d);
    if (!bad.empty()) {
      skipped.push_back(d + ": " + join(bad, ", ") + " missing or not matching SHA256SUMS");
      log_warn("checkpoint " + d + " is torn or corrupt (" + join(bad, ", ") + "); trying an older one");
      continue;
    }
    try {
      auto state = CheckpointState::from_json(nlohmann::json::parse(read_file(path_join(d, "state.json"))), d);
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

int64_t truncate_metrics(const std::string& run_dir, int64_t step) {
  const std::string p = path_join(run_dir, "metrics.jsonl");
  if (!file_exists(p)) return 0;
  std::string kept;
  int64_t n = 0;
  for (const auto& line : split(read_file(p), '\n')) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step")) continue;  // a torn last line is dropped
    if (j["step"].get<int64_t>() > step) continue;
    kept += line + "\n";
    ++n;
  }
  write_file_atomic(p, kept);
  return n;
}

}  // namespace grpo::run

#include "core/grpo/optimizer.h"

#include <cmath>
#include <sstream>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/grpo/choices.h"

namespace grpo::grpo {

double scheduled_lr(double base_lr, const std::string& type, int64_t step, int64_t total_steps,
                    double warmup_ratio) {
  const int64_t warmup = static_cast<int64_t>(std::ceil(warmup_ratio * static_cast<double>(total_steps)));
  if (step < warmup) return base_lr * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
  const LrSchedule schedule = kLrSchedules.parse(type, "lr_scheduler_type");
  if (schedule == LrSchedule::Constant) return base_lr;
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup));
  const double progress = static_cast<double>(step - warmup) / span;
  if (schedule == LrSchedule::Linear) return base_lr * std::max(0.0, 1.0 - progress);
  return base_lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));  // cosine
}

Optimizer::Optimizer(std::vector<torch::Tensor> params, OptimizerConfig cfg)
    : params_(std::move(params)), cfg_(std::move(cfg)) {
  check(!params_.empty(), "optimizer", "no trainable parameters", "is the LoRA adapter attached?");
  auto opts = torch::optim::AdamWOptions(cfg_.learning_rate)
                  .betas({cfg_.beta1, cfg_.beta2})
                  .eps(cfg_.eps)
                  .weight_decay(cfg_.weight_decay);
  adam_ = std::make_unique<torch::optim::AdamW>(params_, opts);
  lr_ = scheduled_lr(cfg_.learning_rate, cfg_.lr_scheduler_type, 0, cfg_.total_steps, cfg_.warmup_ratio);
}

Optimizer::~Optimizer() = default;

double Optimizer::step() {
  // Global L2 norm over all gradients, as torch.nn.utils.clip_grad_norm_ computes it.
  double norm = 0.0;
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> norms;
    for (const auto& p : params_)
      if (p.grad().defined()) norms.push_back(p.grad().detach().to(torch::kFloat32).norm(2));
    if (!norms.empty()) norm = torch::stack(norms).norm(2).item<double>();
    if (cfg_.max_grad_norm > 0 && std::isfinite(norm) && norm > cfg_.max_grad_norm) {
      const double scale = cfg_.max_grad_norm / (norm + 1e-6);
      for (auto& p : params_)
        if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
  lr_ = scheduled_lr(cfg_.learning_rate, cfg_.lr_scheduler_type, step_, cfg_.total_steps, cfg_.warmup_ratio);
  for (auto& group : adam_->param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr_);
  if (std::isfinite(norm)) adam_->step();  // a non-finite gradient skips the update, like AMP
  adam_->zero_grad();
  ++step_;
  return norm;
}

void Optimizer::save(const std::string& path) const {
  // Into memory, then one checked write + fsync: LibTorch's own file writer neither syncs nor
  // reports an error at close, and SHA256SUMS would then bless whatever reached the disk.
  torch::serialize::OutputArchive archive;
  adam_->save(archive);
  archive.write("grpo_step", torch::tensor(step_, torch::kInt64));
  std::ostringstream bytes;
  archive.save_to(bytes);
  write_file_atomic(path, bytes.str());
}

void Optimizer::load(const std::string& path) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
    adam_->load(archive);
    torch::Tensor s;
    archive.read("grpo_step", s);
    step_ = s.item<int64_t>();
  } catch (const c10::Error& e) {
    throw Error(path, std::string("cannot load optimizer state: ") + e.what_without_backtrace(),
                "is the checkpoint complete and from the same adapter shape?");
  }
}

}  // namespace grpo::grpo

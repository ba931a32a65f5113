// LoraConfig helpers: scaling, target resolution, validation.
#include "core/model/lora_config.h"

#include <algorithm>
#include <cmath>

#include "core/common/error.h"
#include "core/common/strings.h"

namespace grpo::model {

const std::vector<std::string>& projection_names() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",  "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

double LoraConfig::scaling() const {
  return use_rslora ? lora_alpha / std::sqrt(double(r)) : lora_alpha / double(r);
}

static bool is_all_linear(const std::vector<std::string>& t) {
  return t.size() == 1 && t[0] == "all-linear";
}

bool LoraConfig::targets(const std::string& module) const {
  if (is_all_linear(target_modules)) {
    const auto& p = projection_names();
    return std::find(p.begin(), p.end(), module) != p.end();
  }
  return std::find(target_modules.begin(), target_modules.end(), module) != target_modules.end();
}

std::vector<std::string> LoraConfig::resolved_targets() const {
  std::vector<std::string> out;
  for (const auto& p : projection_names())
    if (targets(p)) out.push_back(p);
  std::sort(out.begin(), out.end());
  return out;
}

void LoraConfig::validate(const std::string& context) const {
  check(r > 0, context, "r: " + std::to_string(r) + " must be a positive integer",
        "typical ranks are 8, 16, 32, 64");
  check(lora_alpha > 0, context, "lora_alpha: must be positive");
  check(lora_dropout >= 0.0 && lora_dropout < 1.0, context,
        "lora_dropout: " + std::to_string(lora_dropout) + " must be in [0, 1)");
  check(!target_modules.empty(), context, "target_modules: empty",
        "use \"all-linear\" or a list of " + join(projection_names(), ", "));
  if (is_all_linear(target_modules)) return;
  for (const auto& m : target_modules) {
    const auto& p = projection_names();
    if (std::find(p.begin(), p.end(), m) != p.end()) continue;
    std::string near = nearest_name(m, p);
    throw Error(context, "target_modules: unsupported module '" + m + "'",
                near.empty() ? "supported: all-linear, " + join(p, ", ")
                             : "did you mean '" + near + "'?");
  }
}

}  // namespace grpo::model

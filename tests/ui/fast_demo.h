// The UI tests' live run: the demo preset made small and fast, in a run directory of the test's.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <QString>
#include <QLineEdit>
#include <QtTest>

#include "ui/setup_page.h"

namespace grpo::testing {

// A small, fast demo run: the demo preset with few, short completions per step.
inline void configure_fast_demo(::grpo::ui::SetupPage* s, const QString& runDir) {
  s->loadPreset("demo");
  const std::vector<std::pair<std::string, QString>> values = {
      {"num_generations", "4"}, {"prompts_per_step", "2"}, {"max_completion_length", "4"}, {"max_steps", "400"},
      {"eval_steps", "0"},      {"save_steps", "3"},       {"queue_maxsize", "32"},       {"lr_scheduler_type", "constant"},
      {"warmup_ratio", "0"},    {"learning_rate", "0.001"}, {"weight_sync_steps", "2"},   {"max_staleness", "2"},
      {"r", "4"},               {"lora_alpha", "8"}};
  for (const auto& [k, v] : values) {
    QVERIFY2(s->field(k), k.c_str());
    s->field(k)->setText(v);
  }
  s->setRunDirectory(runDir);
}

}  // namespace grpo::testing

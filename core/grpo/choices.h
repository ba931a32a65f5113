// The closed sets of values a config key may take (loss_type, importance_sampling_level,
// scale_rewards, lr_scheduler_type, SFT's save_format and save_dtype), each listed once as an
// enumeration and its names. The key
// table's row takes its allowed values from here (one_of(kLossTypes.names())), and the code that
// acts on a value parses it with the same table, so a choice is never listed twice
// (docs/ARCHITECTURE.md, "The config"). No torch, no Qt.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/error.h"

namespace grpo::grpo {

template <class E>
struct ChoiceName {
  E value;
  std::string_view name;
  bool alias = false;  // read as `value`, never written or offered (TRL's true/false for scale_rewards)
};

template <class E, size_t N>
struct Choices {
  std::string_view key;  // the config key, for errors
  std::array<ChoiceName<E>, N> entries;

  // The names a config may hold, in order, aliases left out: what the key's row allows.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : entries)
      if (!e.alias) out.emplace_back(e.name);
    return out;
  }
  std::optional<E> find(std::string_view s) const {
    for (const auto& e : entries)
      if (e.name == s) return e.value;
    return std::nullopt;
  }
  // The value named `s`; else throws naming `context`, the key, the value and the allowed names.
  E parse(const std::string& s, const std::string& context) const {
    if (auto v = find(s)) return *v;
    std::string allowed;
    for (const auto& n : names()) allowed += (allowed.empty() ? "" : ", ") + n;
    throw Error(context, std::string(key) + " '" + s + "' is not one of " + allowed);
  }
  const char* name(E v) const {
    for (const auto& e : entries)
      if (e.value == v && !e.alias) return e.name.data();
    return "?";
  }
};

// GRPO's policy loss and its normalisation, TRL's loss_type (docs/formulas.md, "Clipped
// surrogate" through "Loss aggregation").
enum class LossType { GRPO, BNPO, DrGRPO, DAPO, CISPO, SAPO, LUSPO, VESPO };
inline constexpr Choices<LossType, 8> kLossTypes{"loss_type",
                                                {{{LossType::GRPO, "grpo"},
                                                  {LossType::BNPO, "bnpo"},
                                                  {LossType::DrGRPO, "dr_grpo"},
                                                  {LossType::DAPO, "dapo"},
                                                  {LossType::CISPO, "cispo"},
                                                  {LossType::SAPO, "sapo"},
                                                  {LossType::LUSPO, "luspo"},
                                                  {LossType::VESPO, "vespo"}}}};

// What the importance ratio is taken over, TRL's importance_sampling_level (docs/formulas.md,
// "Importance ratio"): each token, the length-normalised sequence (GSPO), or GSPO-token (the
// sequence ratio's value with each token's own gradient).
enum class ImportanceSamplingLevel { Token, Sequence, SequenceToken };
inline constexpr Choices<ImportanceSamplingLevel, 3> kImportanceSamplingLevels{
    "importance_sampling_level",
    {{{ImportanceSamplingLevel::Token, "token"},
      {ImportanceSamplingLevel::Sequence, "sequence"},
      {ImportanceSamplingLevel::SequenceToken, "sequence_token"}}}};

// How the gap between the trainer's proximal policy and the sampler is corrected when
// vllm_importance_sampling_correction is on (TRL's vllm_importance_sampling_mode; docs/formulas.md,
// "Off-policy correction"): a per-token or per-sequence ratio, truncated into [clip_min, clip_max] or
// zeroed outside it.
enum class IsCorrectionMode { TokenTruncate, TokenMask, SequenceTruncate, SequenceMask };
inline constexpr Choices<IsCorrectionMode, 4> kIsCorrectionModes{
    "vllm_importance_sampling_mode",
    {{{IsCorrectionMode::TokenTruncate, "token_truncate"},
      {IsCorrectionMode::TokenMask, "token_mask"},
      {IsCorrectionMode::SequenceTruncate, "sequence_truncate"},
      {IsCorrectionMode::SequenceMask, "sequence_mask"}}}};

// The loss_type x importance_sampling_level pairs TRL refuses, with its reason; nullptr where TRL
// accepts the pair. TRL's GRPOTrainer has token and sequence levels for every loss; GSPO-token
// lives in its experimental GSPO-token trainer, whose loss knows grpo, bnpo, dr_grpo and dapo only
// and raises "Unknown loss type" for the others.
inline const char* refused_loss_level(LossType t, ImportanceSamplingLevel l) {
  if (l != ImportanceSamplingLevel::SequenceToken) return nullptr;
  switch (t) {
    case LossType::GRPO: case LossType::BNPO: case LossType::DrGRPO: case LossType::DAPO: return nullptr;
    default:
      return "importance_sampling_level \"sequence_token\" (GSPO-token) takes loss_type grpo, bnpo, dr_grpo or dapo "
             "only: TRL has it only in its experimental GSPO-token trainer, whose loss refuses every other loss_type "
             "(\"Unknown loss type\")";
  }
}

// What advantages are divided by (docs/formulas.md, "Group advantages").
enum class ScaleRewards { Group, Batch, None };
inline constexpr Choices<ScaleRewards, 5> kScaleRewards{"scale_rewards",
                                                       {{{ScaleRewards::Group, "group"},
                                                         {ScaleRewards::Batch, "batch"},
                                                         {ScaleRewards::None, "none"},
                                                         {ScaleRewards::Group, "true", true},
                                                         {ScaleRewards::None, "false", true}}}};

// How several reward functions become one advantage (TRL's multi_objective_aggregation;
// docs/formulas.md, "Group advantages"): sum then normalise, or normalise each then sum (GDPO).
enum class MultiObjective { SumThenNormalize, NormalizeThenSum };
inline constexpr Choices<MultiObjective, 2> kMultiObjective{
    "multi_objective_aggregation",
    {{{MultiObjective::SumThenNormalize, "sum_then_normalize"}, {MultiObjective::NormalizeThenSum, "normalize_then_sum"}}}};

// The learning rate after warmup (core/grpo/optimizer.h).
enum class LrSchedule { Constant, Linear, Cosine };
inline constexpr Choices<LrSchedule, 3> kLrSchedules{
    "lr_scheduler_type", {{{LrSchedule::Constant, "constant"}, {LrSchedule::Linear, "linear"}, {LrSchedule::Cosine, "cosine"}}}};

// SFT: what a run saves, and in which dtype a saved checkpoint is stored.
enum class SaveFormat { Auto, Checkpoint, Adapter };
inline constexpr Choices<SaveFormat, 3> kSaveFormats{
    "save_format", {{{SaveFormat::Auto, "auto"}, {SaveFormat::Checkpoint, "checkpoint"}, {SaveFormat::Adapter, "adapter"}}}};
enum class SaveDtype { Float32, BFloat16, Float16 };
inline constexpr Choices<SaveDtype, 3> kSaveDtypes{
    "save_dtype", {{{SaveDtype::Float32, "float32"}, {SaveDtype::BFloat16, "bfloat16"}, {SaveDtype::Float16, "float16"}}}};

// When a run pushes to the Hub (TRL's hub_strategy; docs/hub.md, "Pushing while training").
enum class HubStrategy { End, EverySave, Checkpoint, AllCheckpoints };
inline constexpr Choices<HubStrategy, 4> kHubStrategies{"hub_strategy",
                                                       {{{HubStrategy::End, "end"},
                                                         {HubStrategy::EverySave, "every_save"},
                                                         {HubStrategy::Checkpoint, "checkpoint"},
                                                         {HubStrategy::AllCheckpoints, "all_checkpoints"}}}};

}  // namespace grpo::grpo

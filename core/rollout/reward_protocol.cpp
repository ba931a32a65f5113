// The external reward's reply framing and parsing (see the header).
#include "core/common/json_limits.h"
#include "core/rollout/reward_protocol.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace grpo::rollout {

namespace {

bool is_blank(std::string_view s) { return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos; }

std::string shown(std::string_view line) {
  return line.size() > 200 ? std::string(line.substr(0, 200)) + "..." : std::string(line);
}

}  // namespace

bool ReplyFramer::append(std::string_view bytes) {
  if (!flood_.empty()) return false;
  received_ += bytes.size();
  if (received_ > kMaxReplyBytes) {
    flood_ = "more than " + std::to_string(kMaxReplyBytes >> 20) + " MiB of output for one sample";
    return false;
  }
  buffer_.append(bytes);
  const size_t nl = buffer_.rfind('\n');
  const size_t partial = nl == std::string::npos ? buffer_.size() - head_ : buffer_.size() - nl - 1;
  if (partial > kMaxReplyLine) {
    flood_ = "a line longer than " + std::to_string(kMaxReplyLine >> 20) + " MiB";
    return false;
  }
  return true;
}

std::optional<std::string> ReplyFramer::next_line() {
  for (;;) {
    const size_t nl = buffer_.find('\n', head_);
    if (nl == std::string::npos) {
      buffer_.erase(0, head_);
      head_ = 0;
      return std::nullopt;
    }
    std::string_view line(buffer_.data() + head_, nl - head_);
    head_ = nl + 1;
    if (is_blank(line)) continue;
    if (line.back() == '\r') line.remove_suffix(1);
    std::string out(line);
    if (head_ > buffer_.size() / 2) {  // compact now and then, so blank-line floods stay linear
      buffer_.erase(0, head_);
      head_ = 0;
    }
    return out;
  }
}

bool ReplyFramer::has_pending_output() const {
  return !is_blank(std::string_view(buffer_).substr(head_));
}

// One reply line as JSON, or a discarded value: malformed JSON, invalid UTF-8 and out-of-range
// numbers never throw out of here.
static nlohmann::json parse_reply_json(std::string_view line) {
  if (json_depth(line) > kMaxJsonDepth) return nlohmann::json::value_t::discarded;  // never built, never printed
  try {
    return nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json::value_t::discarded;
  }
}

RewardReply parse_reward_reply(std::string_view line) {
  RewardReply out;
  const nlohmann::json reply = parse_reply_json(line);
  if (reply.is_discarded() || !reply.is_object()) {
    out.error = "garbage output (not a JSON object): " + shown(line);
  } else if (!reply.contains("reward")) {
    out.error = "garbage output (no \"reward\" key): " + shown(line);
  } else if (const auto& r = reply["reward"]; r.is_null()) {
    out.kind = RewardReply::Kind::Null;
  } else if (r.is_number() && std::isfinite(r.get<double>())) {
    out.kind = RewardReply::Kind::Reward;
    out.value = r.get<double>();
  } else {
    out.error = std::string("garbage output (\"reward\" is ") + r.type_name() + ", expected a number or null): " +
                shown(line);
  }
  return out;
}

RewardBatchReply parse_reward_batch_reply(std::string_view line, size_t expected) {
  RewardBatchReply out;
  const nlohmann::json reply = parse_reply_json(line);
  if (reply.is_discarded() || !reply.is_object()) {
    out.error = "garbage output (not a JSON object): " + shown(line);
    return out;
  }
  if (!reply.contains("rewards") || !reply["rewards"].is_array()) {
    out.error = "garbage output (no \"rewards\" array): " + shown(line);
    return out;
  }
  const auto& r = reply["rewards"];
  if (r.size() != expected) {
    out.error = "garbage output (" + std::to_string(r.size()) + " rewards for a batch of " + std::to_string(expected) +
                "): " + shown(line);
    return out;
  }
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].is_null()) {
      out.values.emplace_back(std::nullopt);
    } else if (r[i].is_number() && std::isfinite(r[i].get<double>())) {
      out.values.emplace_back(r[i].get<double>());
    } else {
      out.values.clear();
      out.error = "garbage output (rewards[" + std::to_string(i) + "] is " + r[i].type_name() +
                  ", expected a number or null): " + shown(line);
      return out;
    }
  }
  out.ok = true;
  return out;
}

}  // namespace grpo::rollout

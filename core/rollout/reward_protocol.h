// The external reward's wire protocol, reply side (external_reward.h describes the exchange):
// what the program prints on stdout is untrusted input, framed into lines here and parsed into a
// reward. Pure functions on bytes (no process, no torch), so the fuzz build compiles them alone.
//
// Framing: one reply line per request, '\n'-terminated ("\r\n" accepted); blank lines are skipped.
// Bounds: a line longer than kMaxReplyLine, or more than kMaxReplyBytes of output for one
// request, is a flood (a protocol error): memory stays bounded whatever the program prints.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace grpo::rollout {

inline constexpr size_t kMaxReplyLine = 1 << 20;   // 1 MiB: the longest reply line accepted
inline constexpr size_t kMaxReplyBytes = 1 << 20;  // output (blank lines too) per request

// Frames a program's stdout into lines for one request at a time.
class ReplyFramer {
public:
  // Adds bytes read from the program. Returns false (and keeps nothing more) once the request's
  // output exceeds kMaxReplyBytes or a line exceeds kMaxReplyLine: flood() says why.
  bool append(std::string_view bytes);
  // The next non-blank line (without "\r\n"), or nullopt until one is complete.
  std::optional<std::string> next_line();
  // True when bytes other than whitespace are buffered (a line or a partial one).
  bool has_pending_output() const;
  size_t buffered() const { return buffer_.size() - head_; }
  const std::string& flood() const { return flood_; }  // "" unless a bound was exceeded
  // A new request: the per-request byte count starts over (buffered bytes stay).
  void next_request() { received_ = 0; }
  void clear() { buffer_.clear(), flood_.clear(), head_ = received_ = 0; }

private:
  std::string buffer_, flood_;
  size_t head_ = 0;      // buffer_[0, head_) is consumed
  size_t received_ = 0;  // bytes appended since next_request()
};

struct RewardReply {
  enum class Kind { Reward, Null, Garbage };
  Kind kind = Kind::Garbage;
  double value = 0;   // Kind::Reward: a finite number
  std::string error;  // Kind::Garbage: why, quoting at most 200 bytes of the line
};

// Parses one reply line: {"reward": <finite number>} or {"reward": null}; other keys ignored.
// Never throws.
RewardReply parse_reward_reply(std::string_view line);

// The batch protocol's reply: {"rewards": [<finite number or null>, ...]} with exactly `expected`
// values (null: that sample is unscorable); other keys ignored. Never throws.
struct RewardBatchReply {
  bool ok = false;
  std::vector<std::optional<double>> values;  // ok: `expected` of them
  std::string error;                          // !ok: why, quoting at most 200 bytes of the line
};
RewardBatchReply parse_reward_batch_reply(std::string_view line, size_t expected);

}  // namespace grpo::rollout

// Fuzz target: the external reward's replies (core/rollout/reward_protocol.h), what a user's
// reward program prints on stdout. The first byte picks the read size, so the framer sees lines
// split across reads at every offset; every framed line is parsed. Checks the framer's bounds
// (memory stays under the cap, lines carry no newline) and the parser's contract (a reward is
// finite; garbage says why). Neither may throw.
#include <cmath>
#include <string_view>

#include "core/rollout/reward_protocol.h"
#include "tests/fuzz/fuzz_target.h"

FUZZ_BODY({
  using namespace grpo::rollout;
  if (input.empty()) return 0;
  const size_t chunk = 1 + static_cast<unsigned char>(input[0]) * 61;
  std::string_view rest(input);
  rest.remove_prefix(1);
  auto check_reply = [](std::string_view line) {
    const RewardReply r = parse_reward_reply(line);
    if (r.kind == RewardReply::Kind::Reward && !std::isfinite(r.value)) std::abort();
    if (r.kind == RewardReply::Kind::Garbage && r.error.rfind("garbage output", 0) != 0) std::abort();
    if (r.kind != RewardReply::Kind::Garbage && !r.error.empty()) std::abort();
  };
  ReplyFramer framer;
  for (size_t at = 0; at < rest.size(); at += chunk) {
    if (!framer.append(rest.substr(at, chunk))) {
      if (framer.flood().empty()) std::abort();
      break;
    }
    if (framer.buffered() > kMaxReplyBytes) std::abort();
    while (auto line = framer.next_line()) {
      if (line->find('\n') != std::string::npos || line->empty()) std::abort();
      check_reply(*line);
    }
    (void)framer.has_pending_output();
    if (at % (7 * chunk) == 0) framer.next_request();
  }
  check_reply(rest);
  // The batch protocol's reply: ok means exactly the expected count, every value finite or null.
  for (size_t expected : {size_t(0), size_t(1), size_t(3)}) {
    const RewardBatchReply b = parse_reward_batch_reply(rest, expected);
    if (b.ok != b.error.empty()) std::abort();
    if (b.ok && b.values.size() != expected) std::abort();
    for (const auto& v : b.values)
      if (v && !std::isfinite(*v)) std::abort();
  }
})

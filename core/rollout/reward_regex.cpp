// PCRE2 wrapper for the rewards (see reward_regex.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/rollout/reward_regex.h"

#include <pcre2.h>

#include "core/common/error.h"

namespace grpo::rollout {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(const std::string& pattern, const std::string& context, bool dotall)
    : impl_(std::make_unique<Impl>()), pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  if (dotall) options |= PCRE2_DOTALL;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                              &err, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    throw Error(context, "invalid regex \"" + pattern + "\" at offset " + std::to_string(offset) +
                             ": " + reinterpret_cast<const char*>(buf),
                "PCRE2 (Perl) syntax; escape backslashes in JSON as \\\\");
  }
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

namespace {
// Runs one match; returns the whole-match range or nothing. Matching errors (e.g. a match
// limit hit by a pathological pattern) count as "no match". Match data is per call, so one
// Regex may be used from several threads at once.
std::optional<RegexMatch> run(pcre2_code* code, std::string_view s, size_t start, uint32_t options) {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
  int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start, options,
                       data.get(), nullptr);
  if (rc < 0) return std::nullopt;
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
  return RegexMatch{ov[0], ov[1]};
}
}  // namespace

std::optional<RegexMatch> Regex::search(std::string_view subject, size_t start) const {
  if (start > subject.size()) return std::nullopt;
  return run(impl_->code, subject, start, 0);
}

std::vector<RegexMatch> Regex::find_all(std::string_view subject) const {
  std::vector<RegexMatch> out;
  size_t pos = 0;
  while (pos <= subject.size()) {
    auto m = search(subject, pos);
    if (!m) break;
    out.push_back(*m);
    if (m->end > m->begin) {
      pos = m->end;
    } else {  // empty match: step over one UTF-8 character
      pos = m->end + 1;
      while (pos < subject.size() && (static_cast<unsigned char>(subject[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  return out;
}

bool Regex::full_match(std::string_view subject) const {
  // Also check the range: with invalid UTF-8 in the subject PCRE2 may end the match at the end
  // of a valid segment rather than of the subject.
  auto m = run(impl_->code, subject, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED);
  return m && m->begin == 0 && m->end == subject.size();
}

}  // namespace grpo::rollout

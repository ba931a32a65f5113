// PCRE2 wrapper: see regex.h. Match data is kept per thread so find_all is reentrant.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/text/regex.h"

#include <pcre2.h>

#include "core/common/error.h"
#include "core/text/unicode.h"

namespace grpo::text {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
};

Regex::Regex(const std::string& pattern, const std::string& where)
    : impl_(std::make_unique<Impl>()), pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw Error(where,
                "regex /" + pattern + "/ does not compile at offset " + std::to_string(offset) +
                    ": " + reinterpret_cast<const char*>(message),
                "Oniguruma-only syntax is not supported");
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  if (impl_ && impl_->code) pcre2_code_free(impl_->code);
}

namespace {
// One match-data block per thread, grown on demand (ovector of 1 pair is all we read).
struct ThreadMatchData {
  pcre2_match_data* data = pcre2_match_data_create(16, nullptr);
  ~ThreadMatchData() { pcre2_match_data_free(data); }
};
}  // namespace

void Regex::find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  thread_local ThreadMatchData tmd;
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  while (pos <= s.size()) {
    int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, s.size(), pos, 0, tmd.data, nullptr)
                        : pcre2_match(impl_->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK,
                                      tmd.data, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH or a resource limit: no further matches
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(tmd.data);
    size_t start = ov[0], end = ov[1];
    out.emplace_back(start, end);
    if (end > start) {
      pos = end;
    } else {
      if (end >= s.size()) break;
      pos = end + utf8_len(static_cast<unsigned char>(s[end]));
    }
  }
}

std::string Regex::escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-/#&~ ").find(c) != std::string_view::npos) {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace grpo::text

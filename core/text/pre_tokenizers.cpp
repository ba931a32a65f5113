// Pre-tokenizers: see pre_tokenizers.h.
#include "core/text/pre_tokenizers.h"

#include <algorithm>
#include <functional>

#include "core/text/unicode.h"

namespace grpo::text {

void apply_split_behavior(const std::vector<Span>& spans, SplitBehavior behavior,
                          std::vector<std::pair<size_t, size_t>>& out) {
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const Span& s : spans) out.emplace_back(s.start, s.end);
      return;
    case SplitBehavior::Removed:
      for (const Span& s : spans) {
        if (!s.match) out.emplace_back(s.start, s.end);
      }
      return;
    case SplitBehavior::Contiguous: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.match == previous && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.start, s.end);
        }
        previous = s.match;
      }
      return;
    }
    case SplitBehavior::MergedWithPrevious: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.match && !previous && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.start, s.end);
        }
        previous = s.match;
      }
      return;
    }
    case SplitBehavior::MergedWithNext: {
      size_t first = out.size();
      bool previous = false;
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.match && !previous && out.size() > first) {
          out.back().first = s.start;
        } else {
          out.emplace_back(s.start, s.end);
        }
        previous = s.match;
      }
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
      return;
    }
  }
}

namespace {

// Replaces each piece by the pieces `fn` cuts it into (dropping empty ones).
template <typename Fn>
void split_each(std::vector<Piece>& pieces, Fn&& fn) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  std::vector<std::pair<size_t, size_t>> ranges;
  for (Piece& piece : pieces) {
    ranges.clear();
    fn(piece, ranges);
    for (auto [start, end] : ranges) {
      if (end > start) out.push_back({piece.text.substr(start, end - start), piece.at_start && start == 0});
    }
  }
  pieces = std::move(out);
}

// Spans where each character satisfying `pred` is its own match (HF's Fn(char) -> bool pattern).
void char_matches(std::string_view s, const std::function<bool(char32_t)>& pred,
                  std::vector<Span>& out) {
  if (s.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t c = decode_utf8(s, i, len);
    if (pred(c)) {
      if (last < i) out.push_back({last, i, false});
      out.push_back({i, i + len, true});
      last = i + len;
    }
    i += len;
  }
  if (last < s.size()) out.push_back({last, s.size(), false});
}

void split_by_char(std::vector<Piece>& pieces, const std::function<bool(char32_t)>& pred,
                   SplitBehavior behavior) {
  std::vector<Span> spans;
  split_each(pieces, [&](const Piece& p, std::vector<std::pair<size_t, size_t>>& ranges) {
    spans.clear();
    char_matches(p.text, pred, spans);
    apply_split_behavior(spans, behavior, ranges);
  });
}

SplitBehavior parse_behavior(const json& j, const JsonWhere& where, SplitBehavior fallback) {
  std::string b = get_string(j, "behavior", where, "");
  if (b.empty()) return fallback;
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  throw_unsupported(where.at("behavior"), "split behavior", b,
                    {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"});
}

class Split : public PreTokenizer {
public:
  Split(const json& j, const JsonWhere& where)
      : pattern_(require(j, "pattern", where), where.at("pattern")),
        behavior_(parse_behavior(j, where, SplitBehavior::Isolated)),
        invert_(get_bool(j, "invert", where, false)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Span> spans;
    split_each(pieces, [&](const Piece& p, std::vector<std::pair<size_t, size_t>>& ranges) {
      spans.clear();
      pattern_.find_matches(p.text, spans);
      if (invert_) {
        for (Span& s : spans) s.match = !s.match;
      }
      apply_split_behavior(spans, behavior_, ranges);
    });
  }

private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ByteLevelPreTokenizer: optional prefix space, optional GPT-2 regex split, then every byte becomes its
// printable stand-in character.
class ByteLevelPreTokenizer : public PreTokenizer {
public:
  ByteLevelPreTokenizer(const json& j, const JsonWhere& where)
      : add_prefix_space_(get_bool(j, "add_prefix_space", where, true)),
        use_regex_(get_bool(j, "use_regex", where, true)) {
    if (use_regex_) regex_ = std::make_unique<Pattern>(json{{"Regex", kGpt2Regex}}, where);
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (Piece& p : pieces) {
        if (p.text.empty() || p.text[0] != ' ') p.text.insert(0, " ");
      }
    }
    if (use_regex_) {
      std::vector<Span> spans;
      split_each(pieces, [&](const Piece& p, std::vector<std::pair<size_t, size_t>>& ranges) {
        spans.clear();
        regex_->find_matches(p.text, spans);
        apply_split_behavior(spans, SplitBehavior::Isolated, ranges);
      });
    }
    const auto& table = ByteLevelTable::get();
    for (Piece& p : pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (unsigned char b : p.text) mapped += table.byte_to_utf8[b];
      p.text = std::move(mapped);
    }
  }

private:
  bool add_prefix_space_, use_regex_;
  std::unique_ptr<Pattern> regex_;
};

// MetaspacePreTokenizer: spaces become `replacement`, a replacement is prepended per prepend_scheme, and
// with split the piece is cut before each replacement character.
class MetaspacePreTokenizer : public PreTokenizer {
public:
  MetaspacePreTokenizer(const json& j, const JsonWhere& where) {
    replacement_ = get_string(j, "replacement", where, "\xE2\x96\x81");
    if (replacement_.empty()) throw_bad(where.at("replacement"), "must be one character");
    size_t len;
    replacement_char_ = decode_utf8(replacement_, 0, len);
    split_ = get_bool(j, "split", where, true);
    std::string scheme = get_string(j, "prepend_scheme", where, "");
    if (scheme.empty()) scheme = get_bool(j, "add_prefix_space", where, true) ? "always" : "never";
    if (scheme != "always" && scheme != "first" && scheme != "never") {
      throw_unsupported(where.at("prepend_scheme"), "prepend_scheme", scheme, {"always", "first", "never"});
    }
    scheme_ = scheme;
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (Piece& p : pieces) {
      p.text = Pattern(std::string(" ")).replace_all(p.text, replacement_);
      bool starts = p.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == "always" || (scheme_ == "first" && p.at_start))) {
        p.text.insert(0, replacement_);
      }
    }
    if (split_) {
      char32_t r = replacement_char_;
      split_by_char(pieces, [r](char32_t c) { return c == r; }, SplitBehavior::MergedWithNext);
    } else {
      std::erase_if(pieces, [](const Piece& p) { return p.text.empty(); });
    }
  }

private:
  std::string replacement_;
  char32_t replacement_char_ = 0;
  std::string scheme_;
  bool split_ = true;
};

// Simple regex-based ones: Whitespace keeps \w+ and [^\w\s]+ runs and drops the rest.
class RegexKeep : public PreTokenizer {
public:
  RegexKeep(const char* regex, const JsonWhere& where) : pattern_(json{{"Regex", regex}}, where) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Span> spans;
    split_each(pieces, [&](const Piece& p, std::vector<std::pair<size_t, size_t>>& ranges) {
      spans.clear();
      pattern_.find_matches(p.text, spans);
      for (Span& s : spans) s.match = !s.match;
      apply_split_behavior(spans, SplitBehavior::Removed, ranges);
    });
  }

private:
  Pattern pattern_;
};

class CharSplit : public PreTokenizer {
public:
  CharSplit(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_by_char(pieces, pred_, behavior_);
  }

private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

class PreTokenizerSequence : public PreTokenizer {
public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }

private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const JsonWhere& where) {
  if (j.is_null()) return nullptr;
  std::string type = get_type(j, where);
  if (type == "Split") return std::make_unique<Split>(j, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelPreTokenizer>(j, where);
  if (type == "Metaspace") return std::make_unique<MetaspacePreTokenizer>(j, where);
  if (type == "Whitespace") {
    // \w+|[^\w\s]+ with Rust regex's Unicode \w (PCRE2's \w lacks marks and Join_Control).
    return std::make_unique<RegexKeep>(
        R"([\p{L}\p{Nl}\p{Nd}\p{M}\p{Pc}\x{200C}\x{200D}]+|[^\p{L}\p{Nl}\p{Nd}\p{M}\p{Pc}\x{200C}\x{200D}\s]+)",
        where);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharSplit>(is_whitespace, SplitBehavior::Removed);
  }
  if (type == "Punctuation") {
    return std::make_unique<CharSplit>(is_punctuation,
                                       parse_behavior(j, where, SplitBehavior::Isolated));
  }
  if (type == "Digits") {
    bool individual = get_bool(j, "individual_digits", where, false);
    return std::make_unique<CharSplit>(is_numeric, individual ? SplitBehavior::Isolated
                                                              : SplitBehavior::Contiguous);
  }
  if (type == "CharDelimiterSplit") {
    std::string d = get_string(j, "delimiter", where, "");
    if (d.empty()) throw_bad(where.at("delimiter"), "must be one character");
    size_t len;
    char32_t delim = decode_utf8(d, 0, len);
    return std::make_unique<CharSplit>([delim](char32_t c) { return c == delim; },
                                       SplitBehavior::Removed);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    parts.push_back(std::make_unique<CharSplit>(is_whitespace, SplitBehavior::Removed));
    parts.push_back(std::make_unique<CharSplit>(is_punctuation, SplitBehavior::Isolated));
    return std::make_unique<PreTokenizerSequence>(std::move(parts));
  }
  if (type == "Sequence") {
    const json& list = require(j, "pretokenizers", where);
    if (!list.is_array()) throw_bad(where.at("pretokenizers"), "expected an array");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto p = make_pre_tokenizer(list[i], where.at("pretokenizers").at(i))) {
        parts.push_back(std::move(p));
      }
    }
    return std::make_unique<PreTokenizerSequence>(std::move(parts));
  }
  throw_unsupported(where.at("type"), "pre_tokenizer", type,
                    {"Split", "ByteLevel", "Metaspace", "Digits", "Whitespace", "WhitespaceSplit",
                     "Punctuation", "BertPreTokenizer", "CharDelimiterSplit", "Sequence"});
}

}  // namespace grpo::text

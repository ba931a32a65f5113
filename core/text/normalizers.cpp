// Normalizers: see normalizers.h. Semantics follow tokenizers/src/normalizers/*.rs.
#include "core/text/normalizers.h"

#include <vector>

#include "core/text/pattern.h"
#include "core/text/unicode.h"

namespace grpo::text {
namespace {

class UnicodeNormalizer : public Normalizer {
public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& s) const override { s = normalize_unicode(s, form_); }

private:
  NormalForm form_;
};

class Lowercase : public Normalizer {
public:
  void normalize(std::string& s) const override { s = lowercase(s); }
};

// StripNormalizer: removes leading and/or trailing whitespace (Rust's char::is_whitespace).
class StripNormalizer : public Normalizer {
public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& s) const override {
    size_t begin = 0, end = s.size();
    if (left_) {
      while (begin < end) {
        size_t len;
        if (!is_whitespace(decode_utf8(s, begin, len))) break;
        begin += len;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        size_t len;
        if (!is_whitespace(decode_utf8(s, start, len))) break;
        end = start;
      }
    }
    s = s.substr(begin, end - begin);
  }

private:
  bool left_, right_;
};

// Prepend: adds `prepend` in front of any non-empty string.
class Prepend : public Normalizer {
public:
  explicit Prepend(std::string prepend) : prepend_(std::move(prepend)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prepend_);
  }

private:
  std::string prepend_;
};

class ReplaceNormalizer : public Normalizer {
public:
  ReplaceNormalizer(const json& pattern, std::string content, const JsonWhere& where)
      : pattern_(pattern, where), content_(std::move(content)) {}
  void normalize(std::string& s) const override { s = pattern_.replace_all(s, content_); }

private:
  Pattern pattern_;
  std::string content_;
};

class NormalizerSequence : public Normalizer {
public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& s) const override {
    for (const auto& p : parts_) p->normalize(s);
  }

private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j, const JsonWhere& where) {
  if (j.is_null()) return nullptr;
  std::string type = get_type(j, where);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(get_bool(j, "strip_left", where, true),
                                   get_bool(j, "strip_right", where, true));
  }
  if (type == "Prepend") return std::make_unique<Prepend>(get_string(j, "prepend", where, ""));
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(require(j, "pattern", where), get_string(j, "content", where, ""),
                                     where.at("pattern"));
  }
  if (type == "Sequence") {
    const json& list = require(j, "normalizers", where);
    if (!list.is_array()) throw_bad(where.at("normalizers"), "expected an array");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto n = make_normalizer(list[i], where.at("normalizers").at(i))) parts.push_back(std::move(n));
    }
    return std::make_unique<NormalizerSequence>(std::move(parts));
  }
  throw_unsupported(where.at("type"), "normalizer", type,
                    {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Strip", "Prepend", "Replace",
                     "Sequence"});
}

}  // namespace grpo::text

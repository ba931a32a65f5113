// Decoders: see decoders.h. Semantics follow tokenizers/src/decoders/*.rs.
#include "core/text/decoders.h"

#include "core/text/pattern.h"
#include "core/text/unicode.h"

namespace grpo::text {
namespace {

// ByteLevelDecoder: every char of a token maps back to its byte; a token holding a char outside the
// table is taken as raw bytes. All tokens become one string (invalid UTF-8 -> U+FFFD).
class ByteLevelDecoder : public Decoder {
public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    const auto& table = ByteLevelTable::get();
    std::string bytes;
    for (const std::string& t : tokens) {
      size_t mark = bytes.size();
      bool ok = true;
      for (size_t i = 0; i < t.size();) {
        size_t len;
        char32_t c = decode_utf8(t, i, len);
        i += len;
        if (c >= 512 || table.char_to_byte[c] < 0) {
          ok = false;
          break;
        }
        bytes.push_back(static_cast<char>(table.char_to_byte[c]));
      }
      if (!ok) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class MetaspaceDecoder : public Decoder {
public:
  MetaspaceDecoder(std::string replacement, bool prepend) : replacement_(std::move(replacement)), prepend_(prepend) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        if (t.compare(k, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && prepend_)) out.push_back(' ');
          k += replacement_.size();
        } else {
          out.push_back(t[k++]);
        }
      }
      tokens[i] = std::move(out);
    }
  }

private:
  std::string replacement_;
  bool prepend_;
};

// ByteFallback: runs of <0xNN> tokens become their bytes (one U+FFFD per byte if invalid).
class ByteFallback : public Decoder {
public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t count = 0;
    auto flush = [&] {
      if (count == 0) return;
      if (find_invalid_utf8(bytes) == std::string::npos) {
        out.push_back(bytes);
      } else {
        for (size_t k = 0; k < count; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      count = 0;
    };
    for (std::string& t : tokens) {
      int byte = parse_byte(t);
      if (byte >= 0) {
        bytes.push_back(static_cast<char>(byte));
        ++count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

private:
  static int parse_byte(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class Fuse : public Decoder {
public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// StripDecoder: removes up to `start` leading and `stop` trailing copies of `content` per token.
class StripDecoder : public Decoder {
public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, char)
      for (size_t i = 0; i < t.size();) {
        size_t len;
        chars.emplace_back(i, decode_utf8(t, i, len));
        i += len;
      }
      size_t start_cut = 0;
      for (size_t i = 0; i < start_ && i < chars.size() && chars[i].second == content_; ++i) start_cut = i + 1;
      size_t stop_cut = chars.size();
      for (size_t i = 0; i < stop_ && i < chars.size(); ++i) {
        size_t index = chars.size() - i - 1;
        if (chars[index].second != content_) break;
        stop_cut = index;
      }
      if (stop_cut <= start_cut) {
        t.clear();
        continue;
      }
      size_t b0 = start_cut < chars.size() ? chars[start_cut].first : t.size();
      size_t b1 = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
      t = t.substr(b0, b1 - b0);
    }
  }

private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
public:
  ReplaceDecoder(const json& pattern, std::string content, const JsonWhere& where)
      : pattern_(pattern, where), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = pattern_.replace_all(t, content_);
  }

private:
  Pattern pattern_;
  std::string content_;
};

// BPEDecoder: end-of-word suffix becomes a space (none after the last token).
class BpeSuffix : public Decoder {
public:
  explicit BpeSuffix(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = Pattern(suffix_).replace_all(tokens[i], i + 1 == tokens.size() ? "" : " ");
    }
  }

private:
  std::string suffix_;
};

class DecoderSequence : public Decoder {
public:
  explicit DecoderSequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j, const JsonWhere& where) {
  if (j.is_null()) return nullptr;
  std::string type = get_type(j, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    std::string scheme = get_string(j, "prepend_scheme", where, "");
    if (scheme.empty()) scheme = get_bool(j, "add_prefix_space", where, true) ? "always" : "never";
    return std::make_unique<MetaspaceDecoder>(get_string(j, "replacement", where, "\xE2\x96\x81"),
                                       scheme != "never");
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip") {
    std::string content = get_string(j, "content", where, " ");
    size_t len;
    char32_t c = content.empty() ? U' ' : decode_utf8(content, 0, len);
    return std::make_unique<StripDecoder>(c, j.value("start", size_t{0}), j.value("stop", size_t{0}));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(require(j, "pattern", where), get_string(j, "content", where, ""),
                                     where.at("pattern"));
  }
  if (type == "BPEDecoder") return std::make_unique<BpeSuffix>(get_string(j, "suffix", where, "</w>"));
  if (type == "Sequence") {
    const json& list = require(j, "decoders", where);
    if (!list.is_array()) throw_bad(where.at("decoders"), "expected an array");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto d = make_decoder(list[i], where.at("decoders").at(i))) parts.push_back(std::move(d));
    }
    return std::make_unique<DecoderSequence>(std::move(parts));
  }
  throw_unsupported(where.at("type"), "decoder", type,
                    {"ByteLevel", "Metaspace", "ByteFallback", "Fuse", "Strip", "Replace",
                     "BPEDecoder", "Sequence"});
}

}  // namespace grpo::text

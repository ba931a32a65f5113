// Chat templates: see chat_template.h. Each branch below transcribes the Jinja source it
// stands for; comments quote the template lines.
#include "core/text/chat_template.h"

#include <ctime>

#include "core/common/error.h"
#include "core/text/unicode.h"

namespace grpo::text {
namespace {

bool contains(const std::string& s, std::string_view what) { return s.find(what) != std::string::npos; }

// Python's str.strip(chars)/lstrip/rstrip for a set of ASCII chars.
std::string lstrip(std::string_view s, std::string_view chars) {
  size_t b = s.find_first_not_of(chars);
  return b == std::string_view::npos ? "" : std::string(s.substr(b));
}
std::string rstrip(std::string_view s, std::string_view chars) {
  size_t e = s.find_last_not_of(chars);
  return e == std::string_view::npos ? "" : std::string(s.substr(0, e + 1));
}
std::string strip(std::string_view s, std::string_view chars) { return lstrip(rstrip(s, chars), chars); }

bool python_space(char32_t c) { return is_whitespace(c) || (c >= 0x1C && c <= 0x1F); }

// Jinja's `trim` filter (Python str.strip(): Unicode whitespace).
std::string trim_unicode(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t len;
    if (!python_space(decode_utf8(s, b, len))) break;
    b += len;
  }
  while (e > b) {
    size_t k = e - 1;
    while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    size_t len;
    if (!python_space(decode_utf8(s, k, len))) break;
    e = k;
  }
  return std::string(s.substr(b, e - b));
}

// Python's s.split(sep)[0] and [-1].
std::string first_part(const std::string& s, const std::string& sep) { return s.substr(0, s.find(sep)); }
std::string last_part(const std::string& s, const std::string& sep) {
  size_t p = s.rfind(sep);
  return p == std::string::npos ? s : s.substr(p + sep.size());
}

// The default system prompt a ChatML template prints when messages[0] is not a system message:
// a string literal '<|im_start|>system\n...<|im_end|>\n' with no expression inside.
bool find_default_system(const std::string& src, std::string& out) {
  const std::string head = "<|im_start|>system\\n";
  for (size_t p = src.find(head); p != std::string::npos; p = src.find(head, p + 1)) {
    size_t start = p + head.size();
    size_t end = src.find("<|im_end|>", start);
    if (end == std::string::npos) continue;
    std::string raw = src.substr(start, end - start);
    if (raw.empty() || raw.find_first_of("'\"{}+") != std::string::npos) continue;
    out.clear();
    for (size_t i = 0; i < raw.size(); ++i) {  // Jinja string-literal escapes
      if (raw[i] == '\\' && i + 1 < raw.size()) {
        char c = raw[++i];
        out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
      } else {
        out.push_back(raw[i]);
      }
    }
    return true;
  }
  return false;
}

// Llama 3.1+: {%- set date_string = "26 Jul 2024" %}, or strftime_now("%d %b %Y") (today).
std::string llama_date(const std::string& src) {
  if (contains(src, "strftime_now")) {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
    return buf;
  }
  const std::string key = "set date_string = \"";
  size_t p = src.find(key);
  if (p == std::string::npos) return "26 Jul 2024";
  size_t start = p + key.size();
  return src.substr(start, src.find('"', start) - start);
}

}  // namespace

ChatTemplate ChatTemplate::recognise(const std::string& source, const std::string& bos_token,
                                     const std::string& eos_token) {
  ChatTemplate t;
  t.source_ = source;
  t.bos_ = bos_token;
  if (contains(source, "<|im_start|>")) {
    t.style_ = ChatStyle::ChatML;
    t.has_default_system_ = find_default_system(source, t.default_system_);
    t.thinking_ = contains(source, "</think>") && contains(source, "reasoning_content");
    t.tool_aware_ = contains(source, "<tool_response>");
    t.bos_prefix_ = contains(source, "bos_token");
    return t;
  }
  if (contains(source, "<|start_header_id|>")) {
    t.style_ = ChatStyle::Llama3;
    t.dated_system_ = contains(source, "Cutting Knowledge Date");
    if (t.dated_system_) t.date_string_ = llama_date(source);
    return t;
  }
  (void)eos_token;
  throw Error("chat_template", "this chat template is not supported (recognised: ChatML with "
                               "<|im_start|>, Llama 3 with <|start_header_id|>)",
              "use the plain-prompt fallback (message contents joined by blank lines, "
              "ChatTemplate::plain_prompt) or a model with a ChatML or Llama 3 template");
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt) const {
  return style_ == ChatStyle::ChatML ? render_chatml(messages, add_generation_prompt)
                                     : render_llama3(messages, add_generation_prompt);
}

std::string ChatTemplate::render_chatml(const std::vector<ChatMessage>& m, bool gen) const {
  std::string out;
  if (bos_prefix_) out += bos_;
  const size_t n = m.size();
  // {%- if messages[0].role == 'system' %} ... {%- else %} default system (Qwen 2 / 2.5)
  bool first_is_system = n > 0 && m[0].role == "system";
  if (!first_is_system && has_default_system_ && n > 0) {
    out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
  }
  // Qwen 3: last_query_index = the last user turn that is not a wrapped tool response.
  size_t last_query = n == 0 ? 0 : n - 1;
  for (size_t k = n; k-- > 0;) {
    const std::string& c = m[k].content;
    bool wrapped = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
    if (m[k].role == "user" && !wrapped) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& msg = m[i];
    bool last = i + 1 == n;
    if (msg.role == "assistant" && thinking_) {
      // content / reasoning_content split at </think>, as the Qwen 3 template does.
      std::string content = msg.content, reasoning;
      if (contains(msg.content, "</think>")) {
        content = lstrip(last_part(msg.content, "</think>"), "\n");
        reasoning = lstrip(last_part(rstrip(first_part(msg.content, "</think>"), "\n"), "<think>"), "\n");
      }
      out += "<|im_start|>assistant\n";
      if (i > last_query && (last || !reasoning.empty())) {
        out += "<think>\n" + strip(reasoning, "\n") + "\n</think>\n\n" + lstrip(content, "\n");
      } else {
        out += content;
      }
      out += "<|im_end|>\n";
    } else if (msg.role == "tool" && tool_aware_) {
      if (i == 0 || m[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + msg.content + "\n</tool_response>";
      if (last || m[i + 1].role != "tool") out += "<|im_end|>\n";
    } else if (!tool_aware_ || msg.role == "user" || msg.role == "system" || msg.role == "assistant") {
      out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
    }
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string ChatTemplate::render_llama3(const std::vector<ChatMessage>& m, bool gen) const {
  auto turn = [](const std::string& role, const std::string& content) {
    // '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>'
    return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + trim_unicode(content) + "<|eot_id|>";
  };
  std::string out;
  size_t first = 0;
  if (dated_system_) {
    out += bos_;
    std::string system_message;
    if (!m.empty() && m[0].role == "system") {
      system_message = trim_unicode(m[0].content);
      first = 1;
    }
    out += "<|start_header_id|>system<|end_header_id|>\n\n";
    out += "Cutting Knowledge Date: December 2023\nToday Date: " + date_string_ + "\n\n";
    out += system_message + "<|eot_id|>";
  }
  for (size_t i = first; i < m.size(); ++i) {
    if (!dated_system_ && i == 0) out += bos_;  // {% if loop.index0 == 0 %}bos_token + content
    out += turn(m[i].role, m[i].content);
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string ChatTemplate::plain_prompt(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i) out += "\n\n";
    out += messages[i].content;
  }
  return out;
}

}  // namespace grpo::text

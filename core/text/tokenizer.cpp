// Tokenizer: see tokenizer.h. Loading wires the components built by normalizers.cpp,
// pre_tokenizers.cpp, bpe.cpp, added_tokens.cpp, post_processor.cpp and decoders.cpp.
#include "core/common/json_limits.h"
#include "core/text/tokenizer.h"

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/text/added_tokens.h"
#include "core/text/bpe.h"
#include "core/text/decoders.h"
#include "core/text/normalizers.h"
#include "core/text/post_processor.h"
#include "core/text/pre_tokenizers.h"
#include "core/text/unicode.h"

namespace grpo::text {

struct Tokenizer::Impl {
  std::string name;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  AddedVocabulary added;
  PostProcessor post;
  std::unique_ptr<Decoder> decoder;

  std::string bos_token, eos_token;
  std::optional<std::string> chat_source;
  std::optional<ChatTemplate> chat;
};

namespace {

// bos_token/eos_token in tokenizer_config.json: "text", {"content": "text", ...} or null.
std::string config_token(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

json parse_json(std::string_view text, const std::string& name) {
  check_json_depth(text, name);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    throw Error(name, std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path) {
  std::string file = path, config_file;
  if (is_directory(path)) {
    file = path_join(path, "tokenizer.json");
    check(file_exists(file), path, "no tokenizer.json in this directory",
          "point at a Hugging Face model directory or a tokenizer.json file");
  }
  size_t slash = file.rfind('/');
  config_file = path_join(slash == std::string::npos ? "." : file.substr(0, slash), "tokenizer_config.json");
  std::string config_text = file_exists(config_file) ? read_file(config_file) : std::string();
  const std::string jinja_file = path_join(slash == std::string::npos ? "." : file.substr(0, slash), "chat_template.jinja");
  std::optional<std::string> jinja;
  if (file_exists(jinja_file)) jinja = read_file(jinja_file);
  return from_json(read_file(file), file, config_text, jinja);
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, const std::string& name,
                               std::string_view config_json, const std::optional<std::string>& chat_template_jinja) {
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  const json j = parse_json(tokenizer_json, name);
  const JsonWhere root{name, ""};
  if (!j.is_object()) throw_bad(root, "expected a JSON object");

  const json& model = require(j, "model", root);
  std::string model_type = model.value("type", "BPE");
  if (model_type != "BPE") throw_unsupported(root.at("model").at("type"), "model", model_type, {"BPE"});
  impl->model = std::make_unique<BpeModel>(model, root.at("model"));
  impl->normalizer = make_normalizer(j.value("normalizer", json()), root.at("normalizer"));
  impl->pre_tokenizer = make_pre_tokenizer(j.value("pre_tokenizer", json()), root.at("pre_tokenizer"));
  impl->post = make_post_processor(j.value("post_processor", json()), root.at("post_processor"));
  impl->decoder = make_decoder(j.value("decoder", json()), root.at("decoder"));
  const BpeModel& bpe = *impl->model;
  impl->added.load(j.value("added_tokens", json()), root.at("added_tokens"),
                   [&bpe](const std::string& content) { return bpe.token_to_id(content); });
  impl->added.build_tries(impl->normalizer.get());

  size_t slash = name.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : name.substr(0, slash + 1);
  json config = json::object();
  const std::string config_name = dir + "tokenizer_config.json";
  if (!config_json.empty()) {
    config = parse_json(config_json, config_name);
    if (!config.is_object()) throw Error(config_name, "expected a JSON object");
    impl->bos_token = config_token(config, "bos_token");
    impl->eos_token = config_token(config, "eos_token");
  }
  impl->chat = ChatTemplate::from_config(config, config_name, chat_template_jinja, dir + "chat_template.jinja");
  if (impl->chat) impl->chat_source = impl->chat->source();
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& d = *impl_;
  size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    throw Error(d.name, "input text is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = d.post.prefix;
  std::vector<Segment> raw, normalized;
  std::vector<Piece> pieces;
  d.added.split(text, false, raw);
  for (const Segment& seg : raw) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    if (seg.end == seg.start) continue;
    std::string s(text.substr(seg.start, seg.end - seg.start));
    if (d.normalizer) d.normalizer->normalize(s);
    normalized.clear();
    d.added.split(s, true, normalized);
    for (const Segment& nseg : normalized) {
      if (nseg.id >= 0) {
        ids.push_back(nseg.id);
        continue;
      }
      if (nseg.end == nseg.start) continue;
      pieces.clear();
      pieces.push_back({s.substr(nseg.start, nseg.end - nseg.start), seg.start == 0 && nseg.start == 0});
      if (d.pre_tokenizer) d.pre_tokenizer->pre_tokenize(pieces);
      for (const Piece& p : pieces) d.model->tokenize(p.text, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), d.post.suffix.begin(), d.post.suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& d = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken* t = d.added.by_id(id)) {
      if (!(skip_special_tokens && t->special)) tokens.push_back(t->decoded);
    } else if (const std::string* tok = d.model->id_to_token(id)) {
      tokens.push_back(*tok);
    }
  }
  if (!d.decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  d.decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

size_t Tokenizer::vocab_size() const {
  size_t n = impl_->model->vocab_size();
  for (const AddedToken& t : impl_->added.tokens()) n = std::max(n, static_cast<size_t>(t.id) + 1);
  return n;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* t = impl_->added.by_content(token)) return t->id;
  int32_t id = impl_->model->token_to_id(token);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* t = impl_->added.by_id(id)) return t->content;
  if (const std::string* tok = impl_->model->id_to_token(id)) return *tok;
  return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const { return impl_->added.is_special(id); }

std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos_token.empty() ? std::nullopt : token_to_id(impl_->bos_token);
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos_token.empty() ? std::nullopt : token_to_id(impl_->eos_token);
}
const std::string& Tokenizer::bos_token() const { return impl_->bos_token; }
const std::string& Tokenizer::eos_token() const { return impl_->eos_token; }
const std::optional<std::string>& Tokenizer::chat_template() const { return impl_->chat_source; }

const ChatTemplate* Tokenizer::chat() const { return impl_->chat ? &*impl_->chat : nullptr; }

std::string Tokenizer::apply_chat_template(const nlohmann::ordered_json& messages,
                                           const ChatTemplate::Options& options) const {
  if (!impl_->chat)
    throw Error(impl_->name, "no chat template (tokenizer_config.json has no chat_template and there is no chat_template.jinja)",
                "use plain-text prompts with this model, or a model that has a chat template");
  return impl_->chat->render(messages, options);
}

std::string Tokenizer::apply_chat_template(const std::vector<ChatMessage>& messages,
                                           bool add_generation_prompt) const {
  ChatTemplate::Options o;
  o.add_generation_prompt = add_generation_prompt;
  return apply_chat_template(to_json(messages), o);
}

}  // namespace grpo::text

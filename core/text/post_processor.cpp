// Post-processors: see post_processor.h.
#include "core/text/post_processor.h"

namespace grpo::text {
namespace {

// [token, id] pairs as RobertaProcessing/BertProcessing write "cls" and "sep".
int32_t pair_id(const json& j, const char* key, const JsonWhere& where) {
  const json& v = require(j, key, where);
  if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer()) {
    throw_bad(where.at(key), "expected [token, id]");
  }
  return v[1].get<int32_t>();
}

void template_processing(const json& j, const JsonWhere& where, PostProcessor& out) {
  const json& single = require(j, "single", where);
  const json specials = j.value("special_tokens", json::object());
  bool after = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const json& piece = single[i];
    JsonWhere w = where.at("single").at(i);
    if (piece.contains("Sequence")) {
      after = true;
      continue;
    }
    if (!piece.contains("SpecialToken")) throw_bad(w, "expected SpecialToken or Sequence");
    std::string name = get_string(piece["SpecialToken"], "id", w.at("SpecialToken"), "");
    auto it = specials.find(name);
    if (it == specials.end()) throw_bad(w, "special token \"" + name + "\" missing from special_tokens");
    for (const json& id : it->value("ids", json::array())) {
      (after ? out.suffix : out.prefix).push_back(id.get<int32_t>());
    }
  }
}

}  // namespace

PostProcessor make_post_processor(const json& j, const JsonWhere& where) {
  PostProcessor out;
  if (j.is_null()) return out;
  std::string type = get_type(j, where);
  if (type == "TemplateProcessing") {
    template_processing(j, where, out);
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    out.prefix.push_back(pair_id(j, "cls", where));
    out.suffix.push_back(pair_id(j, "sep", where));
  } else if (type == "ByteLevel") {
    // Only trims offsets; ids are unchanged.
  } else if (type == "Sequence") {
    const json& list = require(j, "processors", where);
    for (size_t i = 0; i < list.size(); ++i) {
      PostProcessor p = make_post_processor(list[i], where.at("processors").at(i));
      // Each processor wraps what the previous ones produced.
      out.prefix.insert(out.prefix.begin(), p.prefix.begin(), p.prefix.end());
      out.suffix.insert(out.suffix.end(), p.suffix.begin(), p.suffix.end());
    }
  } else {
    throw_unsupported(where.at("type"), "post_processor", type,
                      {"TemplateProcessing", "RobertaProcessing", "BertProcessing", "ByteLevel",
                       "Sequence"});
  }
  return out;
}

}  // namespace grpo::text

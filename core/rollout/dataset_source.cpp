// Datasets by file, folder or Hub repo id, with `datasets`' config and split rules (see
// dataset_source.h).
#include "core/rollout/dataset_source.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/json_limits.h"
#include "core/common/strings.h"
#include "core/hub/hf_cache.h"
#include "core/io/parquet.h"
#include "core/rollout/dataset_csv.h"

namespace grpo::rollout {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr size_t kMaxFrontMatter = 256 * 1024;
constexpr int kMaxYamlDepth = 32;
constexpr size_t kMaxYamlNodes = 100000;
constexpr size_t kMaxFiles = 10000;
constexpr int kMaxDirDepth = 16;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

enum class Format { Parquet, JsonLines, Json, Csv, None };

Format format_of(const std::string& path) {
  const std::string p = lower(path);
  if (ends_with(p, ".parquet")) return Format::Parquet;
  if (ends_with(p, ".jsonl") || ends_with(p, ".ndjson")) return Format::JsonLines;
  if (ends_with(p, ".json")) return Format::Json;
  if (ends_with(p, ".csv")) return Format::Csv;
  return Format::None;
}

// ---- README.md front matter (YAML) -> JSON, bounded ----

json yaml_to_json(const YAML::Node& n, int depth, size_t& nodes, const std::string& where) {
  check(depth <= kMaxYamlDepth, where, "nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  check(++nodes <= kMaxYamlNodes, where, "more than " + std::to_string(kMaxYamlNodes) + " YAML nodes");
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& e : n) out.push_back(yaml_to_json(e, depth + 1, nodes, where));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : n) out[kv.first.Scalar()] = yaml_to_json(kv.second, depth + 1, nodes, where);
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() != "!" && (s == "true" || s == "True")) return true;
      if (n.Tag() != "!" && (s == "false" || s == "False")) return false;
      return s;
    }
    default:
      return nullptr;
  }
}

// The YAML between the leading "---" line and the next "---" line of README.md, as JSON; null
// when the file or the block is absent.
json front_matter(const std::string& repo_dir) {
  const std::string path = path_join(repo_dir, "README.md");
  if (!file_exists(path)) return nullptr;
  std::string text = read_file(path);
  if (!starts_with(text, "---")) return nullptr;
  size_t start = text.find('\n');
  if (start == std::string::npos) return nullptr;
  size_t end = text.find("\n---", start);
  check(end != std::string::npos, path, "the YAML front matter that starts with \"---\" never ends with a \"---\" line");
  check(end - start <= kMaxFrontMatter, path,
        "YAML front matter of " + std::to_string(end - start) + " bytes exceeds the limit of " +
            std::to_string(kMaxFrontMatter));
  // yaml-cpp recurses per nesting level: refuse deep flow collections before it parses them.
  check_yaml_flow_depth(std::string_view(text).substr(start, end - start), path + ": YAML front matter", kMaxYamlDepth);
  YAML::Node root;
  try {
    root = YAML::Load(text.substr(start, end - start));
  } catch (const YAML::Exception& e) {
    throw Error(path, std::string("YAML front matter: ") + e.what());
  }
  size_t nodes = 0;
  return yaml_to_json(root, 0, nodes, path + ": YAML front matter");
}

// ---- listing a repo folder ----

// Every data file under `root`, relative with '/' separators, sorted; hidden files and folders
// (".git", ".cache", ".gitattributes") are skipped.
std::vector<std::string> list_data_files(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path root_path(root);
  fs::recursive_directory_iterator it(root_path, fs::directory_options::skip_permission_denied, ec), end;
  check(!ec, root, "cannot list the folder: " + ec.message());
  for (; it != end; it.increment(ec)) {
    check(!ec, root, "cannot list the folder: " + ec.message());
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory(ec)) {
      if (it.depth() >= kMaxDirDepth) it.disable_recursion_pending();
      continue;
    }
    if (format_of(name) == Format::None || !it->is_regular_file(ec)) continue;
    // Lexically: a Hub cache snapshot holds links into blobs/, which fs::relative would resolve.
    out.push_back(it->path().lexically_relative(root_path).generic_string());
    check(out.size() <= 100 * kMaxFiles, root, "more than " + std::to_string(100 * kMaxFiles) + " data files");
  }
  std::sort(out.begin(), out.end());
  return out;
}

// `datasets`' split keywords (data_files.py, DEFAULT_SPLITS).
const std::map<std::string, std::vector<std::string>>& split_keywords() {
  static const std::map<std::string, std::vector<std::string>> k = {
      {"train", {"train", "training"}},
      {"validation", {"validation", "valid", "dev", "val"}},
      {"test", {"test", "testing", "eval", "evaluation"}},
  };
  return k;
}

const char* kSep = "[-._ 0-9]";

bool keyword_in_name(const std::string& part, const std::string& kw, bool whole_ok) {
  if (whole_ok && part == kw) return true;
  return hub::fnmatch(kw + kSep + "*", part) || hub::fnmatch(std::string("*") + kSep + kw + kSep + "*", part) ||
         (whole_ok && hub::fnmatch(std::string("*") + kSep + kw, part));
}

std::vector<std::string> split_parts(const std::string& rel) {
  std::vector<std::string> parts;
  size_t s = 0;
  while (true) {
    size_t e = rel.find('/', s);
    parts.push_back(rel.substr(s, e == std::string::npos ? std::string::npos : e - s));
    if (e == std::string::npos) break;
    s = e + 1;
  }
  return parts;
}

// Which default split a file belongs to by one rule set, or "".
std::string split_by_dir(const std::string& rel) {
  auto parts = split_parts(rel);
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    for (const auto& [split, kws] : split_keywords())
      for (const auto& kw : kws)
        if (keyword_in_name(parts[i], kw, /*whole_ok=*/true)) return split;
  return "";
}

std::string split_by_filename(const std::string& rel) {
  const std::string base = split_parts(rel).back();
  for (const auto& [split, kws] : split_keywords())
    for (const auto& kw : kws)
      if (keyword_in_name(base, kw, /*whole_ok=*/false)) return split;
  return "";
}

// data/<split>-00000-of-00001*.* -> <split>
std::string split_by_shard(const std::string& rel) {
  if (!starts_with(rel, "data/") || rel.find('/', 5) != std::string::npos) return "";
  const std::string base = rel.substr(5);
  size_t dash = base.find('-');
  while (dash != std::string::npos) {
    if (hub::fnmatch("-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*.*", base.substr(dash)))
      return base.substr(0, dash);
    dash = base.find('-', dash + 1);
  }
  return "";
}

// The split -> files map of the first rule set that assigns any file (datasets' order).
std::map<std::string, std::vector<std::string>> default_splits(const std::vector<std::string>& files) {
  for (auto rule : {&split_by_shard, &split_by_dir, &split_by_filename}) {
    std::map<std::string, std::vector<std::string>> m;
    for (const auto& f : files) {
      std::string s = rule(f);
      if (!s.empty()) m[s].push_back(f);
    }
    if (!m.empty()) return m;
  }
  if (files.empty()) return {};
  return {{"train", files}};
}

std::string names_of(const std::map<std::string, std::vector<std::string>>& m) {
  std::vector<std::string> v;
  for (const auto& kv : m) v.push_back("\"" + kv.first + "\"");
  return v.empty() ? "none" : join(v, ", ");
}

// Files under `root` matching a data_files glob (relative to the repo root; fnmatch as datasets'
// fsspec glob, where "**" spans folders).
std::vector<std::string> glob(const std::vector<std::string>& all, const std::string& pattern) {
  std::vector<std::string> out;
  std::string p = pattern;
  while (starts_with(p, "./")) p.erase(0, 2);
  for (const auto& f : all)
    if (hub::fnmatch(p, f) || (starts_with(p, "**/") && hub::fnmatch(p.substr(3), f))) out.push_back(f);
  return out;
}

std::vector<std::string> strings_of(const json& v, const std::string& where) {
  std::vector<std::string> out;
  if (v.is_string()) return {v.get<std::string>()};
  check(v.is_array(), where, std::string("expected a path or a list of paths, got ") + v.type_name());
  for (const auto& e : v) {
    check(e.is_string(), where, std::string("expected a path, got ") + e.type_name());
    out.push_back(e.get<std::string>());
  }
  return out;
}

// The split's files from a README config entry; empty map entry when the split is absent.
std::map<std::string, std::vector<std::string>> config_splits(const json& cfg, const std::vector<std::string>& all,
                                                              const std::string& where) {
  std::map<std::string, std::vector<std::string>> m;
  std::string data_dir = cfg.contains("data_dir") && cfg["data_dir"].is_string() ? cfg["data_dir"].get<std::string>() : "";
  while (!data_dir.empty() && data_dir.back() == '/') data_dir.pop_back();
  auto in_dir = [&](const std::string& p) { return data_dir.empty() ? p : data_dir + "/" + p; };
  if (!cfg.contains("data_files")) {
    std::vector<std::string> under;
    for (const auto& f : all)
      if (data_dir.empty() || starts_with(f, data_dir + "/")) under.push_back(data_dir.empty() ? f : f.substr(data_dir.size() + 1));
    for (auto& [split, files] : default_splits(under))
      for (const auto& f : files) m[split].push_back(in_dir(f));
    return m;
  }
  const json& df = cfg["data_files"];
  if (df.is_string() || (df.is_array() && !df.empty() && df[0].is_string())) {
    for (const auto& p : strings_of(df, where + ".data_files"))
      for (const auto& f : glob(all, in_dir(p))) m["train"].push_back(f);
    return m;
  }
  if (df.is_object()) {  // {split: path(s)}
    for (const auto& [split, paths] : df.items())
      for (const auto& p : strings_of(paths, where + ".data_files." + split))
        for (const auto& f : glob(all, in_dir(p))) m[split].push_back(f);
    return m;
  }
  check(df.is_array(), where + ".data_files", std::string("expected a path, a list, or a list of {split, path}, got ") + df.type_name());
  for (size_t i = 0; i < df.size(); ++i) {
    const std::string at = where + ".data_files[" + std::to_string(i) + "]";
    check(df[i].is_object() && df[i].contains("path"), at, "expected {\"split\": ..., \"path\": ...}");
    const std::string split = df[i].contains("split") && df[i]["split"].is_string() ? df[i]["split"].get<std::string>() : "train";
    for (const auto& p : strings_of(df[i]["path"], at + ".path"))
      for (const auto& f : glob(all, in_dir(p))) m[split].push_back(f);
  }
  return m;
}

std::vector<std::string> split_files_in(const std::string& root, const DatasetRef& ref) {
  const std::string split = ref.split.empty() ? "train" : ref.split;
  const auto all = list_data_files(root);
  const json meta = front_matter(root);
  std::map<std::string, std::vector<std::string>> splits;
  std::string where;
  if (meta.is_object() && meta.contains("configs") && meta["configs"].is_array() && !meta["configs"].empty()) {
    std::string chosen;
    auto names = dataset_configs(root, &chosen);
    if (!ref.config.empty()) chosen = ref.config;
    check(!chosen.empty(), root,
          "the dataset has several configs and none is the default: name one (dataset_config)",
          "configs: " + join(names, ", "));
    const json* cfg = nullptr;
    for (const auto& c : meta["configs"])
      if (c.is_object() && c.value("config_name", std::string("default")) == chosen) cfg = &c;
    check(cfg != nullptr, root, "no config \"" + chosen + "\" in README.md", "configs: " + join(names, ", "));
    where = path_join(root, "README.md") + ": configs[" + chosen + "]";
    splits = config_splits(*cfg, all, where);
  } else {
    std::string base;
    if (!ref.config.empty()) {
      // The Parquet conversion branch: <config>/<split>/ or <config>/partial-<split>/.
      for (const std::string& dir : {ref.config + "/" + split + "/", ref.config + "/partial-" + split + "/"}) {
        std::vector<std::string> files;
        for (const auto& f : all)
          if (starts_with(f, dir) && f.find('/', dir.size()) == std::string::npos) files.push_back(f);
        if (!files.empty()) return files;
      }
      check(is_directory(path_join(root, ref.config)), root,
            "no config \"" + ref.config + "\": the folder has no README.md configs and no \"" + ref.config + "/\" folder",
            "leave dataset_config empty for a dataset without configs");
      base = ref.config + "/";
    }
    std::vector<std::string> under;
    for (const auto& f : all)
      if (starts_with(f, base)) under.push_back(f.substr(base.size()));
    for (auto& [s, files] : default_splits(under))
      for (const auto& f : files) splits[s].push_back(base + f);
    where = root + (base.empty() ? "" : " (config \"" + ref.config + "\")");
  }
  auto it = splits.find(split);
  check(it != splits.end() && !it->second.empty(), where, "no data files for split \"" + split + "\"",
        "splits found: " + names_of(splits));
  check(it->second.size() <= kMaxFiles, where, "split \"" + split + "\" has more than " + std::to_string(kMaxFiles) + " files");
  std::vector<std::string> files = it->second;
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

// ---- reading rows ----

void for_each_file_row(const std::string& path, const std::function<bool(ordered_json&&, const std::string&)>& fn) {
  switch (format_of(path)) {
    case Format::Parquet: {
      int64_t n = 0;
      io::for_each_parquet_row(path, [&](io::ParquetRow&& row) {
        return fn(std::move(row), path + ": row " + std::to_string(n++));
      });
      return;
    }
    case Format::Csv: {
      CsvTable t = parse_csv_table(read_file(path), path);
      for (const auto& rec : t.records) {
        ordered_json row = ordered_json::object();
        for (size_t i = 0; i < t.header.size(); ++i) row[t.header[i]] = rec.fields[i];
        if (!fn(std::move(row), path + ":" + std::to_string(rec.line))) return;
      }
      return;
    }
    default: {
      const std::string text = read_file(path);
      size_t first = text.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
      if (format_of(path) == Format::Json && first != std::string::npos && text[first] == '[') {
        check_json_depth(text, path);
        ordered_json rows = ordered_json::parse(text, nullptr, false);
        check(!rows.is_discarded() && rows.is_array(), path, "invalid JSON: expected an array of row objects");
        for (size_t i = 0; i < rows.size(); ++i)
          if (!fn(std::move(rows[i]), path + ": row " + std::to_string(i))) return;
        return;
      }
      for_each_json_line(text, path, fn);
    }
  }
}

}  // namespace

std::vector<std::string> dataset_configs(const std::string& repo_dir, std::string* default_config) {
  std::vector<std::string> names;
  std::string def;
  const json meta = front_matter(repo_dir);
  if (meta.is_object() && meta.contains("configs") && meta["configs"].is_array()) {
    for (const auto& c : meta["configs"]) {
      if (!c.is_object()) continue;
      const std::string name = c.value("config_name", std::string("default"));
      names.push_back(name);
      if (c.contains("default") && c["default"] == true && def.empty()) def = name;
    }
    if (def.empty() && std::find(names.begin(), names.end(), "default") != names.end()) def = "default";
    if (def.empty() && names.size() == 1) def = names[0];
  }
  if (default_config) *default_config = def;
  return names;
}

std::string dataset_commit(const DatasetRef& ref) {
  if (ref.name.empty() || file_exists(ref.name)) return "";
  return hub::resolve_repo(ref.name, ref.revision, hub::RepoType::Dataset, ref.cache_dir).commit;
}

std::vector<std::string> dataset_files(const DatasetRef& ref) {
  check(!ref.name.empty(), "dataset", "no dataset named", "set dataset_name (a repo id, a folder or a file) or train_file");
  if (file_exists(ref.name) && !is_directory(ref.name)) {
    check(format_of(ref.name) != Format::None, ref.name, "not a dataset file",
          "expected .parquet, .jsonl, .ndjson, .json or .csv");
    return {ref.name};
  }
  std::string root = ref.name;
  if (!is_directory(root)) root = hub::resolve_repo(ref.name, ref.revision, hub::RepoType::Dataset, ref.cache_dir).dir;
  std::vector<std::string> files;
  for (const auto& rel : split_files_in(root, ref)) files.push_back(path_join(root, rel));
  return files;
}

void validate_column_map(const json& columns, const std::string& source) {
  check(columns.is_object(), source, std::string("expected an object {\"source column\": \"new name\"}, got ") + columns.type_name(),
        "e.g. {\"question\": \"prompt\"}");
  std::set<std::string> targets;
  for (const auto& [from, to] : columns.items()) {
    check(!from.empty() && to.is_string() && !to.get<std::string>().empty(), source + ": \"" + from + "\"",
          "expected a non-empty column name to rename it to");
    check(targets.insert(to.get<std::string>()).second, source,
          "two columns are renamed to \"" + to.get<std::string>() + "\"");
  }
}

ordered_json rename_columns(const ordered_json& row, const json& columns, const std::string& where) {
  if (columns.empty() || !row.is_object()) return row;
  ordered_json out = ordered_json::object();
  std::set<std::string> renamed_to;
  for (const auto& [from, to] : columns.items())
    if (row.contains(from)) renamed_to.insert(to.get<std::string>());
  for (const auto& [key, value] : row.items()) {
    std::string name = key;
    if (columns.contains(key) && columns[key].is_string()) name = columns[key].get<std::string>();
    else if (renamed_to.count(key)) throw Error(where, "column \"" + key + "\" is also the new name of a renamed column",
                                                "rename it too, or rename the other column to something else");
    out[name] = value;
  }
  return out;
}

void for_each_dataset_row(const DatasetRef& ref, const std::function<bool(ordered_json&&, const std::string&)>& fn) {
  bool go = true;
  for (const auto& path : dataset_files(ref)) {
    for_each_file_row(path, [&](ordered_json&& row, const std::string& where) {
      go = fn(rename_columns(row, ref.columns, where), where);
      return go;
    });
    if (!go) return;
  }
}

std::vector<Example> load_dataset_ref(const DatasetRef& ref) {
  validate_column_map(ref.columns, "dataset columns");
  std::vector<Example> out;
  for (const auto& path : dataset_files(ref)) {
    const bool csv = format_of(path) == Format::Csv;  // empty cells are absent, messages are JSON text
    for_each_file_row(path, [&](ordered_json&& row, const std::string& where) {
      out.push_back(example_from_row(json(rename_columns(row, ref.columns, where)), static_cast<int64_t>(out.size()),
                                     where, csv));
      return true;
    });
  }
  check(!out.empty(), ref.name, "the split \"" + ref.split + "\" has no rows");
  return out;
}

}  // namespace grpo::rollout

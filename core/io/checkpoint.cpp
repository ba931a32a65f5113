// Checkpoint: a Hugging Face model directory. config.json plus either model.safetensors or the
// shards that model.safetensors.index.json lists ({"metadata": ..., "weight_map": {name: file}}).
#include <set>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/io/hf_config.h"

namespace grpo::io {

using nlohmann::json;

namespace {

// The index's weight_map: tensor name -> shard file name (a plain name inside the directory).
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  json j;
  try {
    j = json::parse(read_file(index_path));
  } catch (const json::exception& e) {
    throw Error(index_path, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(index_path, "expected an object with a \"weight_map\" object {tensor name: shard file}");
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string())
      throw Error(index_path, "weight_map[\"" + name + "\"]: expected a shard file name, got " + file.dump());
    std::string f = file.get<std::string>();
    if (f.empty() || f.front() == '/' || f.find("..") != std::string::npos)
      throw Error(index_path, "weight_map[\"" + name + "\"]: shard \"" + f + "\" is not a file name in this directory");
    out[name] = f;
  }
  if (out.empty()) throw Error(index_path, "weight_map is empty");
  return out;
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir) {
  check(is_directory(dir), dir, "not a directory", "pass the folder holding config.json and *.safetensors");
  const std::string config_path = path_join(dir, "config.json");
  check(file_exists(config_path), dir, "no config.json in this directory",
        "a Hugging Face model folder holds config.json and model.safetensors");
  Checkpoint c;
  c.dir_ = dir;
  c.config_ = ModelConfig::load(config_path);

  const std::string single = path_join(dir, "model.safetensors");
  const std::string index_path = path_join(dir, "model.safetensors.index.json");
  if (file_exists(index_path)) {
    std::map<std::string, size_t> shard_of_file;
    for (const auto& [name, file] : read_weight_map(index_path)) {
      auto it = shard_of_file.find(file);
      if (it == shard_of_file.end()) {
        const std::string shard_path = path_join(dir, file);
        check(file_exists(shard_path), index_path,
              "shard \"" + file + "\" (holding tensor \"" + name + "\") is missing from " + dir,
              "the download is incomplete");
        c.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(shard_path)));
        it = shard_of_file.emplace(file, c.files_.size() - 1).first;
      }
      const SafetensorsFile* f = c.files_[it->second].get();
      const TensorInfo* info = f->find(name);
      check(info != nullptr, index_path,
            "tensor \"" + name + "\" is listed in shard \"" + file + "\", but " + f->path() + " lacks it",
            "the index and the shards come from different checkpoints?");
      c.index_[name] = {f, info};
    }
  } else if (file_exists(single)) {
    c.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(single)));
    for (const TensorInfo& t : c.files_.back()->tensors()) c.index_[t.name] = {c.files_.back().get(), &t};
  } else {
    throw Error(dir, "no model.safetensors or model.safetensors.index.json",
                file_exists(path_join(dir, "pytorch_model.bin"))
                    ? "only pytorch_model.bin is present: convert the checkpoint to safetensors"
                    : "a Hugging Face model folder holds config.json and model.safetensors");
  }
  return c;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : index_) out.push_back(name);
  return out;
}

std::optional<Checkpoint::Entry> Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

Checkpoint::Entry Checkpoint::at(const std::string& name) const {
  if (auto e = find(name)) return *e;
  std::string near = nearest_name(name, tensor_names());
  throw Error(dir_ + ": tensor \"" + name + "\"", "not in this checkpoint",
              near.empty() ? "wrong base model?" : "did you mean \"" + near + "\"?");
}

}  // namespace grpo::io

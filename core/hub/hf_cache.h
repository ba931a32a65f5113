// The Hugging Face Hub cache, read and laid out exactly as huggingface_hub does (constants.py,
// file_download.py, _snapshot_download.py): where the cache is (HF_HUB_CACHE, else HF_HOME/hub,
// else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub), how a repo id becomes a
// folder (models--org--name, datasets--org--name), and how a revision becomes a snapshot
// (refs/<revision> holds the commit; snapshots/<commit>/ holds the files as relative links into
// blobs/). A model argument that is an existing directory stays that directory.
//
// Repo ids and revisions are untrusted input (configs, the command line, the app's model field,
// sibling names from a server): they are validated as the Hub does before they touch a path.
// No Qt, no torch: every layer that accepts a model folder can call this.
#pragma once

#include <optional>
#include <string>

namespace grpo::hub {

enum class RepoType { Model, Dataset };

const char* repo_type_name(RepoType t);             // "model" | "dataset"
RepoType parse_repo_type(const std::string& name);  // throws on anything else

// ---- environment (read on every call: tests and the app may change it) ----
// HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface (~ and $VARS expanded).
std::string hf_home();
// HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else hf_home()/hub.
std::string hub_cache_dir();
// HF_ENDPOINT without trailing '/', else https://huggingface.co.
std::string hub_endpoint();
// HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is 1/ON/YES/TRUE, case-insensitive.
bool hub_offline();
// HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else the file HF_TOKEN_PATH (default hf_home()/token);
// \r and \n removed and trimmed; nullopt when none or empty.
std::optional<std::string> hub_token();

// ---- names ----
// huggingface_hub's validate_repo_id: "name" or "namespace/name"; [A-Za-z0-9_.-], first and last
// character of each part alphanumeric or '_', name at most 96 characters (namespace: ours, 96),
// no "--" or "..", not ending in ".git". Throws grpo::Error saying which rule failed.
void validate_repo_id(const std::string& repo_id);
bool is_valid_repo_id(const std::string& repo_id);
// A branch, tag, "refs/pr/N" or commit: printable ASCII without spaces, backslashes, "..",
// empty or leading '/' segments, at most 256 characters. Throws grpo::Error.
void validate_revision(const std::string& revision);
// Exactly `n` lowercase hex digits (a commit is 40, an LFS sha256 etag 64).
bool is_lower_hex(const std::string& s, size_t n);
// ^[0-9a-f]{40}$ (file_download.py REGEX_COMMIT_HASH).
bool is_commit_hash(const std::string& s);
// A file path inside a repo as the Hub lists it ("model.safetensors", "sub/dir/file"): relative,
// '/'-separated, no empty, "." or ".." segments, no backslash or control characters, at most
// 1024 bytes of valid UTF-8. Throws grpo::Error naming the path.
void validate_repo_file_path(const std::string& path);

// "models--org--name" (repo_folder_name in file_download.py).
std::string repo_folder_name(const std::string& repo_id, RepoType type);
// <cache_dir>/<repo_folder_name>; cache_dir "" = hub_cache_dir().
std::string repo_cache_dir(const std::string& repo_id, RepoType type, const std::string& cache_dir = {});

// ---- resolution ----
struct ResolvedRepo {
  std::string dir;       // the local folder to read
  std::string repo_id;   // "" when name_or_path was a local directory
  std::string revision;  // as asked ("main" by default); "" for a local directory
  std::string commit;    // the snapshot's commit hash; "" for a local directory
  bool from_cache() const { return !repo_id.empty(); }
};

// An existing directory -> itself. Otherwise a repo id -> its snapshot for `revision` ("" =
// "main") in the cache: a 40-hex commit maps directly to snapshots/<commit>, anything else is
// read from refs/<revision>. Never touches the network. Throws grpo::Error naming the cache dir
// searched and the revision, with a hint to run `grpo download REPO_ID`.
ResolvedRepo resolve_repo(const std::string& name_or_path, const std::string& revision = {},
                          RepoType type = RepoType::Model, const std::string& cache_dir = {});
// resolve_repo(...).dir.
std::string resolve_model_dir(const std::string& name_or_path, const std::string& revision = {},
                              RepoType type = RepoType::Model, const std::string& cache_dir = {});

// fnmatch as Python's (what huggingface_hub's filter_repo_objects uses): '*' and '?' match any
// character including '/', [abc], [a-z] and [!abc] sets; a '[' without its ']' is literal.
// One backtrack point per '*' seen: O(pattern x name) steps whatever the pattern.
bool fnmatch(const std::string& pattern, const std::string& name);

// ~ and $VAR / ${VAR} expanded as huggingface_hub's os.path.expandvars(os.path.expanduser(...)) does
// (an unset variable is left as written).
std::string expand_user_vars(const std::string& path);

}  // namespace grpo::hub

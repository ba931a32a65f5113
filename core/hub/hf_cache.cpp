// The Hugging Face cache: environment, name validation, and repo id -> snapshot folder.
// Each rule cites the huggingface_hub source it follows.
#include "core/hub/hf_cache.h"

#include <cstdlib>
#include <sys/stat.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"

namespace grpo::hub {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}
bool env_set(const char* name) { return std::getenv(name) != nullptr; }

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// One part of a repo id (REPO_ID_REGEX of utils/_validators.py, ASCII): [\w\-.]+ starting and
// ending with \w.
std::string part_problem(const std::string& part, size_t max_len) {
  if (part.empty()) return "an empty name";
  if (part.size() > max_len) return "more than " + std::to_string(max_len) + " characters";
  for (char c : part)
    if (!word_char(c) && c != '-' && c != '.') return "the character '" + std::string(1, c) + "'";
  if (!word_char(part.front()) || !word_char(part.back())) return "a name that starts or ends with '-' or '.'";
  return {};
}

std::string read_ref(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 256) return {};
  std::string s = trim(read_file(path));
  return is_commit_hash(s) ? s : std::string();
}

}  // namespace

const char* repo_type_name(RepoType t) { return t == RepoType::Dataset ? "dataset" : "model"; }

RepoType parse_repo_type(const std::string& name) {
  if (name == "model") return RepoType::Model;
  if (name == "dataset") return RepoType::Dataset;
  throw Error("repo type", "\"" + name + "\" is not supported", "use \"model\" or \"dataset\"");
}

std::string expand_user_vars(const std::string& path) {
  // os.path.expanduser: a leading "~" or "~/" is $HOME.
  std::string s = path;
  if (!s.empty() && s[0] == '~' && (s.size() == 1 || s[1] == '/')) {
    const std::string home = env("HOME");
    if (!home.empty()) s = home + s.substr(1);
  }
  // os.path.expandvars: $NAME and ${NAME}; unset ones stay as written.
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '$') { out += s[i++]; continue; }
    size_t j = i + 1;
    const bool braced = j < s.size() && s[j] == '{';
    if (braced) ++j;
    size_t k = j;
    while (k < s.size() && word_char(s[k])) ++k;
    if (k == j || (braced && (k >= s.size() || s[k] != '}'))) { out += s[i++]; continue; }
    const std::string name = s.substr(j, k - j);
    const size_t end = braced ? k + 1 : k;
    if (env_set(name.c_str())) out += env(name.c_str());
    else out += s.substr(i, end - i);
    i = end;
  }
  return out;
}

// constants.py: HF_HOME = expandvars(expanduser(getenv("HF_HOME", join(getenv("XDG_CACHE_HOME",
// "~/.cache"), "huggingface")))).
std::string hf_home() {
  if (env_set("HF_HOME")) return expand_user_vars(env("HF_HOME"));
  const std::string xdg = env_set("XDG_CACHE_HOME") ? env("XDG_CACHE_HOME") : path_join(env("HOME"), ".cache");
  return expand_user_vars(path_join(xdg, "huggingface"));
}

// constants.py: HF_HUB_CACHE = expandvars(expanduser(getenv("HF_HUB_CACHE", getenv("HUGGINGFACE_HUB_CACHE",
// HF_HOME/hub)))).
std::string hub_cache_dir() {
  if (env_set("HF_HUB_CACHE")) return expand_user_vars(env("HF_HUB_CACHE"));
  if (env_set("HUGGINGFACE_HUB_CACHE")) return expand_user_vars(env("HUGGINGFACE_HUB_CACHE"));
  return path_join(hf_home(), "hub");
}

std::string hub_endpoint() {
  std::string e = env_set("HF_ENDPOINT") ? env("HF_ENDPOINT") : "https://huggingface.co";
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

// constants.py: _is_true(HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE), ENV_VARS_TRUE_VALUES.
bool hub_offline() {
  std::string v = env("HF_HUB_OFFLINE");
  if (v.empty()) v = env("TRANSFORMERS_OFFLINE");
  for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

// utils/_auth.py: HF_TOKEN or HUGGING_FACE_HUB_TOKEN, else the file HF_TOKEN_PATH; _clean_token.
std::optional<std::string> hub_token() {
  auto clean = [](std::string t) -> std::optional<std::string> {
    std::string s;
    for (char c : t)
      if (c != '\r' && c != '\n') s += c;
    s = trim(s);
    if (s.empty()) return std::nullopt;
    return s;
  };
  std::string t = env("HF_TOKEN");
  if (t.empty()) t = env("HUGGING_FACE_HUB_TOKEN");
  if (!t.empty()) return clean(t);
  const std::string path = env_set("HF_TOKEN_PATH") ? expand_user_vars(env("HF_TOKEN_PATH")) : path_join(hf_home(), "token");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 4096) return std::nullopt;
  return clean(read_file(path));
}

void validate_repo_id(const std::string& repo_id) {
  const std::string ctx = "repo id \"" + repo_id + "\"";
  const auto slash = repo_id.find('/');
  check(slash == std::string::npos || repo_id.find('/', slash + 1) == std::string::npos, ctx, "must be \"name\" or \"namespace/name\"", "a dataset is --repo-type dataset, not a \"datasets/\" prefix");
  if (slash != std::string::npos) {
    const std::string p = part_problem(repo_id.substr(0, slash), 96);
    check(p.empty(), ctx, "the namespace has " + p, "names use letters, digits, '-', '_' and '.'");
  }
  const std::string p = part_problem(slash == std::string::npos ? repo_id : repo_id.substr(slash + 1), 96);
  check(p.empty(), ctx, "the name has " + p, "names use letters, digits, '-', '_' and '.', at most 96 characters");
  check(repo_id.find("--") == std::string::npos && repo_id.find("..") == std::string::npos, ctx,
        "cannot contain \"--\" or \"..\"");
  check(!ends_with(repo_id, ".git"), ctx, "cannot end in \".git\"");
}

bool is_valid_repo_id(const std::string& repo_id) {
  try {
    validate_repo_id(repo_id);
    return true;
  } catch (const Error&) {
    return false;
  }
}

void validate_revision(const std::string& revision) {
  const std::string ctx = "revision \"" + revision + "\"";
  check(!revision.empty() && revision.size() <= 256, ctx, "must be 1 to 256 characters");
  for (char c : revision)
    check(c > ' ' && c < 127 && c != '\\', ctx, "has a character that no branch, tag or commit has");
  for (const auto& seg : split(revision, '/'))
    check(!seg.empty() && seg != "." && seg != "..", ctx, "has an empty, \".\" or \"..\" path segment");
}

bool is_lower_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool is_commit_hash(const std::string& s) { return is_lower_hex(s, 40); }

void validate_repo_file_path(const std::string& path) {
  const std::string ctx = "repo file \"" + path + "\"";
  check(!path.empty() && path.size() <= 1024 && is_valid_utf8(path), ctx, "must be 1 to 1024 bytes of UTF-8");
  for (unsigned char c : path) check(c >= 0x20 && c != 0x7f && c != '\\', ctx, "has a control character or a backslash");
  check(path.front() != '/', ctx, "is an absolute path");
  for (const auto& seg : split(path, '/'))
    check(!seg.empty() && seg != "." && seg != "..", ctx, "has an empty, \".\" or \"..\" path segment");
}

std::string repo_folder_name(const std::string& repo_id, RepoType type) {
  validate_repo_id(repo_id);
  std::string out = std::string(repo_type_name(type)) + "s";
  for (const auto& part : split(repo_id, '/')) out += "--" + part;
  return out;
}

std::string repo_cache_dir(const std::string& repo_id, RepoType type, const std::string& cache_dir) {
  return path_join(cache_dir.empty() ? hub_cache_dir() : cache_dir, repo_folder_name(repo_id, type));
}

// _snapshot_download.py (offline branch): a commit revision is snapshots/<revision>; otherwise
// refs/<revision> holds the commit; the snapshot folder must exist.
ResolvedRepo resolve_repo(const std::string& name_or_path, const std::string& revision, RepoType type,
                          const std::string& cache_dir) {
  ResolvedRepo r;
  check(!name_or_path.empty(), "model", "no model given", "a model directory or a Hub repo id such as Qwen/Qwen2.5-0.5B");
  if (is_directory(name_or_path)) {
    r.dir = name_or_path;
    return r;
  }
  const std::string cache = cache_dir.empty() ? hub_cache_dir() : cache_dir;
  const std::string kind = repo_type_name(type);
  if (!is_valid_repo_id(name_or_path)) {
    std::string why;
    try {
      validate_repo_id(name_or_path);
    } catch (const Error& e) {
      why = e.message();
    }
    throw Error(name_or_path, "is not a directory, nor a Hub repo id (" + why + ")",
                "give a local " + kind + " folder, or a repo id such as org/name that is in the cache " + cache);
  }
  r.repo_id = name_or_path;
  r.revision = revision.empty() ? "main" : revision;
  validate_revision(r.revision);
  const std::string repo_dir = path_join(cache, repo_folder_name(r.repo_id, type));
  const std::string hint = "download it with `grpo download " + r.repo_id +
                           (type == RepoType::Dataset ? " --repo-type dataset" : "") +
                           (r.revision == "main" ? "" : " --revision " + r.revision) +
                           "`, or point HF_HUB_CACHE (or HF_HOME) at the cache that holds it";
  const std::string where = kind + " \"" + r.repo_id + "\" (revision " + r.revision + ")";
  if (is_commit_hash(r.revision)) {
    r.commit = r.revision;
  } else {
    const std::string ref = path_join(path_join(repo_dir, "refs"), r.revision);
    r.commit = read_ref(ref);
    check(!r.commit.empty(), where,
          is_directory(repo_dir) ? "is not in the Hugging Face cache " + cache + ": no commit in " + ref
                                 : "is not a local directory and is not in the Hugging Face cache " + cache +
                                       " (no " + repo_folder_name(r.repo_id, type) + " there)",
          hint);
  }
  r.dir = path_join(path_join(repo_dir, "snapshots"), r.commit);
  check(is_directory(r.dir), where, "is not in the Hugging Face cache " + cache + ": no snapshot " + r.dir, hint);
  return r;
}

std::string resolve_model_dir(const std::string& name_or_path, const std::string& revision, RepoType type,
                              const std::string& cache_dir) {
  return resolve_repo(name_or_path, revision, type, cache_dir).dir;
}

namespace {

// Whether pattern item at p[pi] (not '*') matches the character c; sets `next` to the index after it.
bool item_matches(const std::string& p, size_t pi, char c, size_t& next) {
  if (p[pi] == '?') {
    next = pi + 1;
    return true;
  }
  if (p[pi] == '[') {
    size_t j = pi + 1;
    const bool neg = j < p.size() && p[j] == '!';
    if (neg) ++j;
    size_t end = j;
    if (end < p.size() && p[end] == ']') ++end;  // a ']' first in the set is a member
    while (end < p.size() && p[end] != ']') ++end;
    if (end < p.size()) {
      bool in = false;
      for (size_t k = j; k < end; ++k) {
        if (k + 2 < end && p[k + 1] == '-') {
          in = in || (c >= p[k] && c <= p[k + 2]);
          k += 2;
        } else {
          in = in || p[k] == c;
        }
      }
      next = end + 1;
      return in != neg;
    }
    // no closing ']': a literal '['
  }
  next = pi + 1;
  return p[pi] == c;
}

}  // namespace

bool fnmatch(const std::string& p, const std::string& s) {
  size_t pi = 0, si = 0;
  size_t star_p = std::string::npos, star_s = 0;  // the last '*' and where its match ends so far
  while (si < s.size()) {
    size_t next = 0;
    if (pi < p.size() && p[pi] == '*') {
      star_p = ++pi;
      star_s = si;
    } else if (pi < p.size() && item_matches(p, pi, s[si], next)) {
      pi = next;
      ++si;
    } else if (star_p != std::string::npos) {
      pi = star_p;  // the last '*' takes one more character
      si = ++star_s;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace grpo::hub

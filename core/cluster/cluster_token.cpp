// Cluster token file handling: create with O_EXCL and mode 0600, refuse files others can read.
#include "core/cluster/cluster_token.h"

#include <QRandomGenerator>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"

namespace grpo::cluster {

std::string default_token_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  std::string base;
  if (xdg && *xdg) {
    base = xdg;
  } else {
    const char* home = std::getenv("HOME");
    check(home && *home, "cluster token", "neither XDG_CONFIG_HOME nor HOME is set",
          "set cluster_token_file in the run config or pass --token-file");
    base = path_join(home, ".config");
  }
  return path_join(path_join(base, "grpo-studio"), "cluster-token");
}

std::string read_token_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(path, std::string("cannot read the cluster token: ") + std::strerror(errno),
                "create one with `grpo worker --token-file` or copy the trainer's token file");
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    throw Error(path, "the cluster token file is readable by group or others", "chmod 600 " + path);
  std::string token = trim(read_file(path));
  check(!token.empty(), path, "the cluster token file is empty", "delete it to have a new token made");
  check(token.find_first_of(" \t\r\n") == std::string::npos, path,
        "the cluster token must be one word (no whitespace)", "delete it to have a new token made");
  return token;
}

std::string load_or_create_token(const std::string& path) {
  if (file_exists(path)) return read_token_file(path);
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir.string(), "cannot create the folder for the cluster token: " + ec.message());
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 32; ++i) {
    const quint32 byte = QRandomGenerator::system()->generate() & 0xff;
    token += hex[byte >> 4];
    token += hex[byte & 15];
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return read_token_file(path);  // another process made it first
    throw Error(path, std::string("cannot create the cluster token: ") + std::strerror(errno));
  }
  const std::string line = token + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const bool closed = ::close(fd) == 0;
  if (!ok || !closed) {
    ::unlink(path.c_str());
    throw Error(path, "cannot write the cluster token (disk full?)");
  }
  return token;
}

bool tokens_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

bool bearer_matches(const std::string& header, const std::string& token) {
  static const std::string prefix = "Bearer ";
  if (header.size() <= prefix.size() || header.compare(0, prefix.size(), prefix) != 0) return false;
  return tokens_equal(header.substr(prefix.size()), token);
}

}  // namespace grpo::cluster

// The cluster token: the shared secret every worker request carries as `Authorization: Bearer
// <token>` and the key that signs discovery beacons. Generated on first use (32 random bytes,
// hex), stored with 0600 permissions, never logged.
#pragma once

#include <string>

namespace grpo::cluster {

// $XDG_CONFIG_HOME/grpo-studio/cluster-token, or ~/.config/grpo-studio/cluster-token.
std::string default_token_path();

// Reads the token in `path`, creating the file (and its folder) with a fresh random token and
// mode 0600 when it does not exist. Throws grpo::Error naming the file when it cannot be read or
// written, is empty, or is readable by group or others (hint: chmod 600).
std::string load_or_create_token(const std::string& path);

// Reads an existing token file (same checks, never creates). Surrounding whitespace is trimmed.
std::string read_token_file(const std::string& path);

// Compares in time independent of where the strings differ (no early exit on the first byte).
bool tokens_equal(const std::string& a, const std::string& b);

// True when `header` is exactly "Bearer <token>" for this token (constant-time on the token).
bool bearer_matches(const std::string& header, const std::string& token);

}  // namespace grpo::cluster

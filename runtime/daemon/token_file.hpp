// The operator token: a random secret in <state dir>/token (mode 0600) that a
// TCP request carries as :AUTH; local clients read it from the file.
#pragma once

#include <filesystem>
#include <string>

#include "base/result.hpp"

namespace passepartout {

// <state_dir>/token.
std::filesystem::path token_file(const std::filesystem::path& state_dir);

// The token in `file`, created first when missing: 32 random bytes as 64
// lower-case hex digits, written mode 0600 (folders created 0700) and renamed
// into place so a reader never sees half of it. An existing file is kept (so
// clients holding the token stay valid across restarts) unless it is not a
// regular file, is readable or writable by group or others, or holds no
// token: those are refused (`refused` / `invalid_input`) with what to fix.
Result<std::string> load_or_create_token(const std::filesystem::path& file);

// Reads the token a daemon wrote (for clients): the file's first line,
// without surrounding whitespace. not_found when there is none.
Result<std::string> read_token(const std::filesystem::path& file);

}  // namespace passepartout

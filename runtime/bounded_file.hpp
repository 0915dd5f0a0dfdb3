// Reading a whole file that must stay under a size limit: manifests, scripts,
// skill libraries. Memory follows the file's size, not the limit.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "result.hpp"

namespace passepartout {

// The whole of `file`, a regular file of at most `max_bytes` bytes. Errors
// carry only what the caller's message lacks, for it to say which file and
// why it was read:
//   not_found       "No such file or directory" (or "Not a directory")
//   io_error        the system's reason, or "not a regular file" (a folder,
//                   a FIFO: never opened for reading, so never waited on)
//   limit_exceeded  "" (a file that grows past the limit while it is read
//                   is refused too, not cut)
Result<std::string> read_bounded_file(const std::filesystem::path& file, std::size_t max_bytes);

}  // namespace passepartout

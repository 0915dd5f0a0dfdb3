// Whole-file I/O shared across the runtime: reading a file that must stay
// under a size limit (manifests, scripts, skill libraries), and syncing a
// file or a folder to disk (crash-safe replacement of the memory file, new
// SQLite files).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace passepartout {

// The whole of `file`, a regular file of at most `max_bytes` bytes. Errors
// carry only what the caller's message lacks, for it to say which file and
// why it was read:
//   not_found       "No such file or directory" (or "Not a directory")
//   io_error        the system's reason, or "not a regular file" (a folder,
//                   a FIFO: never opened for reading, so never waited on)
//   limit_exceeded  the size found, "<n> bytes" (a file that grows past the
//                   limit while it is read is refused too, not cut)
// Memory follows the file's size, not the limit.
Result<std::string> read_bounded_file(const std::filesystem::path& file, std::size_t max_bytes);

// fsync(2) of `path`, a file or (with `is_folder`) a folder, so that what was
// written or renamed in it is on disk: 0, or the errno of the open or sync.
int sync_path(const std::filesystem::path& path, bool is_folder = false);

// Replaces `target` with `bytes`, durably: written to <folder>/.<name>.XXXXXX
// with `mode`, synced, renamed over `target`, the folder synced. Whoever reads
// it, even after a crash, finds the old bytes or the new ones, whole. An
// io_error names the file and the step that failed; the temporary file is
// removed.
Result<void> write_file_durably(const std::filesystem::path& target, std::string_view bytes, unsigned mode);

}  // namespace passepartout

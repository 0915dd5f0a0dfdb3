// The memory file: both tables of memory as one printed s-expression, written
// crash-safely (temporary file, fsync, rename, fsync of the folder) and read
// back with the safe reader and full validation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "memory/memory_table.hpp"

namespace passepartout {

inline constexpr std::string_view kMemoryFileFormat = "passepartout-memory";
inline constexpr std::int64_t kMemoryFileVersion = 1;
// Largest file read() accepts.
inline constexpr std::uintmax_t kMaxMemoryFileBytes = std::uintmax_t{1} << 30;

// The file's text, format version 1:
//   (:FORMAT "passepartout-memory" :VERSION 1 :SAVED-AT <universal time>
//    :HISTORY (<object> ...)     every archived object, each on its own line
//    :OBJECTS ("<hash>" ...))    the live table, by hash (the id is the object's)
// where <object> is
//   (:ID "n1" :TYPE :HEADLINE :ATTRIBUTES (...) :CONTENT "..." :PARENT "p"|NIL
//    :CHILDREN ("c1" ...) :CHILD-HASHES ("<hash>" ...) :VERSION <n> :LAST-SYNC <n> :HASH "<hash>")
// Strings are UTF-8. Keys are upper case; readers ignore keys they do not know.
std::string encode_memory(const MemoryImage& image, std::int64_t saved_at);

// Parses and validates encode_memory()'s text. `source` names it in messages
// ("memory file '/x/memory.sexp'"). Every field is checked: kinds, hash shape,
// each :HASH against the object's contents, each child link against the
// history, each live hash against the history, unique hashes and ids. Errors
// say where and what, e.g. `memory file '/x': history object 3 (id "n1"): :HASH
// does not match its contents`; invalid_input for a malformed or inconsistent
// file, limit_exceeded for one too large or too deep, refused for a newer format.
Result<MemoryImage> decode_memory(std::string_view text, std::string_view source);

// Writes `image` to `file`: creates missing folders (mode 0700), writes a
// temporary file (mode 0600) beside it, fsyncs it, renames it over `file` and
// fsyncs the folder. On failure the temporary file is removed and `file` is
// left as it was; io_error says which step and path failed. Any thread; two
// writers of the same file must be serialised by the caller.
Result<void> write_memory_file(const std::filesystem::path& file, const MemoryImage& image, std::int64_t saved_at);

// Reads and decodes `file`. nullopt when it does not exist (nothing saved yet);
// io_error when it cannot be read; decode_memory()'s errors otherwise.
Result<std::optional<MemoryImage>> read_memory_file(const std::filesystem::path& file);

// Where memory is kept by default: $MEMORY_SNAPSHOT_PATH when set, else
// memory.sexp in the state folder (see default_state_dir()).
std::filesystem::path default_memory_file();

// The steps of write_memory_file(), for fault injection.
enum class MemoryFileStep { create, write, sync, rename };

// Makes the next write_memory_file() on the calling thread fail at `step` as
// if the operating system had refused. Tests only.
void fail_next_write_for_test(MemoryFileStep step);

}  // namespace passepartout

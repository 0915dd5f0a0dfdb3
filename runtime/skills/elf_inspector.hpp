// inspect_elf: reads a skill library's ELF structure without loading it: whether
// the file is completely written, and the STB_GNU_UNIQUE symbols that would pin it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace passepartout {

// What inspecting one file found. Pure data; any thread.
struct ElfReport {
  // A well-formed ELF64 shared object (of this host's byte order) whose program
  // headers, section headers and the bytes they describe all lie within the
  // file. A file watcher waits for this before loading a library: a copy still
  // being written, truncated anywhere, is not complete.
  bool complete = false;
  // Why the file is not complete, e.g. "file is 4096 bytes, its section headers
  // end at 14232", "not an ELF file", "not a shared object: ...". Empty when complete.
  std::string problem;
  // Names of the defined dynamic symbols with binding STB_GNU_UNIQUE (at most
  // kMaxUniqueSymbols, in symbol table order). glibc never unloads a library
  // that has one, so a hot swap of it would keep running the old code.
  // Filled only when the file is complete.
  std::vector<std::string> gnu_unique_symbols;

  static constexpr std::size_t kMaxUniqueSymbols = 20;
};

// The largest file inspect_elf reads.
inline constexpr std::size_t kMaxElfInspectBytes = std::size_t{512} * 1024 * 1024;

// Reads `file` (a regular file of at most kMaxElfInspectBytes; a file that grows
// while being read is read as far as it got) and inspects it. Never throws: a
// missing file is ErrorCode::not_found, a bigger one limit_exceeded, a
// directory or device invalid_input, any other failure io_error. Any thread.
Result<ElfReport> inspect_elf(const std::filesystem::path& file);

// The same on bytes already in memory. Every offset and size in the file is
// checked against `bytes` before use, so any input is safe. Any thread.
ElfReport inspect_elf_bytes(std::string_view bytes);

}  // namespace passepartout

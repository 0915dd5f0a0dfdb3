// The crash record: the line the crash writer (base/crash_context.hpp) leaves
// in the state folder when a skill's hook crashed the daemon or called
// exit(), read at the next start so that the skill is held back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace passepartout {

struct CrashRecord {
  std::string cause;  // "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", or "exit" (the skill called exit())
  std::int64_t at_unix_ms = 0;
  std::string skill;
  std::string version;
  std::string hook;    // "gate", "prompt", "call_tool", "create", ...
  std::string sha256;  // of the library that crashed, lower-case hex

  // "SIGSEGV in hook gate at 2026-11-28T22:10:00Z", "called exit() in hook gate at ...".
  std::string what() const;
  // Why the skill is not loaded at this start, with how to load it again
  // (Disabled::reason, status, the audit row).
  std::string hold_reason() const;

  bool operator==(const CrashRecord&) const = default;
};

// Parses the record's one line. invalid_input, saying what is wrong, for
// anything else: a record is trusted only when every field is well-formed.
Result<CrashRecord> parse_crash_record(std::string_view text);

// The record in a state folder: <state_dir>/last-crash.
std::filesystem::path crash_record_file(const std::filesystem::path& state_dir);

// The skills held back after a crash, one record line each, kept until an
// operator loads them: <state_dir>/held-skills.
std::filesystem::path held_skills_file(const std::filesystem::path& state_dir);

// The records of `file` (none when it is absent); a line that does not parse
// is logged as a warning and skipped.
std::vector<CrashRecord> read_held_skills(const std::filesystem::path& file);

// Replaces `file` with `records` (mode 0600, written aside, synced and
// renamed into place); an empty list removes it.
Result<void> write_held_skills(const std::filesystem::path& file, const std::vector<CrashRecord>& records);

// The record's line, as the crash writer writes it (parse_crash_record reads it).
std::string crash_record_line(const CrashRecord& record);

// Reads the record `file` left by the previous run: nullopt when there is
// none (no file, or empty: the run ended without a crash in a hook). A file
// that cannot be read or does not parse is logged as a warning and ignored.
std::optional<CrashRecord> read_crash_record(const std::filesystem::path& file);

}  // namespace passepartout

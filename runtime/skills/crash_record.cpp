// The crash record: parsing what the crash writer left, and the texts that
// tell the operator about it.
#include "skills/crash_record.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <fstream>

#include "base/errno_text.hpp"
#include "base/file_io.hpp"
#include "base/log.hpp"
#include "skills/skill_manifest.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kHeader = "passepartout-crash 1";
constexpr std::size_t kMaxRecordBytes = 4096;  // the writer's line is at most 512 bytes
constexpr std::array<std::string_view, 6> kCauses{"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "exit"};

bool is_hex_digest(std::string_view text) {
  if (text.size() != 64) return false;
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool is_token(std::string_view text) {
  if (text.empty() || text.size() > 64) return false;
  for (const char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == '+' || c == '_';
    if (!ok) return false;
  }
  return true;
}

Unexpected<Error> bad(std::string_view why) {
  return fail(ErrorCode::invalid_input, "bad crash record: " + std::string(why));
}

std::string utc_time(std::int64_t unix_ms) {
  const auto seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  if (::gmtime_r(&seconds, &utc) == nullptr) return std::to_string(unix_ms) + " ms";
  char text[32];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(text, n);
}

}  // namespace

std::string CrashRecord::what() const {
  const std::string how = cause == "exit" ? "called exit()" : cause;
  return how + " in hook " + hook + " at " + utc_time(at_unix_ms);
}

std::string CrashRecord::hold_reason() const {
  return (cause == "exit" ? "ended the daemon: " : "crashed the daemon: ") + what() + " (version " + version +
         ", library sha256 " + sha256.substr(0, 12) + "); not loaded again until an operator loads it " +
         "(passepartout skills load MANIFEST, or skills reload " + skill +
         "); running it out of process (isolation: process in its manifest) would contain it";
}

Result<CrashRecord> parse_crash_record(std::string_view text) {
  if (text.size() > kMaxRecordBytes) return bad("longer than " + std::to_string(kMaxRecordBytes) + " bytes");
  if (text.empty() || text.back() != '\n') return bad("not one whole line");
  text.remove_suffix(1);
  if (text.find('\n') != std::string_view::npos) return bad("more than one line");

  std::size_t at = text.find('\t');
  if (text.substr(0, at) != kHeader) return bad("it does not start with \"" + std::string(kHeader) + "\"");
  CrashRecord record;
  constexpr std::array<std::string_view, 6> kKeys{"cause", "at_ms", "skill", "version", "hook", "sha256"};
  for (const std::string_view key : kKeys) {
    if (at == std::string_view::npos) return bad("no " + std::string(key));
    const std::size_t next = text.find('\t', at + 1);
    const std::string_view field = text.substr(at + 1, next == std::string_view::npos ? next : next - at - 1);
    at = next;
    const std::size_t equals = field.find('=');
    if (equals == std::string_view::npos || field.substr(0, equals) != key) {
      return bad("expected " + std::string(key) + "=..., found \"" + std::string(field.substr(0, 40)) + "\"");
    }
    const std::string_view value = field.substr(equals + 1);
    if (key == "cause") {
      if (std::find(kCauses.begin(), kCauses.end(), value) == kCauses.end()) {
        return bad("unknown cause \"" + std::string(value.substr(0, 40)) + "\"");
      }
      record.cause = std::string(value);
    } else if (key == "at_ms") {
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), record.at_unix_ms);
      if (ec != std::errc() || end != value.data() + value.size() || value.empty() || record.at_unix_ms <= 0) {
        return bad("at_ms is not a time in milliseconds");
      }
    } else if (key == "skill") {
      if (!is_valid_skill_name(value)) return bad("\"" + std::string(value.substr(0, 40)) + "\" is no skill name");
      record.skill = std::string(value);
    } else if (key == "version") {
      if (!is_token(value)) return bad("the version is not a version");
      record.version = std::string(value);
    } else if (key == "hook") {
      if (!is_token(value)) return bad("the hook is not a hook's name");
      record.hook = std::string(value);
    } else if (!is_hex_digest(value)) {
      return bad("sha256 is not 64 lower-case hex digits");
    } else {
      record.sha256 = std::string(value);
    }
  }
  if (at != std::string_view::npos) return bad("more fields than it should have");
  return record;
}

std::filesystem::path crash_record_file(const std::filesystem::path& state_dir) { return state_dir / "last-crash"; }

std::string crash_record_line(const CrashRecord& record) {
  return std::string(kHeader) + "\tcause=" + record.cause + "\tat_ms=" + std::to_string(record.at_unix_ms) +
         "\tskill=" + record.skill + "\tversion=" + record.version + "\thook=" + record.hook +
         "\tsha256=" + record.sha256 + "\n";
}

std::filesystem::path held_skills_file(const std::filesystem::path& state_dir) { return state_dir / "held-skills"; }

std::vector<CrashRecord> read_held_skills(const std::filesystem::path& file) {
  std::vector<CrashRecord> records;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return records;
  auto text = read_bounded_file(file, std::size_t{1024} * 1024);
  if (!text) {
    log_message(LogLevel::warn, "crash", "cannot read {}: {}; no skill is held back", file.string(),
                text.error().message);
    return records;
  }
  std::size_t line_number = 0;
  for (std::size_t at = 0; at < text->size();) {
    std::size_t end = text->find('\n', at);
    end = end == std::string::npos ? text->size() : end + 1;
    ++line_number;
    auto record = parse_crash_record(std::string_view(*text).substr(at, end - at));
    if (record) {
      records.push_back(std::move(*record));
    } else {
      log_message(LogLevel::warn, "crash", "{}:{} ignored: {}", file.string(), line_number, record.error().message);
    }
    at = end;
  }
  return records;
}

Result<void> write_held_skills(const std::filesystem::path& file, const std::vector<CrashRecord>& records) {
  std::error_code ec;
  if (records.empty()) {
    std::filesystem::remove(file, ec);
    if (ec) return fail(ErrorCode::io_error, "cannot remove " + file.string() + ": " + ec.message());
    return {};
  }
  std::string text;
  for (const CrashRecord& record : records) text += crash_record_line(record);
  const std::filesystem::path aside = file.string() + ".new";
  const int fd = ::open(aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail(ErrorCode::io_error, "cannot write " + aside.string() + ": " + errno_text(errno));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const bool written = done == text.size() && ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  if (!written) {
    std::filesystem::remove(aside, ec);
    return fail(ErrorCode::io_error, "cannot write " + aside.string() + ": " + errno_text(error));
  }
  std::filesystem::rename(aside, file, ec);
  if (ec) return fail(ErrorCode::io_error, "cannot replace " + file.string() + ": " + ec.message());
  sync_path(file.parent_path(), true);
  return {};
}

std::optional<CrashRecord> read_crash_record(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  std::string text(kMaxRecordBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    log_message(LogLevel::warn, "crash", "cannot read the crash record {}; ignored", file.string());
    return std::nullopt;
  }
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.empty()) return std::nullopt;
  auto record = parse_crash_record(text);
  if (!record) {
    log_message(LogLevel::warn, "crash", "{} ignored: {}", file.string(), record.error().message);
    return std::nullopt;
  }
  return std::move(*record);
}

}  // namespace passepartout

// Creating, checking and reading the operator token file.
#include "daemon/token_file.hpp"
#include "base/errno_text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

#include "base/digest.hpp"

namespace passepartout {
namespace fs = std::filesystem;
namespace {

constexpr std::size_t kTokenBytes = 32;

bool is_token(std::string_view text) {
  return text.size() >= 32 && text.size() <= 256 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string trimmed_first_line(std::string text) {
  const std::size_t end = text.find('\n');
  if (end != std::string::npos) text.resize(end);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r' || text.back() == '\t')) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && (text[start] == ' ' || text[start] == '\t')) ++start;
  return text.substr(start);
}

Result<std::string> create(const fs::path& file) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) return fail(ErrorCode::io_error, "cannot create " + file.parent_path().string() + ": " + ec.message());
  ::chmod(file.parent_path().c_str(), 0700);
  const std::string token = random_hex(kTokenBytes);
  const fs::path temporary = file.string() + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return fail(ErrorCode::io_error, "cannot create " + temporary.string() + ": " + errno_text(errno));
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!written || ::rename(temporary.c_str(), file.c_str()) != 0) {
    const std::string why = errno_text(errno);
    ::unlink(temporary.c_str());
    return fail(ErrorCode::io_error, "cannot write the token file " + file.string() + ": " + why);
  }
  return token;
}

}  // namespace

fs::path token_file(const fs::path& state_dir) { return state_dir / "token"; }

Result<std::string> load_or_create_token(const fs::path& file) {
  struct stat info {};
  if (::lstat(file.c_str(), &info) != 0) {
    if (errno != ENOENT)
      return fail(ErrorCode::io_error, "cannot inspect the token file " + file.string() + ": " + errno_text(errno));
    return create(file);
  }
  if (!S_ISREG(info.st_mode)) {
    return fail(ErrorCode::refused, "the token file " + file.string() + " is not a regular file; remove it");
  }
  if ((info.st_mode & 077) != 0 || info.st_uid != ::geteuid()) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return fail(ErrorCode::refused,
                "the token file " + file.string() + " has mode " + mode +
                    " or another owner; it must be yours with mode 0600 (chmod 600 it, or delete it "
                    "for a new token)");
  }
  auto token = read_token(file);
  if (!token) return token;
  if (!is_token(*token)) {
    return fail(ErrorCode::invalid_input,
                "the token file " + file.string() + " holds no token (lower-case hex digits); delete it for a new one");
  }
  return token;
}

Result<std::string> read_token(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    if (errno == ENOENT)
      return fail(ErrorCode::not_found, "no token file " + file.string() + " (is the daemon running?)");
    return fail(ErrorCode::io_error, "cannot read the token file " + file.string() + ": " + errno_text(errno));
  }
  std::string text(512, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return trimmed_first_line(std::move(text));
}

}  // namespace passepartout

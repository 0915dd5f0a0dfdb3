// read_bounded_file, sync_path and write_file_durably over open/fstat/read/fsync/rename.
#include "base/file_io.hpp"
#include "base/errno_text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <system_error>

namespace passepartout {
namespace {

Unexpected<Error> os_error(int error) {
  const ErrorCode code = error == ENOENT || error == ENOTDIR ? ErrorCode::not_found : ErrorCode::io_error;
  return fail(code, errno_text(error));
}

}  // namespace

Result<std::string> read_bounded_file(const std::filesystem::path& file, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return os_error(errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) return os_error(errno);
  if (!S_ISREG(info.st_mode)) return fail(ErrorCode::io_error, "not a regular file");
  const auto reported = static_cast<std::size_t>(info.st_size);
  if (reported > max_bytes) return fail(ErrorCode::limit_exceeded, std::to_string(reported) + " bytes");
  // One byte more than the size reported, so a file that grew is noticed.
  std::string text(reported + 1, '\0');
  std::size_t size = 0;
  for (;;) {
    if (size == text.size()) {
      if (size > max_bytes) break;
      text.resize(std::min(size * 2, max_bytes + 1));
    }
    const ssize_t got = ::read(fd, text.data() + size, text.size() - size);
    if (got < 0) {
      if (errno == EINTR) continue;
      return os_error(errno);
    }
    if (got == 0) break;
    size += static_cast<std::size_t>(got);
  }
  if (size > max_bytes) return fail(ErrorCode::limit_exceeded, "more than " + std::to_string(max_bytes) + " bytes");
  text.resize(size);
  return text;
}

int sync_path(const std::filesystem::path& path, bool is_folder) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (is_folder ? O_DIRECTORY : 0));
  if (fd < 0) return errno;
  const int error = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return error;
}

Result<void> write_file_durably(const std::filesystem::path& target, std::string_view bytes, unsigned mode) {
  const std::filesystem::path folder = target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
  std::string pattern = (folder / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) return fail(ErrorCode::io_error, "cannot create a file in " + folder.string() + ": " + errno_text(errno));
  auto give_up = [&](const std::string& what) {
    const int error = errno;
    ::close(fd);
    ::unlink(pattern.c_str());
    return fail(ErrorCode::io_error, "cannot " + what + " " + target.string() + ": " + errno_text(error));
  };
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return give_up("write");
    written += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) return give_up("set the mode of");
  if (::fsync(fd) != 0) return give_up("sync");
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(pattern.c_str());
    return fail(ErrorCode::io_error, "cannot write " + target.string() + ": " + errno_text(error));
  }
  if (::rename(pattern.c_str(), target.c_str()) != 0) {
    const int error = errno;
    ::unlink(pattern.c_str());
    return fail(ErrorCode::io_error, "cannot rename a new file to " + target.string() + ": " + errno_text(error));
  }
  if (const int error = sync_path(folder, true); error != 0) {
    return fail(ErrorCode::io_error, "cannot sync the folder of " + target.string() + ": " + errno_text(error));
  }
  return {};
}

}  // namespace passepartout

// file-tools: the read-file and write-file tools the model may call, confined
// to one workspace folder: paths resolve inside it, symbolic links cannot lead
// out of it, reads are size-capped and writes replace a file atomically.
#include <passepartout/skill.hpp>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "skill_config.hpp"
#include "skill_text.hpp"
#include "unique_fd.hpp"

namespace {

using passepartout::Signal;
using passepartout::ValueRef;
using passepartout::bundled::boolean;
using passepartout::bundled::decimal;
using passepartout::bundled::error_text;
using passepartout::bundled::expand_home;
using passepartout::bundled::Fd;
using passepartout::bundled::positive_integer;

constexpr std::int64_t kDefaultMaxReadBytes = 1000000;
constexpr std::int64_t kDefaultMaxWriteBytes = 1000000;
constexpr std::size_t kMaxPathBytes = 4096;

// "'<path>'" for messages.
std::string quoted(std::string_view path) { return "'" + std::string(path) + "'"; }

// --- config ------------------------------------------------------------------------

// --- paths -------------------------------------------------------------------------

// The components of `path` with "", "." and ".." resolved lexically; false
// when ".." climbs above the start (the root, for an absolute path, stays put).
bool normalise(std::string_view path, bool absolute, std::vector<std::string>& out) {
  out.clear();
  while (!path.empty()) {
    const std::size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (out.empty()) {
        if (!absolute) return false;
        continue;
      }
      out.pop_back();
      continue;
    }
    out.emplace_back(part);
  }
  return true;
}

std::string join(const std::vector<std::string>& parts, std::size_t count) {
  if (count == 0) return ".";
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) out += '/';
    out += parts[i];
  }
  return out;
}

// Whether `prefix` is the start of `parts`.
bool starts_with(const std::vector<std::string>& parts, const std::vector<std::string>& prefix) {
  if (prefix.size() > parts.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (parts[i] != prefix[i]) return false;
  }
  return true;
}

// The message for a path operation that failed with `error`.
std::string path_error(std::string_view shown, int error) {
  switch (error) {
    case ENOENT:
      return quoted(shown) + " does not exist in the workspace";
    case EXDEV:
      return quoted(shown) + " leads outside the workspace through a symbolic link";
    case ELOOP:
      return quoted(shown) + " goes through a symbolic link that is not followed";
    case ENOTDIR:
      return "a folder on the way to " + quoted(shown) + " is not a folder";
    case EISDIR:
      return quoted(shown) + " is a folder, not a file";
    case EACCES:
      return "permission denied for " + quoted(shown);
    default:
      return quoted(shown) + ": " + error_text(error);
  }
}

// The tool's arguments: the plist itself, or its first element when the model
// wrapped the plist in a list (the seed's tool actuator unwrapped one level).
ValueRef arguments(const ValueRef& args) { return args.is_list() && args[0].is_list() ? args[0] : args; }

// Immutable after construction but for the temp-file counter and the openat2
// probe, both atomic: the tools may run on any number of threads at once.
class FileTools final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "file-tools";
  static constexpr const char kVersion[] = "1.0.0";
  static constexpr passepartout::ConfigKeySpec kConfig[] = {
      {"workspace", "string", nullptr, "Required: the only folder the tools may touch"},
      {"max_read_bytes", "integer", "1000000", "read-file refuses larger files"},
      {"max_write_bytes", "integer", "1000000", "write-file refuses larger content"},
      {"create_folders", "boolean", "true", "write-file creates missing folders inside the workspace"},
      {"follow_symlinks", "boolean", "true", "false: refuse every symbolic link, even one that stays inside"}};
  static constexpr passepartout::ToolSpec kTools[] = {
      {"read-file", "Reads a UTF-8 text file of the workspace and returns its content.",
       R"({"type": "object",
           "properties": {"filepath": {"type": "string",
                                       "description": "Path of the file, relative to the workspace"}},
           "required": ["filepath"]})"},
      {"write-file",
       "Writes UTF-8 text to a file of the workspace, replacing the whole file atomically; "
       "creates missing folders.",
       R"({"type": "object",
           "properties": {"filepath": {"type": "string",
                                       "description": "Path of the file, relative to the workspace"},
                          "content": {"type": "string", "description": "The complete new content"}},
           "required": ["filepath", "content"]})"},
  };

  explicit FileTools(const ValueRef& config)
      : max_read_bytes_(positive_integer(config, "MAX_READ_BYTES", "max_read_bytes", kDefaultMaxReadBytes)),
        max_write_bytes_(positive_integer(config, "MAX_WRITE_BYTES", "max_write_bytes", kDefaultMaxWriteBytes)),
        create_folders_(boolean(config, "CREATE_FOLDERS", "create_folders", true)),
        follow_symlinks_(boolean(config, "FOLLOW_SYMLINKS", "follow_symlinks", true)) {
    const ValueRef workspace = config.get("WORKSPACE");
    if (!workspace.is_string() || workspace.text().empty()) {
      throw std::invalid_argument("config workspace: required, the folder the tools may use; got " + workspace.print());
    }
    std::string given = expand_home(std::string(workspace.text()));
    char resolved[PATH_MAX];
    if (::realpath(given.c_str(), resolved) == nullptr) {
      throw std::invalid_argument("config workspace: '" + given + "': " + error_text(errno));
    }
    workspace_fd_ = Fd(::open(resolved, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!workspace_fd_.is_open()) {
      throw std::invalid_argument("config workspace: '" + given +
                                  "' is not a folder that can be opened: " + error_text(errno));
    }
    workspace_ = resolved;
    // Absolute paths the model gives may use the configured spelling or the resolved one.
    if (given[0] != '/') {
      char cwd[PATH_MAX];
      if (::getcwd(cwd, sizeof cwd) != nullptr) given = std::string(cwd) + "/" + given;
    }
    normalise(resolved, true, resolved_parts_);
    normalise(given, true, given_parts_);
    log_info("tools confined to " + workspace_);
  }

  passepartout::ValueRef call_tool(std::string_view tool, const ValueRef& args, const Signal& /*signal*/) override {
    const ValueRef params = arguments(args);
    if (tool == "read-file") return read_file(params);
    return write_file(params);
  }

 private:
  // The path relative to the workspace, as components; throws when it is not
  // a string or lies outside the workspace.
  std::vector<std::string> resolve(const ValueRef& filepath, std::string_view tool, std::string& shown) const {
    if (!filepath.is_string() || filepath.text().empty()) {
      throw std::invalid_argument(std::string(tool) +
                                  ": :FILEPATH must be a non-empty string (a path relative "
                                  "to the workspace), got " +
                                  filepath.print());
    }
    shown = std::string(filepath.text());
    if (shown.size() > kMaxPathBytes) {
      throw std::invalid_argument(std::string(tool) + ": the path is longer than " +
                                  decimal(static_cast<long long>(kMaxPathBytes)) + " bytes");
    }
    if (shown.find('\0') != std::string::npos) {
      throw std::invalid_argument(std::string(tool) + ": the path contains a NUL byte");
    }
    // "notes.txt/" names a folder (the kernel would refuse a file there):
    // not read as the file, nor written over it.
    if (shown.back() == '/')
      throw std::invalid_argument(quoted(shown) + " ends with '/', so it names a folder, not a file");
    std::vector<std::string> parts;
    const bool absolute = shown.front() == '/';
    if (!normalise(shown, absolute, parts)) {
      throw std::invalid_argument(quoted(shown) + " is outside the workspace");
    }
    if (absolute) {
      const std::vector<std::string>* base = nullptr;
      if (starts_with(parts, resolved_parts_))
        base = &resolved_parts_;
      else if (starts_with(parts, given_parts_))
        base = &given_parts_;
      if (base == nullptr) throw std::invalid_argument(quoted(shown) + " is outside the workspace " + workspace_);
      parts.erase(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(base->size()));
    }
    if (parts.empty()) throw std::invalid_argument(quoted(shown) + " is the workspace folder itself, not a file");
    return parts;
  }

  // Opens `relative` (a path inside the workspace) without leaving it: through
  // openat2's RESOLVE_BENEATH, which follows symbolic links only while they
  // stay inside; or, where the kernel lacks openat2 or follow_symlinks is
  // false, component by component refusing every symbolic link. -1 with errno set on failure.
  int open_beneath(const std::string& relative, int flags, mode_t mode) const {
    if (follow_symlinks_ && has_openat2_.load(std::memory_order_relaxed)) {
      open_how how{};
      how.flags = static_cast<__u64>(static_cast<unsigned int>(flags | O_CLOEXEC));
      how.mode = (flags & O_CREAT) != 0 ? mode : 0;
      how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
      const long fd = ::syscall(SYS_openat2, workspace_fd_.get(), relative.c_str(), &how, sizeof how);
      if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
      has_openat2_.store(false, std::memory_order_relaxed);
    }
    std::vector<std::string> parts;
    normalise(relative, false, parts);
    if (parts.empty()) return ::openat(workspace_fd_.get(), ".", flags | O_CLOEXEC, mode);
    Fd current;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      const int base = current.is_open() ? current.get() : workspace_fd_.get();
      Fd next(::openat(base, parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next.is_open()) return refused_link(base, parts[i]);
      current = std::move(next);
    }
    const int base = current.is_open() ? current.get() : workspace_fd_.get();
    const int fd = ::openat(base, parts.back().c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
    return fd >= 0 ? fd : refused_link(base, parts.back());
  }

  // -1, with errno ELOOP when `name` in `folder` is a symbolic link (O_NOFOLLOW
  // with O_DIRECTORY reports one as ENOTDIR), else the errno of the failed open.
  static int refused_link(int folder, const std::string& name) {
    const int error = errno;
    struct stat st {};
    errno = ::fstatat(folder, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) ? ELOOP : error;
    return -1;
  }

  // The folder holding `parts` (all but the last), created when missing and allowed.
  Fd open_parent(const std::vector<std::string>& parts, const std::string& shown) const {
    const std::size_t depth = parts.size() - 1;
    Fd parent(open_beneath(join(parts, depth), O_RDONLY | O_DIRECTORY, 0));
    if (parent.is_open()) return parent;
    if (errno != ENOENT || !create_folders_) throw std::runtime_error(path_error(shown, errno));
    for (std::size_t i = 1; i <= depth; ++i) {
      Fd existing(open_beneath(join(parts, i), O_RDONLY | O_DIRECTORY, 0));
      if (existing.is_open()) continue;
      if (errno != ENOENT) throw std::runtime_error(path_error(shown, errno));
      Fd above(open_beneath(join(parts, i - 1), O_RDONLY | O_DIRECTORY, 0));
      if (!above.is_open()) throw std::runtime_error(path_error(shown, errno));
      if (::mkdirat(above.get(), parts[i - 1].c_str(), 0777) != 0 && errno != EEXIST) {
        throw std::runtime_error("cannot create the folder " + quoted(join(parts, i)) + ": " + error_text(errno));
      }
    }
    parent = Fd(open_beneath(join(parts, depth), O_RDONLY | O_DIRECTORY, 0));
    if (!parent.is_open()) throw std::runtime_error(path_error(shown, errno));
    return parent;
  }

  ValueRef read_file(const ValueRef& params) const {
    std::string shown;
    const std::vector<std::string> parts = resolve(params.get("FILEPATH"), "read-file", shown);
    // O_NONBLOCK: opening a FIFO must not hang the tool; it is refused below.
    const Fd fd(open_beneath(join(parts, parts.size()), O_RDONLY | O_NONBLOCK | O_NOCTTY, 0));
    if (!fd.is_open()) throw std::runtime_error(path_error(shown, errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw std::runtime_error(path_error(shown, errno));
    if (S_ISDIR(st.st_mode)) throw std::runtime_error(path_error(shown, EISDIR));
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(quoted(shown) + " is not a regular file");
    const auto limit = static_cast<std::size_t>(max_read_bytes_);
    if (static_cast<std::uint64_t>(st.st_size) > limit) throw std::runtime_error(too_large(shown, st.st_size));

    std::string content;
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw std::runtime_error("cannot read " + quoted(shown) + ": " + error_text(errno));
      if (n == 0) break;
      content.append(buffer, static_cast<std::size_t>(n));
      // The file may have grown since fstat: the cap holds whatever it does.
      if (content.size() > limit) throw std::runtime_error(too_large(shown, static_cast<off_t>(content.size())));
    }
    const passepartout::Context ctx = params.context();
    ValueRef text;
    try {
      text = ctx.string(content);
    } catch (const std::invalid_argument&) {
      throw std::runtime_error(quoted(shown) + " is not UTF-8 text");
    }
    return ctx.plist({{"STATUS", ctx.keyword("SUCCESS")}, {"CONTENT", text}});
  }

  ValueRef write_file(const ValueRef& params) const {
    std::string shown;
    const std::vector<std::string> parts = resolve(params.get("FILEPATH"), "write-file", shown);
    const ValueRef content = params.get("CONTENT");
    if (!content.is_string()) {
      throw std::invalid_argument("write-file: :CONTENT must be a string, got " + content.print());
    }
    const std::string_view bytes = content.text();
    if (bytes.size() > static_cast<std::size_t>(max_write_bytes_)) {
      throw std::invalid_argument("write-file: the content is " + decimal(static_cast<long long>(bytes.size())) +
                                  " bytes, more than the limit of " + decimal(max_write_bytes_) + " bytes");
    }

    const Fd parent = open_parent(parts, shown);
    const std::string& name = parts.back();
    struct stat existing {};
    bool keep_mode = false;
    if (::fstatat(parent.get(), name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISLNK(existing.st_mode)) {
        throw std::runtime_error(quoted(shown) + " is a symbolic link; write-file replaces only regular files");
      }
      if (S_ISDIR(existing.st_mode)) throw std::runtime_error(path_error(shown, EISDIR));
      if (!S_ISREG(existing.st_mode)) throw std::runtime_error(quoted(shown) + " is not a regular file");
      keep_mode = true;
    } else if (errno != ENOENT) {
      throw std::runtime_error(path_error(shown, errno));
    }

    // Write a temporary file beside the target, then rename it over the
    // target: readers see the old content or the new, never half of it.
    const std::string temp = "." + name.substr(0, 200) + ".tmp-" + decimal(::getpid()) + "-" +
                             decimal(static_cast<long long>(temp_sequence_.fetch_add(1, std::memory_order_relaxed)));
    Fd out(::openat(parent.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
    if (!out.is_open()) throw std::runtime_error("cannot write " + quoted(shown) + ": " + error_text(errno));
    std::size_t written = 0;
    int failure = 0;
    while (written < bytes.size() && failure == 0) {
      const ssize_t n = ::write(out.get(), bytes.data() + written, bytes.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        failure = n < 0 ? errno : EIO;
      else
        written += static_cast<std::size_t>(n);
    }
    if (failure == 0 && keep_mode && ::fchmod(out.get(), existing.st_mode & 07777) != 0) failure = errno;
    if (failure == 0 && ::fsync(out.get()) != 0) failure = errno;
    out.reset();
    if (failure == 0 && ::renameat(parent.get(), temp.c_str(), parent.get(), name.c_str()) != 0) failure = errno;
    if (failure != 0) {
      ::unlinkat(parent.get(), temp.c_str(), 0);
      throw std::runtime_error("cannot write " + quoted(shown) + ": " + error_text(failure));
    }
    ::fsync(parent.get());  // the rename itself, durable; a failure here loses nothing written

    const passepartout::Context ctx = params.context();
    return ctx.plist({{"STATUS", ctx.keyword("SUCCESS")},
                      {"CONTENT", ctx.string("Wrote " + decimal(static_cast<long long>(bytes.size())) + " bytes to " +
                                             quoted(shown))}});
  }

  std::string too_large(std::string_view shown, off_t size) const {
    return quoted(shown) + " is " + decimal(static_cast<long long>(size)) + " bytes, more than the limit of " +
           decimal(max_read_bytes_) + " bytes for read-file";
  }

  std::int64_t max_read_bytes_;
  std::int64_t max_write_bytes_;
  bool create_folders_;
  bool follow_symlinks_;
  Fd workspace_fd_;                          // the workspace, held open: every path resolves from it
  std::string workspace_;                    // its resolved path, for messages
  std::vector<std::string> resolved_parts_;  // its resolved path's components
  std::vector<std::string> given_parts_;     // the configured path's components
  mutable std::atomic<bool> has_openat2_{true};
  mutable std::atomic<std::uint64_t> temp_sequence_{0};
};

}  // namespace

PASSEPARTOUT_SKILL(FileTools);

// file-tools: the tools the model may call on one workspace folder (read-file,
// write-file, list-files, search-files, edit-file), confined to it: paths resolve
// inside it, symbolic links cannot lead out of it, reads, listings and searches
// are capped, and writes and edits replace a file atomically.
#include <passepartout/skill.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <re2/re2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
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
constexpr std::int64_t kDefaultMaxListEntries = 1000;
constexpr std::int64_t kDefaultMaxSearchMatches = 200;
constexpr std::int64_t kDefaultMaxSearchBytes = 50000000;
constexpr std::size_t kMaxPathBytes = 4096;
constexpr int kMaxWalkDepth = 32;                // list-files and search-files go at most this many levels down
constexpr std::size_t kMaxWalkEntries = 100000;  // ... and look at most at this many entries
constexpr std::size_t kBinaryProbeBytes = 8192;  // a NUL byte in the first 8 KiB: a binary file, not searched
constexpr std::size_t kMaxLineBytes = 300;       // search-files shows this much of a matching line
constexpr std::size_t kShownOccurrences = 10;    // edit-file names the lines of this many occurrences

// "'<path>'" for messages.
std::string quoted(std::string_view path) { return "'" + std::string(path) + "'"; }

// "line 3" or "lines 3-5".
std::string lines_text(std::size_t first, std::size_t last) {
  return first == last ? "line " + decimal(first) : "lines " + decimal(first) + "-" + decimal(last);
}

// --- text ----------------------------------------------------------------------------

// The length of the valid UTF-8 sequence `text` (not empty) starts with; 0 when it starts with an invalid one.
std::size_t utf8_sequence(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

// `text` as one line of an answer: invalid UTF-8 as U+FFFD, control characters
// but tab as '?' (a file name holding a newline cannot forge a line), cut on a
// character boundary before it passes `max_bytes`, with "…" appended.
std::string printable(std::string_view text, std::size_t max_bytes = SIZE_MAX) {
  std::string out;
  while (!text.empty()) {
    const std::size_t length = utf8_sequence(text);
    std::string_view piece = length == 0 ? std::string_view("\xEF\xBF\xBD") : text.substr(0, length);
    const auto lead = static_cast<unsigned char>(text[0]);
    if (length == 1 && ((lead < 0x20 && lead != '\t') || lead == 0x7F)) piece = "?";
    if (out.size() + piece.size() > max_bytes) return out + "\xE2\x80\xA6";
    out += piece;
    text.remove_prefix(length == 0 ? 1 : length);
  }
  return out;
}

// Where `needle` (not empty) occurs in `text`, overlapping occurrences
// included: how often, and the offsets of the first `keep`. Knuth-Morris-Pratt,
// linear: a naive search for a long, repetitive needle in a long file would
// hold a tool thread for minutes.
struct Occurrences {
  std::size_t count = 0;
  std::vector<std::size_t> first;
};
Occurrences occurrences(std::string_view text, std::string_view needle, std::size_t keep) {
  std::vector<std::size_t> border(needle.size(), 0);
  for (std::size_t i = 1, k = 0; i < needle.size(); ++i) {
    while (k > 0 && needle[i] != needle[k]) k = border[k - 1];
    if (needle[i] == needle[k]) ++k;
    border[i] = k;
  }
  Occurrences found;
  for (std::size_t i = 0, k = 0; i < text.size(); ++i) {
    while (k > 0 && text[i] != needle[k]) k = border[k - 1];
    if (text[i] == needle[k]) ++k;
    if (k == needle.size()) {
      if (found.first.size() < keep) found.first.push_back(i + 1 - needle.size());
      ++found.count;
      k = border[k - 1];
    }
  }
  return found;
}

// The 1-based number of the line holding byte `offset` of `text`.
std::size_t line_at(std::string_view text, std::size_t offset) {
  return 1 +
         static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

// How many lines `text` spans: a final line break ends its last line rather than starting one.
std::size_t lines_spanned(std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// --- arguments -----------------------------------------------------------------------

// A boolean argument: absent, false (NIL) or "false" is false; true (T) or
// "true" is true (some models send booleans as strings).
bool flag(const ValueRef& value, std::string_view tool, std::string_view key) {
  if (value.is_nil()) return false;
  if (value.is_t()) return true;
  if (value.is_string() && (value.text() == "true" || value.text() == "false")) return value.text() == "true";
  throw std::invalid_argument(std::string(tool) + ": :" + std::string(key) + " must be true or false, got " +
                              value.print());
}

// A count argument: `cap` (the configured limit) when absent, else a positive integer, lowered to `cap`.
std::size_t count_argument(const ValueRef& value, std::string_view tool, std::string_view key, std::int64_t cap) {
  if (value.is_nil()) return static_cast<std::size_t>(cap);
  if (!value.is_integer() || value.as_integer() <= 0) {
    throw std::invalid_argument(std::string(tool) + ": :" + std::string(key) + " must be a positive integer, got " +
                                value.print());
  }
  return static_cast<std::size_t>(std::min(value.as_integer(), cap));
}

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

// --- walking folders -----------------------------------------------------------------

// One entry a walk meets: the folder holding it (open), its name there, its
// path relative to the workspace and its own status (a link's, not its target's).
struct WalkEntry {
  int folder;
  const std::string& name;
  const std::string& path;
  const struct stat& status;
};

// What a walk left out.
struct WalkStats {
  std::size_t entries = 0;         // entries looked at
  bool stopped = false;            // true: it stopped at kMaxWalkEntries
  std::size_t hidden_folders = 0;  // hidden folders not entered
  std::size_t hidden_files = 0;    // hidden files not searched (search-files)
  std::string first_hidden;        // the first hidden entry left out, for the note
  std::size_t deep_folders = 0;    // folders kMaxWalkDepth levels down, not entered
  std::size_t unreadable = 0;      // folders that could not be read
};

bool is_hidden(std::string_view name) { return name.front() == '.'; }

// The names in `folder` but "." and "..", at most `limit` of them (more:
// `stopped` is set); false when the folder cannot be read.
bool folder_names(int folder, std::size_t limit, std::vector<std::string>& names, WalkStats& stats) {
  // fdopendir owns and closes its descriptor: give it a second one.
  const int copy = ::openat(folder, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return false;
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    ::close(copy);
    return false;
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the stream is this call's own; readdir is safe on distinct streams.
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (names.size() == limit) {
      stats.stopped = true;
      break;
    }
    names.emplace_back(name);
  }
  ::closedir(dir);
  return true;
}

// Visits the entries of `folder` (a descriptor; `path` its path relative to
// the workspace, "." for the workspace itself) sorted by name, and with
// `recursive` each subfolder's entries right after it, so the whole answer is
// sorted by path. Entries are examined without following links and subfolders
// opened from their parent's descriptor with O_NOFOLLOW, so the walk never
// enters a symbolic link and cannot leave `folder`. Hidden folders (a name
// starting with '.': .git, .venv) are visited but not entered, nor folders
// kMaxWalkDepth levels below `folder`. `visit(entry)` answers false to stop;
// walk answers false when it stopped.
template <typename Visit>
bool walk(int folder, const std::string& path, bool recursive, int depth, WalkStats& stats, Visit& visit) {
  std::vector<std::string> names;
  if (!folder_names(folder, kMaxWalkEntries - stats.entries, names, stats)) {
    ++stats.unreadable;
    return true;
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    ++stats.entries;
    struct stat status {};
    if (::fstatat(folder, name.c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone since it was read
    std::string child = path == "." ? std::string() : path + '/';
    child += name;
    if (!visit(WalkEntry{folder, name, child, status})) return false;
    if (!recursive || !S_ISDIR(status.st_mode)) continue;
    if (is_hidden(name)) {
      if (stats.hidden_folders++ + stats.hidden_files == 0) stats.first_hidden = child;
      continue;
    }
    if (depth + 1 >= kMaxWalkDepth) {
      ++stats.deep_folders;
      continue;
    }
    const Fd sub(::openat(folder, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!sub.is_open()) {
      ++stats.unreadable;
      continue;
    }
    if (!walk(sub.get(), child, recursive, depth + 1, stats, visit)) return false;
  }
  return !stats.stopped;
}

// The notes a walk's answer ends with: what it did not look at, and how to
// see it; `tool` is list-files or search-files, `narrower` what to do when it stopped.
std::string walk_notes(const WalkStats& stats, std::string_view tool, std::string_view narrower) {
  const auto plural = [](std::size_t n, std::string_view one, std::string_view more) {
    return decimal(n) + " " + std::string(n == 1 ? one : more);
  };
  std::string notes;
  if (stats.stopped) {
    notes += "Note: " + std::string(tool) + " stopped after looking at " + decimal(kMaxWalkEntries) +
             " entries, so there may be more; " + std::string(narrower) + "\n";
  }
  if (tool == "list-files" && stats.hidden_folders > 0) {
    notes += "Note: " + plural(stats.hidden_folders, "hidden folder", "hidden folders") + " (such as " +
             quoted(printable(stats.first_hidden)) + ") listed but not entered; give one as the path to list it\n";
  } else if (stats.hidden_folders + stats.hidden_files > 0) {
    notes += "Note: " +
             plural(stats.hidden_folders + stats.hidden_files, "hidden file or folder", "hidden files and folders") +
             " (such as " + quoted(printable(stats.first_hidden)) +
             ") not searched; give one as the path to search it\n";
  }
  if (stats.deep_folders > 0) {
    notes += "Note: " + plural(stats.deep_folders, "folder", "folders") + " " + decimal(kMaxWalkDepth) +
             " levels down not entered; give one as the path to look inside\n";
  }
  if (stats.unreadable > 0) {
    notes += "Note: " + plural(stats.unreadable, "folder", "folders") +
             " could not be read (permission denied, or removed meanwhile)\n";
  }
  return notes;
}

// Reads `fd` to its end into `content`: 0, EFBIG when it holds more than
// `limit` bytes (the file may have grown since it was measured), or the errno of a failed read.
int read_capped(int fd, std::size_t limit, std::string& content) {
  content.clear();
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    content.append(buffer, static_cast<std::size_t>(n));
    if (content.size() > limit) return EFBIG;
  }
}

bool looks_binary(std::string_view content) {
  return content.substr(0, kBinaryProbeBytes).find('\0') != std::string_view::npos;
}

// Immutable after construction but for the temp-file counter and the openat2
// probe, both atomic: the tools may run on any number of threads at once.
class FileTools final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "file-tools";
  static constexpr const char kVersion[] = "1.0.0";
  static constexpr passepartout::ConfigKeySpec kConfig[] = {
      {"workspace", "string", nullptr, "Required: the only folder the tools may touch"},
      {"max_read_bytes", "integer", "1000000", "read-file and edit-file refuse larger files; search-files skips them"},
      {"max_write_bytes", "integer", "1000000", "write-file refuses larger content, edit-file a larger result"},
      {"max_list_entries", "integer", "1000", "list-files answers at most this many entries"},
      {"max_search_matches", "integer", "200", "search-files answers at most this many matching lines"},
      {"max_search_bytes", "integer", "50000000", "search-files stops before scanning more bytes than this"},
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
      {"list-files",
       "Lists a folder of the workspace: one line per entry, sorted by path, with its kind (file, folder, link "
       "or other) and a file's size in bytes. With recursive, lists the subfolders' entries too; symbolic links "
       "and hidden folders (.git) are listed but not entered. Long listings are cut, saying how many entries "
       "were left out.",
       R"json({"type": "object",
           "properties": {
             "path": {"type": "string",
               "description": "The folder, relative to the workspace; \".\" (the default) is the workspace"},
             "recursive": {"type": "boolean",
               "description": "true: also list every subfolder's entries, 32 levels down at most (default false)"},
             "max_entries": {"type": "integer", "minimum": 1,
               "description": "At most this many entries (default and most: the configured limit, 1000)"}}})json"},
      {"search-files",
       "Searches the text files of the workspace for lines matching a regular expression (RE2 syntax, as in "
       "grep -E: escape ( [ . * + ? with a backslash to match them literally) and answers each match as "
       "path:line: text. Searches every file under a folder, or one file; skips binary files, symbolic links "
       "and hidden files and folders unless the path names them. The answer is cut after the match limit, "
       "saying how many more matches there were.",
       R"json({"type": "object",
           "properties": {
             "pattern": {"type": "string",
               "description": "The regular expression (RE2), matched against each line; (?i) first ignores case"},
             "path": {"type": "string",
               "description": "A folder to search, or one file, relative to the workspace; \".\" (default): all of it"},
             "max_matches": {"type": "integer", "minimum": 1,
               "description": "At most this many matching lines (default and most: the configured limit, 200)"}},
           "required": ["pattern"]})json"},
      {"edit-file",
       "Edits a file of the workspace by replacing one exact piece of its text: old_text must occur exactly once "
       "in the file (copy it from read-file, spaces, indentation and line breaks included; add surrounding lines "
       "when it is not unique) and is replaced by new_text. Answers the lines that changed. To create a file or "
       "rewrite all of it, use write-file.",
       R"json({"type": "object",
           "properties": {
             "filepath": {"type": "string", "description": "Path of the file, relative to the workspace"},
             "old_text": {"type": "string",
               "description": "The exact text to replace; it must occur exactly once in the file"},
             "new_text": {"type": "string", "description": "The text to put in its place (empty: delete old_text)"}},
           "required": ["filepath", "old_text", "new_text"]})json"},
  };

  explicit FileTools(const ValueRef& config)
      : max_read_bytes_(positive_integer(config, "MAX_READ_BYTES", "max_read_bytes", kDefaultMaxReadBytes)),
        max_write_bytes_(positive_integer(config, "MAX_WRITE_BYTES", "max_write_bytes", kDefaultMaxWriteBytes)),
        max_list_entries_(positive_integer(config, "MAX_LIST_ENTRIES", "max_list_entries", kDefaultMaxListEntries)),
        max_search_matches_(
            positive_integer(config, "MAX_SEARCH_MATCHES", "max_search_matches", kDefaultMaxSearchMatches)),
        max_search_bytes_(positive_integer(config, "MAX_SEARCH_BYTES", "max_search_bytes", kDefaultMaxSearchBytes)),
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
    if (tool == "write-file") return write_file(params);
    if (tool == "list-files") return list_files(params);
    if (tool == "search-files") return search_files(params);
    return edit_file(params);
  }

 private:
  // What a path argument may name: only a file (read-file, write-file,
  // edit-file), or a file or a folder (list-files, search-files: the
  // workspace itself, the default when the argument is absent, and a trailing '/' too).
  enum class Names { file, file_or_folder };

  // The path `value` (argument `key` of `tool`) relative to the workspace, as
  // components; throws when it is not a string or lies outside the workspace.
  std::vector<std::string> resolve(const ValueRef& value, std::string_view tool, std::string_view key, Names names,
                                   std::string& shown) const {
    if (names == Names::file_or_folder && value.is_nil()) {
      shown = ".";
      return {};
    }
    if (!value.is_string() || value.text().empty()) {
      throw std::invalid_argument(std::string(tool) + ": :" + std::string(key) +
                                  " must be a non-empty string (a path relative "
                                  "to the workspace), got " +
                                  value.print());
    }
    shown = std::string(value.text());
    if (shown.size() > kMaxPathBytes) {
      throw std::invalid_argument(std::string(tool) + ": the path is longer than " +
                                  decimal(static_cast<long long>(kMaxPathBytes)) + " bytes");
    }
    if (shown.find('\0') != std::string::npos) {
      throw std::invalid_argument(std::string(tool) + ": the path contains a NUL byte");
    }
    // "notes.txt/" names a folder (the kernel would refuse a file there):
    // not read as the file, nor written over it.
    if (names == Names::file && shown.back() == '/')
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
    if (names == Names::file && parts.empty()) {
      throw std::invalid_argument(quoted(shown) + " is the workspace folder itself, not a file");
    }
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

  // The folder holding `parts` (all but the last), created when missing and `create` allows.
  Fd open_parent(const std::vector<std::string>& parts, const std::string& shown, bool create) const {
    const std::size_t depth = parts.size() - 1;
    Fd parent(open_beneath(join(parts, depth), O_RDONLY | O_DIRECTORY, 0));
    if (parent.is_open()) return parent;
    if (errno != ENOENT || !create) throw std::runtime_error(path_error(shown, errno));
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

  // The file or folder at `parts` (no trailing '/' check yet), opened for
  // reading, and its status in `st`; throws the path's error.
  Fd open_existing(const std::vector<std::string>& parts, const std::string& shown, struct stat& st) const {
    // O_NONBLOCK: opening a FIFO must not hang the tool; callers refuse one.
    Fd fd(open_beneath(join(parts, parts.size()), O_RDONLY | O_NONBLOCK | O_NOCTTY, 0));
    if (!fd.is_open()) throw std::runtime_error(path_error(shown, errno));
    if (::fstat(fd.get(), &st) != 0) throw std::runtime_error(path_error(shown, errno));
    return fd;
  }

  // The content of the regular file open at `fd` (status `st`), at most
  // max_read_bytes; throws naming `tool` when it is larger or unreadable.
  std::string read_whole(int fd, const struct stat& st, const std::string& shown, std::string_view tool) const {
    const auto limit = static_cast<std::size_t>(max_read_bytes_);
    if (static_cast<std::uint64_t>(st.st_size) > limit) throw std::runtime_error(too_large(shown, st.st_size, tool));
    std::string content;
    const int error = read_capped(fd, limit, content);
    // The file may have grown since fstat: the cap holds whatever it does.
    if (error == EFBIG) throw std::runtime_error(too_large(shown, static_cast<off_t>(content.size()), tool));
    if (error != 0) throw std::runtime_error("cannot read " + quoted(shown) + ": " + error_text(error));
    return content;
  }

  ValueRef read_file(const ValueRef& params) const {
    std::string shown;
    const std::vector<std::string> parts = resolve(params.get("FILEPATH"), "read-file", "FILEPATH", Names::file, shown);
    struct stat st {};
    const Fd fd = open_existing(parts, shown, st);
    if (S_ISDIR(st.st_mode)) throw std::runtime_error(path_error(shown, EISDIR));
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(quoted(shown) + " is not a regular file");
    const std::string content = read_whole(fd.get(), st, shown, "read-file");
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
    const std::vector<std::string> parts =
        resolve(params.get("FILEPATH"), "write-file", "FILEPATH", Names::file, shown);
    const ValueRef content = params.get("CONTENT");
    if (!content.is_string()) {
      throw std::invalid_argument("write-file: :CONTENT must be a string, got " + content.print());
    }
    const std::string_view bytes = content.text();
    if (bytes.size() > static_cast<std::size_t>(max_write_bytes_)) {
      throw std::invalid_argument("write-file: the content is " + decimal(static_cast<long long>(bytes.size())) +
                                  " bytes, more than the limit of " + decimal(max_write_bytes_) + " bytes");
    }

    const Fd parent = open_parent(parts, shown, create_folders_);
    const std::string& name = parts.back();
    struct stat existing {};
    std::optional<mode_t> mode;
    if (::fstatat(parent.get(), name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISLNK(existing.st_mode)) {
        throw std::runtime_error(quoted(shown) + " is a symbolic link; write-file replaces only regular files");
      }
      if (S_ISDIR(existing.st_mode)) throw std::runtime_error(path_error(shown, EISDIR));
      if (!S_ISREG(existing.st_mode)) throw std::runtime_error(quoted(shown) + " is not a regular file");
      mode = existing.st_mode & 07777;
    } else if (errno != ENOENT) {
      throw std::runtime_error(path_error(shown, errno));
    }
    replace_file(parent, name, shown, bytes, mode);

    const passepartout::Context ctx = params.context();
    return ctx.plist({{"STATUS", ctx.keyword("SUCCESS")},
                      {"CONTENT", ctx.string("Wrote " + decimal(static_cast<long long>(bytes.size())) + " bytes to " +
                                             quoted(shown))}});
  }

  // Makes `bytes` the content of `name` in `parent`, with permission bits
  // `mode` (none: a new file's default): written to a temporary file beside
  // it, fsync'd and renamed over it, so readers see the old content or the
  // new, never half of it. Throws "cannot write '<shown>': <reason>".
  void replace_file(const Fd& parent, const std::string& name, const std::string& shown, std::string_view bytes,
                    std::optional<mode_t> mode) const {
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
    if (failure == 0 && mode.has_value() && ::fchmod(out.get(), *mode) != 0) failure = errno;
    if (failure == 0 && ::fsync(out.get()) != 0) failure = errno;
    out.reset();
    if (failure == 0 && ::renameat(parent.get(), temp.c_str(), parent.get(), name.c_str()) != 0) failure = errno;
    if (failure != 0) {
      ::unlinkat(parent.get(), temp.c_str(), 0);
      throw std::runtime_error("cannot write " + quoted(shown) + ": " + error_text(failure));
    }
    ::fsync(parent.get());  // the rename itself, durable; a failure here loses nothing written
  }

  // --- list-files ----------------------------------------------------------------

  ValueRef list_files(const ValueRef& params) const {
    std::string shown;
    const std::vector<std::string> parts =
        resolve(params.get("PATH"), "list-files", "PATH", Names::file_or_folder, shown);
    const bool recursive = flag(params.get("RECURSIVE"), "list-files", "RECURSIVE");
    const std::size_t limit = count_argument(params.get("MAX_ENTRIES"), "list-files", "MAX_ENTRIES", max_list_entries_);
    struct stat st {};
    const Fd folder = open_existing(parts, shown, st);
    if (S_ISREG(st.st_mode)) {
      throw std::runtime_error(quoted(shown) +
                               " is a file, not a folder; list-files lists folders (read-file reads a file)");
    }
    if (!S_ISDIR(st.st_mode)) throw std::runtime_error(quoted(shown) + " is not a folder");

    std::string out;
    std::size_t listed = 0;
    std::size_t left_out = 0;
    auto visit = [&](const WalkEntry& entry) {
      if (listed == limit) {
        ++left_out;
        return true;
      }
      ++listed;
      out += describe(entry) + "\n";
      return true;
    };
    WalkStats stats;
    walk(folder.get(), join(parts, parts.size()), recursive, 0, stats, visit);

    if (listed == 0) out = quoted(shown) + " is an empty folder\n";
    if (left_out > 0) {
      out += "Note: " + std::string(stats.stopped ? "at least " : "") + decimal(left_out) + " more entr" +
             (left_out == 1 ? "y" : "ies") + " left out (the limit is " + decimal(limit) +
             "); list a subfolder to see them\n";
    }
    out += walk_notes(stats, "list-files", "list a subfolder");
    out.pop_back();  // the last line's '\n'
    const passepartout::Context ctx = params.context();
    return ctx.plist({{"STATUS", ctx.keyword("SUCCESS")}, {"CONTENT", ctx.string(out)}});
  }

  // "src/main.cpp (file, 120 bytes)", "src/lib/ (folder)", "src/latest (link to main.cpp)", "src/pipe (other)".
  static std::string describe(const WalkEntry& entry) {
    const std::string path = printable(entry.path);
    const mode_t mode = entry.status.st_mode;
    if (S_ISREG(mode)) {
      const off_t size = entry.status.st_size;
      return path + " (file, " + decimal(static_cast<long long>(size)) + (size == 1 ? " byte)" : " bytes)");
    }
    if (S_ISDIR(mode)) return path + "/ (folder)";
    if (S_ISLNK(mode)) {
      char target[PATH_MAX];
      const ssize_t n = ::readlinkat(entry.folder, entry.name.c_str(), target, sizeof target);
      if (n < 0) return path + " (link)";
      return path + " (link to " + printable(std::string_view(target, static_cast<std::size_t>(n))) + ")";
    }
    return path + " (other)";
  }

  // --- search-files --------------------------------------------------------------

  // One search in progress: what it found and how far it got.
  struct Search {
    Search(const RE2& pattern, std::size_t most) : regex(pattern), limit(most) {}
    const RE2& regex;
    std::size_t limit;           // matches shown at most
    std::string out;             // the matches shown, a line each
    std::size_t matches = 0;     // matches found, shown or not
    std::size_t files = 0;       // files searched
    std::size_t binary = 0;      // files skipped: a NUL byte in the first 8 KiB
    std::size_t large = 0;       // files skipped: larger than max_read_bytes
    std::uint64_t scanned = 0;   // bytes read
    std::string stopped_before;  // the file max_search_bytes stopped the search at, if any
  };

  // Searches `content` (of the file at `path`) line by line.
  static void search_text(Search& search, const std::string& path, std::string_view content) {
    ++search.files;
    std::size_t number = 0;
    while (!content.empty()) {
      const std::size_t end = content.find('\n');
      std::string_view line = content.substr(0, end);
      content = end == std::string_view::npos ? std::string_view() : content.substr(end + 1);
      ++number;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), search.regex)) continue;
      if (++search.matches > search.limit) continue;
      search.out += printable(path) + ":" + decimal(number) + ": " + printable(line, kMaxLineBytes) + "\n";
    }
  }

  // Whether the next `size` bytes fit in max_search_bytes; when not, the search stops before `path`.
  bool fits(Search& search, const std::string& path, std::uint64_t size) const {
    if (search.scanned + size <= static_cast<std::uint64_t>(max_search_bytes_)) return true;
    search.stopped_before = path;
    return false;
  }

  ValueRef search_files(const ValueRef& params) const {
    const ValueRef pattern = params.get("PATTERN");
    if (!pattern.is_string() || pattern.text().empty()) {
      throw std::invalid_argument(
          "search-files: :PATTERN must be a non-empty string (a regular expression in RE2 syntax), got " +
          pattern.print());
    }
    std::string shown;
    const std::vector<std::string> parts =
        resolve(params.get("PATH"), "search-files", "PATH", Names::file_or_folder, shown);
    const std::size_t limit =
        count_argument(params.get("MAX_MATCHES"), "search-files", "MAX_MATCHES", max_search_matches_);
    RE2::Options options;
    options.set_log_errors(false);  // reported to the model below, not on stderr
    const RE2 regex(re2::StringPiece(pattern.text().data(), pattern.text().size()), options);
    if (!regex.ok()) {
      throw std::invalid_argument("search-files: the pattern " + quoted(pattern.text()) +
                                  " is not a valid RE2 regular expression: " + regex.error() +
                                  " (escape ( ) [ ] { } . * + ? | \\ with a backslash to match them literally)");
    }
    struct stat st {};
    const Fd start = open_existing(parts, shown, st);
    const std::string path = join(parts, parts.size());
    Search search(regex, limit);
    WalkStats stats;
    if (S_ISREG(st.st_mode)) {
      if (shown.back() == '/')
        throw std::runtime_error(quoted(shown) + " ends with '/', but it is a file, not a folder");
      if (!fits(search, path, static_cast<std::uint64_t>(st.st_size))) {
        throw std::runtime_error(quoted(shown) + " is " + decimal(static_cast<long long>(st.st_size)) +
                                 " bytes, more than the limit of " + decimal(max_search_bytes_) +
                                 " bytes (max_search_bytes) for search-files");
      }
      const std::string content = read_whole(start.get(), st, shown, "search-files");
      if (looks_binary(content)) {
        throw std::runtime_error(quoted(shown) +
                                 " is a binary file (a NUL byte in its first 8 KiB); search-files searches text files");
      }
      search_text(search, path, content);
    } else if (S_ISDIR(st.st_mode)) {
      auto visit = [&](const WalkEntry& entry) { return search_entry(search, stats, entry); };
      walk(start.get(), path, true, 0, stats, visit);
    } else {
      throw std::runtime_error(quoted(shown) + " is neither a folder nor a regular file");
    }

    std::string out = std::move(search.out);
    const bool cut_short = !search.stopped_before.empty() || stats.stopped;
    if (search.matches == 0) {
      out = "No line matches " + quoted(pattern.text()) + " in " + quoted(shown) + " (" + decimal(search.files) +
            " file" + (search.files == 1 ? "" : "s") + " searched)\n";
    } else if (search.matches > limit) {
      out += "Note: " + std::string(cut_short ? "at least " : "") + decimal(search.matches - limit) + " more match" +
             (search.matches - limit == 1 ? "" : "es") + " not shown (the limit is " + decimal(limit) +
             "); narrow the pattern or the path\n";
    }
    if (!search.stopped_before.empty()) {
      out += "Note: the search stopped before " + quoted(printable(search.stopped_before)) + " after scanning " +
             decimal(search.scanned) + " bytes, the limit being " + decimal(max_search_bytes_) +
             " (max_search_bytes); the files after it were not searched: search a narrower path\n";
    }
    if (search.binary > 0) {
      out += "Note: " + decimal(search.binary) + " binary file" + (search.binary == 1 ? "" : "s") +
             " (a NUL byte in the first 8 KiB) skipped\n";
    }
    if (search.large > 0) {
      out += "Note: " + decimal(search.large) + " file" + (search.large == 1 ? "" : "s") + " larger than " +
             decimal(max_read_bytes_) + " bytes (max_read_bytes) skipped\n";
    }
    out += walk_notes(stats, "search-files", "search a narrower path");
    out.pop_back();  // the last line's '\n'
    const passepartout::Context ctx = params.context();
    return ctx.plist({{"STATUS", ctx.keyword("SUCCESS")}, {"CONTENT", ctx.string(out)}});
  }

  // Searches one entry of a walk if it is a regular file that is not hidden,
  // binary or too large; false when max_search_bytes stops the search.
  bool search_entry(Search& search, WalkStats& stats, const WalkEntry& entry) const {
    if (!S_ISREG(entry.status.st_mode)) return true;  // folders are walked; links are not followed
    if (is_hidden(entry.name)) {
      if (stats.hidden_folders + stats.hidden_files++ == 0) stats.first_hidden = entry.path;
      return true;
    }
    if (entry.status.st_size > max_read_bytes_) {
      ++search.large;
      return true;
    }
    if (!fits(search, entry.path, static_cast<std::uint64_t>(entry.status.st_size))) return false;
    const Fd fd(::openat(entry.folder, entry.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st {};
    if (!fd.is_open() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return true;  // replaced meanwhile
    std::string content;
    const int error = read_capped(fd.get(), static_cast<std::size_t>(max_read_bytes_), content);
    search.scanned += content.size();
    if (error == EFBIG) ++search.large;
    if (error != 0) return true;
    if (looks_binary(content)) {
      ++search.binary;
      return true;
    }
    search_text(search, entry.path, content);
    return true;
  }

  // --- edit-file -----------------------------------------------------------------

  ValueRef edit_file(const ValueRef& params) const {
    std::string shown;
    const std::vector<std::string> parts = resolve(params.get("FILEPATH"), "edit-file", "FILEPATH", Names::file, shown);
    const ValueRef old_value = params.get("OLD_TEXT");
    const ValueRef new_value = params.get("NEW_TEXT");
    if (!old_value.is_string()) {
      throw std::invalid_argument("edit-file: :OLD_TEXT must be a string (the exact text to replace), got " +
                                  old_value.print());
    }
    if (!new_value.is_string()) {
      throw std::invalid_argument(
          "edit-file: :NEW_TEXT must be a string (the text to put in place of old_text; \"\" deletes it), got " +
          new_value.print());
    }
    const std::string_view old_text = old_value.text();
    const std::string_view new_text = new_value.text();
    if (old_text.empty()) {
      throw std::invalid_argument(
          "edit-file: old_text is empty; copy the exact text to replace from the file (read-file shows it), "
          "or use write-file to write a whole file");
    }
    if (old_text == new_text) {
      throw std::invalid_argument("edit-file: old_text and new_text are the same, so nothing would change");
    }

    const Fd parent = open_parent(parts, shown, false);
    const std::string& name = parts.back();
    // O_NOFOLLOW: replacing a link's target through the link would turn the link into a file.
    const Fd fd(::openat(parent.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd.is_open()) {
      if (errno == ELOOP) {
        throw std::runtime_error(quoted(shown) +
                                 " is a symbolic link; edit-file edits only regular files (edit the file it leads to)");
      }
      throw std::runtime_error(path_error(shown, errno));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw std::runtime_error(path_error(shown, errno));
    if (S_ISDIR(st.st_mode)) throw std::runtime_error(path_error(shown, EISDIR));
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(quoted(shown) + " is not a regular file");
    const std::string content = read_whole(fd.get(), st, shown, "edit-file");

    const Occurrences found = occurrences(content, old_text, kShownOccurrences);
    if (found.count == 0) {
      throw std::runtime_error("old_text was not found in " + quoted(shown) +
                               "; read the file first and copy the exact text (spaces, indentation and line "
                               "breaks included)");
    }
    if (found.count > 1) {
      std::vector<std::size_t> lines;  // where the first occurrences are, each line once
      for (const std::size_t at : found.first) {
        const std::size_t line = line_at(content, at);
        if (lines.empty() || lines.back() != line) lines.push_back(line);
      }
      std::string where = lines.size() == 1 ? "line " : "lines ";
      for (std::size_t i = 0; i < lines.size(); ++i) {
        const bool last = i + 1 == lines.size() && found.count == found.first.size();
        where += (i == 0 ? "" : last ? " and " : ", ") + decimal(lines[i]);
      }
      if (found.count > found.first.size()) where += ", ...";
      throw std::runtime_error("old_text occurs " + decimal(found.count) + " times in " + quoted(shown) + " (at " +
                               where + "); include more of the surrounding text so it occurs once");
    }
    const std::size_t offset = found.first.front();
    const std::size_t size = content.size() - old_text.size() + new_text.size();
    if (size > static_cast<std::size_t>(max_write_bytes_)) {
      throw std::runtime_error("edit-file: the edited " + quoted(shown) + " would be " + decimal(size) +
                               " bytes, more than the limit of " + decimal(max_write_bytes_) +
                               " bytes (max_write_bytes)");
    }
    std::string edited;
    edited.reserve(size);
    edited.append(content, 0, offset).append(new_text).append(content, offset + old_text.size());
    replace_file(parent, name, shown, edited, st.st_mode & 07777);

    const std::size_t first = line_at(content, offset);
    const std::string old_lines = lines_text(first, first + lines_spanned(old_text) - 1);
    const std::string what =
        new_text.empty() ? "removed the text of " + old_lines
                         : "replaced " + old_lines + " with " + lines_text(first, first + lines_spanned(new_text) - 1);
    const passepartout::Context ctx = params.context();
    return ctx.plist(
        {{"STATUS", ctx.keyword("SUCCESS")},
         {"CONTENT", ctx.string("Edited " + quoted(shown) + ": " + what + " (now " + decimal(size) + " bytes)")}});
  }

  std::string too_large(std::string_view shown, off_t size, std::string_view tool) const {
    return quoted(shown) + " is " + decimal(static_cast<long long>(size)) + " bytes, more than the limit of " +
           decimal(max_read_bytes_) + " bytes for " + std::string(tool);
  }

  std::int64_t max_read_bytes_;
  std::int64_t max_write_bytes_;
  std::int64_t max_list_entries_;
  std::int64_t max_search_matches_;
  std::int64_t max_search_bytes_;
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

// SkillLoader: the Boost.DLL adapter. Everything that can be wrong with a
// library is found here and reported with the skill's name and what to do.
#include "skills/skill_loader.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <csignal>

#include <array>
#include <atomic>
#include <boost/dll/shared_library.hpp>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "base/digest.hpp"
#include "base/errno_text.hpp"
#include "base/file_io.hpp"
#include "base/log.hpp"
#include "skills/config_placeholders.hpp"
#include "skills/elf_inspector.hpp"
#include "skills/isolated_skill.hpp"
#include "skills/skill_table.hpp"

namespace passepartout {
namespace fs = std::filesystem;

namespace {

std::atomic<std::uint64_t> leaked_libraries{0};
std::atomic<std::uint64_t> pinned_libraries{0};
std::atomic<std::uint64_t> copy_sequence{0};

constexpr std::uintmax_t kMaxLibraryBytes = 512ULL * 1024 * 1024;

std::string quoted(const std::string& name) { return "skill '" + name + "'"; }

std::string octal_mode(mode_t mode) {
  std::ostringstream out;
  out << '0' << std::oct << (mode & 07777);
  return out.str();
}

Result<std::string> read_file(const fs::path& file, const std::string& who) {
  auto bytes = read_bounded_file(file, kMaxLibraryBytes);
  if (!bytes && bytes.error().code == ErrorCode::limit_exceeded) {
    return fail(ErrorCode::limit_exceeded, who + ": " + file.string() + " is " + bytes.error().message +
                                               ", more than the " + std::to_string(kMaxLibraryBytes) +
                                               "-byte limit for a skill library");
  }
  if (!bytes) return fail(ErrorCode::io_error, who + ": cannot read " + file.string() + ": " + bytes.error().message);
  return bytes;
}

// Refuses what another user could have swapped under us.
Result<void> check_not_writable_by_others(const fs::path& path, const std::string& who, bool is_dir) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return fail(ErrorCode::not_found, who + ": cannot stat " + path.string() + ": " + errno_text(errno));
  }
  if (!is_dir && !S_ISREG(st.st_mode)) {
    return fail(ErrorCode::refused, who + ": " + path.string() + " is not a regular file");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fail(ErrorCode::refused, who + ": " + (is_dir ? "folder " : "library ") + path.string() +
                                        " is writable by group or others (mode " + octal_mode(st.st_mode) +
                                        "); run 'chmod go-w " + path.string() + "'");
  }
  return {};
}

// The text dlerror() gave, which Boost.DLL 1.74 appends to its exception as
// "(dlerror system message: TEXT): <error code message>".
std::string dlerror_text(const std::string& what) {
  static constexpr std::string_view kMarker = "(dlerror system message: ";
  auto start = what.find(kMarker);
  if (start == std::string::npos) return what;
  start += kMarker.size();
  auto end = what.rfind("): ");
  if (end == std::string::npos || end < start) end = what.size();
  return what.substr(start, end - start);
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (auto pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
}

// Keeps a library handle open until the process ends (never_unload), reachable
// from a global so that leak checkers see it is held on purpose.
void pin_forever(boost::dll::shared_library library) {
  static std::mutex mutex;                                                               // guards pinned
  static auto* pinned = new std::vector<std::unique_ptr<boost::dll::shared_library>>();  // never freed: by design
  std::lock_guard lock(mutex);
  pinned->push_back(std::make_unique<boost::dll::shared_library>(std::move(library)));
  pinned_libraries.fetch_add(1, std::memory_order_relaxed);
}

class BoostSkillLibrary final : public SkillLibrary {
 public:
  BoostSkillLibrary(fs::path source, fs::path copy, bool never_unload)
      : source_(std::move(source)), copy_(std::move(copy)), never_unload_(never_unload) {}

  ~BoostSkillLibrary() override {
    if (!library_.is_loaded()) return;
    if (never_unload_) {
      // The manifest asked for the code to stay mapped (it may have left
      // callbacks behind): hand the handle to a holder that is never freed.
      pin_forever(std::move(library_));
      return;
    }
    library_.unload();
    // glibc keeps a library mapped while anything pins it (STB_GNU_UNIQUE
    // symbols, thread_local destructors, another dlopen): probe for it.
    if (void* still = ::dlopen(copy_.c_str(), RTLD_LAZY | RTLD_NOLOAD); still != nullptr) {
      ::dlclose(still);
      leaked_libraries.fetch_add(1, std::memory_order_relaxed);
      log_message(LogLevel::warn, "loader",
                  "library {} stayed mapped after unload (counted as leaked); "
                  "a skill must not start threads or keep thread_local objects with destructors",
                  source_.string());
    }
  }

  const fs::path& source_path() const override { return source_; }

  // Maps the copy; on failure returns the loader's message.
  Result<void> open(const std::string& who) {
    try {
      library_.load(boost::dll::fs::path(copy_.string()),
                    boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const boost::dll::fs::system_error& e) {
      std::string text = dlerror_text(e.what());
      replace_all(text, copy_.string(), source_.string());
      return fail(ErrorCode::invalid_input, who + ": cannot load " + source_.string() + ": " + text);
    }
    return {};
  }

  Result<const pp_skill_api*> entry_table(const std::string& who) {
    if (!library_.has(PP_ENTRY_SYMBOL)) {
      return fail(ErrorCode::not_found,
                  who + ": " + source_.string() +
                      " does not export '" PP_ENTRY_SYMBOL
                      "'; build it with passepartout_add_skill() and PASSEPARTOUT_SKILL(YourClass)");
    }
    auto& entry = library_.get<const pp_skill_api*()>(PP_ENTRY_SYMBOL);
    const pp_skill_api* table = entry();
    if (table == nullptr) return fail(ErrorCode::invalid_input, who + ": the entry function returned no skill table");
    return table;
  }

 private:
  fs::path source_;
  fs::path copy_;
  bool never_unload_;
  boost::dll::shared_library library_;  // owned here only: copying it would re-open by path
};

// Destroys a slot on the control thread (where dlclose belongs), or right
// here when this is the control thread or there is none.
struct RetireOnControl {
  std::shared_ptr<ControlThread::Queue> queue;
  void operator()(Slot* slot) const {
    if (!queue || std::this_thread::get_id() == queue->thread_id()) {
      delete slot;
      return;
    }
    queue->post([slot] { delete slot; });
  }
};

// Shared objects mapped in this process, by path.
std::set<std::string> loaded_objects() {
  std::set<std::string> names;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
          static_cast<std::set<std::string>*>(out)->insert(info->dlpi_name);
        }
        return 0;
      },
      &names);
  return names;
}

// Libraries a skill links against (RE2, say) stay loaded for the process's
// life; only the skill's own code is swapped. Unloading them with the skill
// would re-run their one-time initialisation on every swap and leak it.
void pin_new_dependencies(const std::set<std::string>& before, const fs::path& skill_copy) {
  for (const std::string& name : loaded_objects()) {
    if (before.count(name) != 0 || name == skill_copy.string()) continue;
    if (void* handle = ::dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE); handle != nullptr) {
      ::dlclose(handle);  // drops the probe's reference; RTLD_NODELETE stays
      log_message(LogLevel::debug, "loader", "keeping {} loaded for the process's life", name);
    }
  }
}

// True for a folder on a memory-backed file system (tmpfs) that allows
// executable mappings: private copies written there never wait for a disk.
bool is_executable_tmpfs(const fs::path& dir) {
  struct statfs fs_info {};
  struct statvfs vfs_info {};
  if (::statfs(dir.c_str(), &fs_info) != 0 || ::statvfs(dir.c_str(), &vfs_info) != 0) return false;
  return fs_info.f_type == TMPFS_MAGIC && (vfs_info.f_flag & ST_NOEXEC) == 0 && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

constexpr std::string_view kCopyDirPrefix = "passepartout-libs-";

// A new private folder in `parent`, after sweeping the ones dead processes left there.
std::optional<fs::path> make_private_dir_in(const fs::path& parent) {
  sweep_stale_copy_dirs(parent);
  std::string pattern = (parent / (std::string(kCopyDirPrefix) + std::to_string(::getpid()) + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) return std::nullopt;
  return fs::path(pattern);
}

// Where private copies go: a new folder in $XDG_RUNTIME_DIR or /dev/shm when
// they are an executable tmpfs (a copy is written, mapped and unlinked on
// every load and swap; on a disk file system the journal can stall a swap for
// milliseconds), else in the temporary folder.
Result<fs::path> make_private_dir() {
  std::vector<fs::path> candidates;
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime != nullptr && *runtime == '/') {
    candidates.emplace_back(runtime);
  }
  candidates.emplace_back("/dev/shm");
  for (const fs::path& parent : candidates) {
    if (!is_executable_tmpfs(parent)) continue;
    if (auto dir = make_private_dir_in(parent)) return *dir;
  }
  const fs::path parent = fs::temp_directory_path();
  if (auto dir = make_private_dir_in(parent)) return *dir;
  return fail(ErrorCode::io_error, "loader: cannot create a private folder for library copies in " + parent.string() +
                                       ": " + errno_text(errno));
}

// Writes `bytes` to a new file nobody else can have opened, readable and executable by us only.
Result<void> write_private_copy(const fs::path& copy, const std::string& bytes, const std::string& who) {
  int fd = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
  if (fd < 0) return fail(ErrorCode::io_error, who + ": cannot create " + copy.string() + ": " + errno_text(errno));
  std::size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string reason = errno_text(errno);
      ::close(fd);
      ::unlink(copy.c_str());
      return fail(ErrorCode::io_error, fmt::format("{}: cannot write {}: {}", who, copy.string(), reason));
    }
    written += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return {};
}

}  // namespace

std::size_t sweep_stale_copy_dirs(const fs::path& parent) {
  std::size_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kCopyDirPrefix, 0) != 0) continue;
    // "<prefix><pid>-XXXXXX": the pid of the process that made it.
    const std::string_view rest = std::string_view(name).substr(kCopyDirPrefix.size());
    const std::size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string_view::npos) continue;
    long pid = 0;
    const auto [end_of_pid, parse_error] = std::from_chars(rest.data(), rest.data() + dash, pid);
    if (parse_error != std::errc() || end_of_pid != rest.data() + dash || pid <= 0) continue;
    struct stat info {};
    if (::lstat(it->path().c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::getuid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code removal;
    if (fs::remove(it->path(), removal) && !removal) ++removed;  // fails, harmlessly, when not empty
  }
  return removed;
}

LoaderOptions loader_options(fs::path plugin_dir, bool check_permissions, fs::path workspace) {
  LoaderOptions options;
  options.plugin_dir = std::move(plugin_dir);
  options.check_permissions = check_permissions;
  options.workspace = std::move(workspace);
  return options;
}

std::uint64_t leaked_library_count() noexcept { return leaked_libraries.load(std::memory_order_relaxed); }
std::uint64_t pinned_library_count() noexcept { return pinned_libraries.load(std::memory_order_relaxed); }

Result<std::string> sha256_file(const fs::path& file) {
  auto bytes = read_file(file, "sha256");
  if (!bytes) return fail(bytes.error().code, bytes.error().message);
  return sha256_hex(*bytes);
}

struct SkillLoader::State {
  LoaderOptions options;
  bool owns_copy_dir = false;

  ~State() {
    std::error_code ec;
    if (owns_copy_dir) fs::remove(options.copy_dir, ec);  // empty: copies are unlinked once mapped
  }
};

Result<SkillLoader> SkillLoader::create(LoaderOptions options) {
  auto state = std::make_unique<State>();
  if (options.copy_dir.empty()) {
    auto dir = make_private_dir();
    if (!dir) return fail(dir.error().code, dir.error().message);
    options.copy_dir = *dir;
    state->owns_copy_dir = true;
  }
  state->options = std::move(options);
  return SkillLoader(std::move(state));
}

SkillLoader::SkillLoader(std::unique_ptr<State> state) : state_(std::move(state)) {}
SkillLoader::SkillLoader(SkillLoader&&) noexcept = default;
SkillLoader& SkillLoader::operator=(SkillLoader&&) noexcept = default;
SkillLoader::~SkillLoader() = default;

void SkillLoader::set_retire_queue(std::shared_ptr<ControlThread::Queue> queue) {
  state_->options.retire_queue = std::move(queue);
}

void SkillLoader::set_on_quarantine(std::function<void(const std::string&, const std::string&)> report) {
  state_->options.on_quarantine = std::move(report);
}

const fs::path& SkillLoader::plugin_dir() const noexcept { return state_->options.plugin_dir; }

const fs::path& SkillLoader::copy_dir() const noexcept { return state_->options.copy_dir; }

fs::path SkillLoader::library_path(const SkillManifest& manifest) const {
  return (manifest.library_dir.empty() ? state_->options.plugin_dir : manifest.library_dir) / manifest.library;
}

Result<Value> SkillLoader::expand_config(const SkillManifest& manifest, const std::string& who) const {
  ConfigPlaceholders placeholders;
  const fs::path& workspace = state_->options.workspace;
  if (!workspace.empty()) placeholders.emplace("workspace", workspace.string());
  auto expanded = expand_config_placeholders(manifest.config, placeholders, who);
  if (!expanded) return fail(expanded.error().code, expanded.error().message);
  if (expanded->used.count("workspace") != 0) {
    std::error_code ec;
    if (!fs::is_directory(workspace, ec)) {
      fs::create_directories(workspace, ec);
      if (ec) {
        return fail(ErrorCode::io_error,
                    who + ": cannot create the workspace " + workspace.string() + ": " + ec.message());
      }
      ::chmod(workspace.c_str(), 0700);
      log_message(LogLevel::info, "loader", "created the workspace {} (mode 0700)", workspace.string());
    }
  }
  return std::move(expanded->config);
}

Result<SkillLoader::CheckedLibrary> SkillLoader::read_checked(const SkillManifest& manifest) const {
  const std::string who = quoted(manifest.name);
  const fs::path source = library_path(manifest);
  if (manifest.gate_timeout && *manifest.gate_timeout > state_->options.gate_timeout_max) {
    return fail(ErrorCode::refused, who + ": 'gate_timeout' " + std::to_string(manifest.gate_timeout->count()) +
                                        " ms in " + manifest.path.filename().string() +
                                        " is above the host's maximum of " +
                                        std::to_string(state_->options.gate_timeout_max.count()) +
                                        " ms (--gate-timeout-max); lower it, or raise the maximum");
  }

  // A layer the manifest requires and this machine cannot give: refused before anything is read.
  const SandboxCapabilities& capabilities =
      state_->options.sandbox_capabilities ? *state_->options.sandbox_capabilities : sandbox_capabilities();
  if (auto required = check_requirements(manifest.sandbox, capabilities); !required) {
    return fail(required.error().code, who + ": " + required.error().message);
  }

  std::error_code ec;
  if (!fs::exists(source, ec)) {
    return fail(ErrorCode::not_found, who + ": library " + source.string() +
                                          " not found; build it, or fix 'library' in " +
                                          manifest.path.filename().string() + " or the plugin folder");
  }
  if (state_->options.check_permissions) {
    if (auto ok = check_not_writable_by_others(source, who, false); !ok)
      return fail(ok.error().code, ok.error().message);
    if (auto ok = check_not_writable_by_others(source.parent_path(), who, true); !ok) {
      return fail(ok.error().code, ok.error().message);
    }
  }

  // Hash exactly the bytes that get mapped: read once, pin-check, write the private copy.
  auto bytes = read_file(source, who);
  if (!bytes) return fail(bytes.error().code, bytes.error().message);
  std::string sha256 = sha256_hex(*bytes);
  if (manifest.sha256 && *manifest.sha256 != sha256) {
    return fail(ErrorCode::refused, who + ": sha256 of " + source.string() + " is " + sha256 + ", the manifest pins " +
                                        *manifest.sha256 + "; rebuild the pinned version or update 'sha256' in " +
                                        manifest.path.filename().string());
  }
  return CheckedLibrary{source, std::move(*bytes), std::move(sha256)};
}

Result<SkillLoader::MappedLibrary> SkillLoader::map(const SkillManifest& manifest) {
  const std::string who = quoted(manifest.name);
  auto checked = read_checked(manifest);
  if (!checked) return fail(checked.error().code, checked.error().message);
  const fs::path& source = checked->source;
  const std::string& bytes = checked->bytes;

  // GNU unique symbols make glibc ignore dlclose: every swap would leave a copy mapped.
  if (ElfReport elf = inspect_elf_bytes(bytes); !elf.gnu_unique_symbols.empty()) {
    log_message(LogLevel::warn, "loader",
                "{}: {} exports STB_GNU_UNIQUE symbols ({}{}); glibc will never unload it, so each hot swap leaves "
                "a copy mapped; build it with -fno-gnu-unique (passepartout_add_skill does)",
                who, source.string(), elf.gnu_unique_symbols.front(), elf.gnu_unique_symbols.size() > 1 ? ", ..." : "");
  }

  // A unique path per load: dlopen caches by path and would hand back the old code.
  fs::path copy =
      state_->options.copy_dir / (manifest.name + "-" + std::to_string(::getpid()) + "-" +
                                  std::to_string(copy_sequence.fetch_add(1, std::memory_order_relaxed)) + ".so");
  if (auto ok = write_private_copy(copy, bytes, who); !ok) return fail(ok.error().code, ok.error().message);

  auto library = std::make_unique<BoostSkillLibrary>(source, copy, manifest.never_unload);
  const std::set<std::string> before = loaded_objects();
  auto opened = library->open(who);
  if (opened) pin_new_dependencies(before, copy);
  std::error_code ec;
  fs::remove(copy, ec);  // the mapping outlives the name; nothing is left behind on a crash
  if (!opened) return fail(opened.error().code, opened.error().message);

  auto entry = library->entry_table(who);
  if (!entry) return fail(entry.error().code, entry.error().message);
  auto table = SkillTable::read(**entry, manifest);
  if (!table) return fail(table.error().code, table.error().message);
  return MappedLibrary{std::move(library), std::move(*table), std::move(checked->sha256)};
}

Result<std::shared_ptr<Slot>> SkillLoader::open(const SkillManifest& manifest) {
  const std::string who = quoted(manifest.name);
  std::unique_ptr<SkillLibrary> library;
  std::optional<SkillTable> table;
  std::string sha256;
  if (manifest.isolation == Isolation::process || state_->options.force_process) {
    // The same checks of the file here; the worker maps it, pinned to these bytes.
    auto checked = read_checked(manifest);
    if (!checked) return fail(checked.error().code, checked.error().message);
    auto started = ProcessSkillLibrary::start(manifest, checked->source, checked->sha256, state_->options);
    if (!started) return fail(started.error().code, started.error().message);
    auto read = SkillTable::read((*started)->table(), manifest);
    if (!read) return fail(read.error().code, read.error().message);
    library = std::move(*started);
    table = std::move(*read);
    sha256 = std::move(checked->sha256);
  } else {
    auto mapped = map(manifest);
    if (!mapped) return fail(mapped.error().code, mapped.error().message);
    library = std::move(mapped->library);
    table = std::move(mapped->table);
    sha256 = std::move(mapped->sha256);
  }
  if (auto ok = table->check_guards(manifest); !ok) return fail(ok.error().code, ok.error().message);
  auto config = expand_config(manifest, who);
  if (!config) return fail(config.error().code, config.error().message);

  return std::shared_ptr<Slot>(
      new Slot(manifest, std::move(sha256), std::move(library), std::move(*table), std::move(*config)),
      RetireOnControl{state_->options.retire_queue});
}

Result<std::shared_ptr<Slot>> SkillLoader::load(const SkillManifest& manifest) {
  auto slot = open(manifest);
  if (!slot) return slot;
  if (auto ok = (*slot)->create_instance(); !ok) return fail(ok.error().code, ok.error().message);
  if (auto ok = (*slot)->self_test(); !ok) return fail(ok.error().code, ok.error().message);
  return slot;
}

}  // namespace passepartout

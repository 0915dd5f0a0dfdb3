// A skill project from the template; a skill's files checked, then written
// into a daemon's folders atomically, and removed again.
#include "cli/skill_install.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>
#include <system_error>
#include <utility>

#include "base/errno_text.hpp"
#include "base/file_io.hpp"
#include "cli/local_skills.hpp"
#include "skills/skill_manifest.hpp"

namespace passepartout::cli {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxLibraryBytes = 512ULL * 1024 * 1024;  // the loader's limit
constexpr std::size_t kMaxTemplateFileBytes = 1 << 20;
constexpr mode_t kFileMode = 0644;
constexpr mode_t kFolderMode = 0755;

// A folder made with mkdtemp(), removed with what is in it when it goes.
class ScratchDir {
 public:
  ScratchDir() = default;
  ~ScratchDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // Makes <parent>/<prefix>XXXXXX; false with `error` set when it cannot.
  bool make(const fs::path& parent, const std::string& prefix, std::string& error) {
    std::string pattern = (parent / (prefix + "XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      error = "cannot create a folder in " + parent.string() + ": " + errno_text(errno);
      return false;
    }
    path_ = pattern;
    return true;
  }
  // Keeps the folder (it was renamed into place).
  void release() { path_.clear(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (auto pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
}

// "word-guard" -> "WordGuard"; a name starting with a digit gets "Skill" before it.
std::string class_name(const std::string& name) {
  std::string out;
  bool upper = true;
  for (char c : name) {
    if (c == '-') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out.front())) != 0) out = "Skill" + out;
  return out;
}

Result<std::string> read_whole(const fs::path& file, std::size_t limit) {
  auto bytes = read_bounded_file(file, limit);
  if (!bytes) {
    return fail(bytes.error().code == ErrorCode::not_found ? ErrorCode::not_found : ErrorCode::io_error,
                "cannot read " + file.string() + ": " + bytes.error().message);
  }
  return bytes;
}

// Makes `folder` (and its parents) when missing, mode 0755.
Result<void> ensure_folder(const fs::path& folder) {
  std::error_code ec;
  if (fs::is_directory(folder, ec)) return {};
  fs::create_directories(folder, ec);
  if (ec) return fail(ErrorCode::io_error, "cannot create the folder " + folder.string() + ": " + ec.message());
  fs::permissions(folder, static_cast<fs::perms>(kFolderMode), ec);
  return {};
}

// The manifests of `folder` that parsed (none when it does not exist).
std::vector<SkillManifest> manifests_in(const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return {};
  auto set = load_manifest_dir(folder);
  if (!set) return {};
  return std::move(set->manifests);
}

const SkillManifest* named(const std::vector<SkillManifest>& manifests, const std::string& name) {
  for (const auto& manifest : manifests) {
    if (manifest.name == name) return &manifest;
  }
  return nullptr;
}

// Copies into `staging` (manifests/ and plugins/) the manifests of the
// daemon's folder that `manifest` needs, and theirs, with their libraries.
void stage_requirements(const SkillManifest& manifest, const std::vector<SkillManifest>& installed,
                        const SkillFolders& folders, const fs::path& staging) {
  std::set<std::string> seen{manifest.name};
  std::vector<const SkillManifest*> pending{&manifest};
  while (!pending.empty()) {
    const SkillManifest* current = pending.back();
    pending.pop_back();
    for (const Dependency* requirement : current->requirements()) {
      if (!seen.insert(requirement->name).second) continue;
      const SkillManifest* found = named(installed, requirement->name);
      if (found == nullptr) continue;  // the check says what is missing
      std::error_code ec;
      fs::copy_file(found->path, staging / "manifests" / found->path.filename(), ec);
      fs::copy_file(folders.plugin_dir / found->library, staging / "plugins" / found->library,
                    fs::copy_options::overwrite_existing, ec);
      pending.push_back(found);
    }
  }
}

}  // namespace

std::string shell_word(const std::string& text) {
  const bool safe = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("_./-+=:,@%").find(c) != std::string_view::npos;
  });
  if (safe) return text;
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

Result<NewProject> make_skill_project(const std::string& name, const fs::path& parent, const fs::path& template_dir,
                                      const fs::path& sdk_prefix) {
  if (!is_valid_skill_name(name)) {
    return fail(ErrorCode::invalid_input,
                "'" + name +
                    "' is not a valid skill name: lower-case letters, digits and '-', starting with a letter or digit, "
                    "at most " +
                    std::to_string(SkillManifest::kMaxNameLength) + " characters");
  }
  std::error_code ec;
  if (!fs::is_regular_file(template_dir / "my-skill.yaml", ec) ||
      !fs::is_regular_file(template_dir / "my_skill.cpp", ec) ||
      !fs::is_regular_file(template_dir / "CMakeLists.txt", ec)) {
    return fail(ErrorCode::not_found, "no skill template in " + template_dir.string() +
                                          " (it needs my-skill.yaml, my_skill.cpp and CMakeLists.txt); install the "
                                          "SDK, or give the template's folder with --template or "
                                          "PASSEPARTOUT_TEMPLATE_DIR");
  }
  const fs::path base = parent.empty() ? fs::path(".") : parent;
  if (!fs::is_directory(base, ec)) return fail(ErrorCode::not_found, "the folder " + base.string() + " does not exist");
  const fs::path target = parent.empty() ? fs::path(name) : parent / name;
  if (fs::exists(fs::symlink_status(target, ec))) {
    if (!fs::is_directory(fs::symlink_status(target, ec)) || !fs::is_empty(target, ec)) {
      return fail(ErrorCode::refused, target.string() +
                                          " exists and is not an empty folder; nothing was written "
                                          "(choose another name, or another parent with --dir)");
    }
  }

  const std::string identifier = [&] {
    std::string id = name;
    std::replace(id.begin(), id.end(), '-', '_');
    return id;
  }();
  const std::map<std::string, std::string> renames{{"my-skill.yaml", name + ".yaml"},
                                                   {"my_skill.cpp", identifier + ".cpp"}};
  auto fill = [&](std::string text) {
    replace_all(text, "my-skill", name);
    replace_all(text, "my_skill", identifier);
    replace_all(text, "MySkill", class_name(name));
    return text;
  };

  ScratchDir staging;
  std::string error;
  if (!staging.make(base, "." + name + ".new-", error)) return fail(ErrorCode::io_error, error);
  NewProject project;
  for (auto it = fs::recursive_directory_iterator(template_dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path relative = it->path().lexically_relative(template_dir);
    fs::path out_relative = relative;
    if (auto renamed = renames.find(relative.string()); renamed != renames.end()) out_relative = renamed->second;
    const fs::path out = staging.path() / out_relative;
    if (it->is_directory(ec)) {
      fs::create_directories(out, ec);
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    auto text = read_whole(it->path(), kMaxTemplateFileBytes);
    if (!text) return fail(text.error().code, text.error().message);
    if (auto ok = write_file_durably(out, fill(std::move(*text)), kFileMode); !ok) {
      return fail(ok.error().code, ok.error().message);
    }
    project.files.push_back(out_relative);
  }
  if (ec) return fail(ErrorCode::io_error, "cannot read the template " + template_dir.string() + ": " + ec.message());
  fs::permissions(staging.path(), static_cast<fs::perms>(kFolderMode), ec);
  if (::rename(staging.path().c_str(), target.c_str()) != 0) {
    return fail(ErrorCode::refused,
                "cannot create " + target.string() + ": " + errno_text(errno) + "; nothing was written");
  }
  staging.release();
  sync_path(base, true);
  std::sort(project.files.begin(), project.files.end());

  project.dir = target;
  const std::string dir = shell_word(target.string());
  const std::string prefix =
      sdk_prefix.empty() ? std::string("<prefix the SDK is installed under>") : shell_word(sdk_prefix.string());
  project.next = {
      "cmake -S " + dir + " -B " + shell_word((target / "build").string()) + " -DCMAKE_PREFIX_PATH=" + prefix,
      "cmake --build " + shell_word((target / "build").string()),
      "passepartout skills install " + shell_word((target / (name + ".yaml")).string())};
  return project;
}

Result<fs::path> find_skill_library(const fs::path& manifest, const std::string& library) {
  const fs::path folder = manifest.parent_path().empty() ? fs::path(".") : manifest.parent_path();
  const fs::path beside = folder / library;
  const fs::path built = folder / "build" / library;
  std::error_code ec;
  if (fs::is_regular_file(beside, ec)) return beside;
  if (fs::is_regular_file(built, ec)) return built;
  return fail(ErrorCode::not_found, "the library " + library + " is in neither " + beside.string() + " nor " +
                                        built.string() + "; build it (cmake --build " + (folder / "build").string() +
                                        ") or give its path after the manifest");
}

Result<InstalledSkill> install_skill_files(const fs::path& manifest_file, const fs::path& library_file,
                                           const SkillFolders& folders) {
  auto manifest = SkillManifest::load(manifest_file);
  if (!manifest) {
    return fail(manifest.error().code == ErrorCode::not_found ? ErrorCode::not_found : ErrorCode::invalid_input,
                manifest.error().message);
  }
  fs::path library_source = library_file;
  if (library_source.empty()) {
    auto found = find_skill_library(manifest_file, manifest->library);
    if (!found) return fail(found.error().code, found.error().message);
    library_source = *found;
  }
  auto manifest_bytes = read_whole(manifest_file, SkillManifest::kMaxFileSize);
  if (!manifest_bytes) return fail(manifest_bytes.error().code, manifest_bytes.error().message);
  auto library_bytes = read_whole(library_source, kMaxLibraryBytes);
  if (!library_bytes) return fail(library_bytes.error().code, library_bytes.error().message);

  // Whose files are in the way: the folder's manifests, by name and by library.
  const std::vector<SkillManifest> installed = manifests_in(folders.manifest_dir);
  const SkillManifest* same = named(installed, manifest->name);
  for (const auto& other : installed) {
    if (other.name != manifest->name && other.library == manifest->library) {
      return fail(ErrorCode::refused, "the library " + (folders.plugin_dir / manifest->library).string() +
                                          " belongs to skill '" + other.name + "' (" + other.path.string() +
                                          "); nothing was installed (give the library another name)");
    }
  }
  const fs::path manifest_target = same != nullptr ? same->path : folders.manifest_dir / (manifest->name + ".yaml");
  const fs::path library_target = folders.plugin_dir / manifest->library;
  std::error_code ec;
  if (same == nullptr && fs::exists(fs::symlink_status(manifest_target, ec))) {
    return fail(ErrorCode::refused, manifest_target.string() + " exists and is not a manifest of skill '" +
                                        manifest->name + "'; nothing was installed");
  }
  const bool library_is_ours = same != nullptr && same->library == manifest->library;
  if (!library_is_ours && fs::exists(fs::symlink_status(library_target, ec))) {
    return fail(ErrorCode::refused, library_target.string() + " exists and no manifest of skill '" + manifest->name +
                                        "' in " + folders.manifest_dir.string() + " names it; nothing was installed");
  }

  // The check, in a private folder: the skill and what it needs.
  std::string check_line;
  {
    ScratchDir staging;
    std::string error;
    if (!staging.make(fs::temp_directory_path(ec), "passepartout-install-", error)) {
      return fail(ErrorCode::io_error, error);
    }
    fs::create_directory(staging.path() / "manifests", ec);
    fs::create_directory(staging.path() / "plugins", ec);
    fs::permissions(staging.path() / "plugins", static_cast<fs::perms>(kFolderMode), ec);
    stage_requirements(*manifest, installed, folders, staging.path());
    if (auto ok = write_file_durably(staging.path() / "plugins" / manifest->library, *library_bytes, kFileMode); !ok) {
      return fail(ok.error().code, ok.error().message);
    }
    if (auto ok =
            write_file_durably(staging.path() / "manifests" / manifest_file.filename(), *manifest_bytes, kFileMode);
        !ok) {
      return fail(ok.error().code, ok.error().message);
    }
    auto loaded = load_local_skills(staging.path() / "manifests", staging.path() / "plugins", error);
    if (!loaded) return fail(ErrorCode::refused, "skill '" + manifest->name + "' was not checked: " + error);
    std::string problems;
    for (const auto& e : loaded->boot.manifest_errors) problems += "\n  " + e.message;
    for (const auto& d : loaded->boot.disabled) {
      if (d.name == manifest->name) problems += "\n  skill '" + d.name + "' disabled: " + d.reason;
    }
    for (const auto& slot : loaded->boot.slots) {
      if (slot->name() == manifest->name) check_line = describe_slot(*slot);
    }
    if (!problems.empty() || check_line.empty()) {
      return fail(ErrorCode::refused, "skill '" + manifest->name + "' would not load; nothing was installed:" +
                                          (problems.empty() ? std::string("\n  it was not loaded") : problems));
    }
  }

  InstalledSkill result;
  result.name = manifest->name;
  result.version = manifest->version.to_string();
  result.check = check_line;
  result.manifest = manifest_target;
  result.library = library_target;
  result.upgrade = same != nullptr;
  if (result.upgrade) {
    if (auto old = read_whole(manifest_target, SkillManifest::kMaxFileSize); old) result.previous_manifest = *old;
    if (library_is_ours) {
      if (auto old = read_whole(library_target, kMaxLibraryBytes); old) result.previous_library = *old;
    } else if (std::none_of(installed.begin(), installed.end(), [&](const SkillManifest& other) {
                 return other.name != manifest->name && other.library == same->library;
               })) {
      result.stale_library = folders.plugin_dir / same->library;
    }
  }
  if (auto ok = ensure_folder(folders.plugin_dir); !ok) return fail(ok.error().code, ok.error().message);
  if (auto ok = ensure_folder(folders.manifest_dir); !ok) return fail(ok.error().code, ok.error().message);
  // The library first: a manifest never names a library that is not there yet.
  if (auto ok = write_file_durably(library_target, *library_bytes, kFileMode); !ok) {
    return fail(ok.error().code, ok.error().message);
  }
  if (auto ok = write_file_durably(manifest_target, *manifest_bytes, kFileMode); !ok) {
    InstalledSkill partial = result;
    partial.manifest.clear();
    (void)undo_install(partial);
    return fail(ok.error().code, ok.error().message);
  }
  return result;
}

Result<void> undo_install(const InstalledSkill& installed) {
  std::string problems;
  auto restore = [&](const fs::path& file, const std::optional<std::string>& previous) {
    if (file.empty()) return;
    if (previous) {
      if (auto ok = write_file_durably(file, *previous, kFileMode); !ok)
        problems += (problems.empty() ? "" : "; ") + ok.error().message;
      return;
    }
    std::error_code ec;
    fs::remove(file, ec);
    if (ec) problems += (problems.empty() ? "" : "; ") + ("cannot remove " + file.string() + ": " + ec.message());
  };
  // The manifest first, so that it never names a library that is gone.
  restore(installed.manifest, installed.previous_manifest);
  restore(installed.library, installed.previous_library);
  if (!problems.empty()) return fail(ErrorCode::io_error, problems);
  return {};
}

Result<fs::path> find_installed_manifest(const std::string& name, const SkillFolders& folders) {
  const std::vector<SkillManifest> installed = manifests_in(folders.manifest_dir);
  if (const SkillManifest* found = named(installed, name); found != nullptr) return found->path;
  return fail(ErrorCode::not_found, "no manifest in " + folders.manifest_dir.string() + " has name: " + name);
}

Result<RemovedSkill> remove_skill_files(const std::string& name, const SkillFolders& folders) {
  const std::vector<SkillManifest> installed = manifests_in(folders.manifest_dir);
  const SkillManifest* found = named(installed, name);
  if (found == nullptr) {
    return fail(ErrorCode::not_found, "no manifest in " + folders.manifest_dir.string() + " has name: " + name);
  }
  RemovedSkill removed{found->name, found->version.to_string(), found->path, std::nullopt};
  std::error_code ec;
  if (!fs::remove(found->path, ec) || ec) {
    return fail(ErrorCode::io_error,
                "cannot remove " + found->path.string() + ": " + (ec ? ec.message() : std::string("it is gone")));
  }
  sync_path(folders.manifest_dir, true);
  const bool shared = std::any_of(installed.begin(), installed.end(), [&](const SkillManifest& other) {
    return other.name != name && other.library == found->library;
  });
  const fs::path library = folders.plugin_dir / found->library;
  if (!shared && fs::remove(library, ec) && !ec) {
    removed.library = library;
    sync_path(folders.plugin_dir, true);
  } else if (ec) {
    return fail(ErrorCode::io_error,
                "removed " + found->path.string() + " but not " + library.string() + ": " + ec.message());
  }
  return removed;
}

}  // namespace passepartout::cli

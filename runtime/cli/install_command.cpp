// `passepartout skills new|install|uninstall`: the third-party path from the
// template to a skill the daemon loads, keeps across rescans and restarts,
// and gives up again.
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>
#include "cli/cli11.hpp"

#include "base/utf8.hpp"
#include "cli/client.hpp"
#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"
#include "cli/operator_request.hpp"
#include "cli/skill_install.hpp"
#include "cli/terminal_text.hpp"
#include "daemon/protocol.hpp"
#include "skills/bundled_skills.hpp"

namespace passepartout::cli {
namespace fs = std::filesystem;

namespace {

// Bad input is a usage error; a check or a folder that says no, a problem.
int status_for(ErrorCode code) {
  return code == ErrorCode::invalid_input || code == ErrorCode::not_found ? kExitUsage : kExitProblem;
}

std::string absolute_text(const fs::path& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  return (ec ? path : absolute).lexically_normal().string();
}

bool same_folder(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ec), ec);
  const fs::path cb = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return ca == cb;
}

// Where the skill's files go, and whether a daemon answered.
struct Destination {
  SkillFolders folders;
  bool daemon = false;
  std::string no_daemon;  // why none answered
};

// Asks the daemon for its folders (STATUS); with none listening, the given
// folders or the defaults the daemon would start with. Reports a failure
// (and sets `status`) when the daemon cannot be asked or disagrees with
// the folders given.
std::optional<Destination> destination(const Target& target, const SkillFolders& given, const Output& output,
                                       int& status) {
  const OperatorRequest request{"STATUS", {}, {}, {}};
  ClientError error;
  const std::optional<Value> response = exchange_operator_request(target, request, error);
  if (!response) {
    if (error.failure != ClientFailure::unreachable) {
      status = report_client_error(output, error);
      return std::nullopt;
    }
    Destination local;
    local.folders.manifest_dir = given.manifest_dir.empty() ? default_manifest_dir() : given.manifest_dir;
    local.folders.plugin_dir = given.plugin_dir.empty() ? default_plugin_dir() : given.plugin_dir;
    local.no_daemon = error.message;
    return local;
  }
  if (!is_ok_response(*response)) {
    std::string hint;
    const std::string text = operator_failure_text(target, request, *response, hint);
    status = report_failure(output, "cannot ask the daemon for its folders: " + text, hint, kExitProblem,
                            error_response_code(*response));
    return std::nullopt;
  }
  const Value& manifests = response->path({"PAYLOAD", "MANIFEST-DIR"});
  const Value& plugins = response->path({"PAYLOAD", "PLUGIN-DIR"});
  if (!manifests.is_string() || !plugins.is_string() || manifests.text().empty() || plugins.text().empty()) {
    status = report_failure(output,
                            "the daemon at " + target.endpoint.describe() +
                                " does not say which folders it reads skills from (it is older than this client)",
                            "stop it, or put the files in its folders yourself and run `passepartout skills rescan`",
                            kExitProblem);
    return std::nullopt;
  }
  Destination daemon{{fs::path(std::string(manifests.text())), fs::path(std::string(plugins.text()))}, true, {}};
  const std::pair<const fs::path*, const fs::path*> pairs[] = {{&given.manifest_dir, &daemon.folders.manifest_dir},
                                                               {&given.plugin_dir, &daemon.folders.plugin_dir}};
  for (const auto& [mine, theirs] : pairs) {
    if (!mine->empty() && !same_folder(*mine, *theirs)) {
      status = report_failure(
          output,
          "the daemon at " + target.endpoint.describe() + " reads " + theirs->string() + ", not " + mine->string(),
          "leave out --manifests and --plugins to use the daemon's folders", kExitUsage);
      return std::nullopt;
    }
  }
  return daemon;
}

}  // namespace

int run_skills_new(const NewSkillOptions& options, const Output& output) {
  const fs::path template_dir = options.template_dir.empty() ? default_template_dir() : options.template_dir;
  const fs::path prefix = options.template_dir.empty() ? installed_sdk_prefix() : fs::path();
  auto project = make_skill_project(options.name, options.parent, template_dir, prefix);
  if (!project) {
    // Only a failure to write is a problem; a bad name, no template or a folder in use is the caller's to fix.
    return report_failure(output, project.error().message, "",
                          project.error().code == ErrorCode::io_error ? kExitProblem : kExitUsage);
  }
  const std::string sdk_note =
      prefix.empty() ? "the SDK is not installed beside this passepartout: install it with `cmake --install "
                       "<passepartout build> --component sdk --prefix PREFIX` and give that PREFIX"
                     : std::string();
  if (output.json) {
    OrderedJson files = OrderedJson::array();
    for (const auto& file : project->files) files.push_back(file.string());
    OrderedJson document{
        {"ok", true},     {"name", options.name}, {"dir", project->dir.string()}, {"template", template_dir.string()},
        {"files", files}, {"next", project->next}};
    if (!sdk_note.empty()) document["note"] = sdk_note;
    print_json(output.out, document);
    return kExitOk;
  }
  output.out << "Created " << printable(project->dir.string()) << " from the template in "
             << printable(template_dir.string()) << ":\n";
  for (const auto& file : project->files) output.out << "  " << printable((project->dir / file).string()) << '\n';
  output.out << "\nNext: configure, build, install (it loads into the running daemon):\n";
  for (const auto& command : project->next) output.out << "  " << printable(command) << '\n';
  if (!sdk_note.empty()) output.out << "(" << sdk_note << ".)\n";
  return kExitOk;
}

int run_skills_install(const Target& target, const InstallSkillOptions& options, const Output& output) {
  if (!is_valid_utf8(absolute_text(options.manifest))) {
    return report_failure(output, "the manifest path is not UTF-8", "", kExitUsage);
  }
  int status = kExitOk;
  const auto where = destination(target, options.folders, output, status);
  if (!where) return status;
  auto installed = install_skill_files(options.manifest, options.library, where->folders);
  if (!installed) {
    return report_failure(output, installed.error().message,
                          installed.error().code == ErrorCode::refused
                              ? "`passepartout skills check` shows the same checks on a folder of manifests"
                              : "",
                          status_for(installed.error().code));
  }

  OrderedJson changes = OrderedJson::array();
  std::string daemon_message;
  if (where->daemon) {
    const OperatorRequest load{"LOAD",
                               {{"MANIFEST", Value::string(absolute_text(installed->manifest))}},
                               {"the daemon could not read the manifest it was given",
                                "see why with `passepartout skills history --skill " + installed->name + "`"},
                               {}};
    ClientError error;
    const std::optional<Value> response = exchange_operator_request(target, load, error);
    if (!response) {
      return report_failure(
          output,
          "installed " + installed->name + " " + installed->version + " (" + installed->manifest.string() +
              "), but the daemon did not answer the load: " + error.message,
          "it loads at the daemon's next start, or now with `passepartout skills rescan`", kExitProblem);
    }
    if (!is_ok_response(*response)) {
      std::string hint;
      const std::string text = operator_failure_text(target, load, *response, hint);
      const auto undone = undo_install(*installed);
      return report_failure(output,
                            "the daemon refused " + installed->name + " " + installed->version + ": " + text + "; " +
                                (undone ? std::string("the folders were put back as they were")
                                        : "putting the folders back failed: " + undone.error().message),
                            hint, kExitProblem, error_response_code(*response));
    }
    daemon_message = response_message(*response, installed->upgrade ? "swapped" : "loaded");
    changes = list_json(response->path({"PAYLOAD", "CHANGES"}));
  }

  // The old version's library, which the new manifest no longer names.
  if (installed->stale_library) {
    std::error_code ec;
    fs::remove(*installed->stale_library, ec);
  }

  if (output.json) {
    OrderedJson document{{"ok", true},
                         {"skill", installed->name},
                         {"version", installed->version},
                         {"check", installed->check},
                         {"manifest", installed->manifest.string()},
                         {"library", installed->library.string()},
                         {"upgrade", installed->upgrade},
                         {"daemon", where->daemon ? OrderedJson(target.endpoint.describe()) : OrderedJson()},
                         {"loaded", where->daemon}};
    document["message"] = where->daemon ? daemon_message
                                        : "no daemon answered at " + target.endpoint.describe() + " (" +
                                              where->no_daemon + "); the skill loads when the daemon starts";
    document["changes"] = changes;
    print_json(output.out, document);
    return kExitOk;
  }
  output.out << "Checked: " << printable(installed->check) << '\n'
             << (installed->upgrade ? "Upgraded " : "Installed ") << printable(installed->name) << ' '
             << printable(installed->version) << ":\n"
             << "  " << printable(installed->manifest.string()) << '\n'
             << "  " << printable(installed->library.string()) << " (mode 0644)\n";
  if (where->daemon) {
    output.out << "The daemon at " << target.endpoint.describe() << " "
               << (installed->upgrade ? "swapped in the new version" : "loaded it")
               << "; it stays across rescans and restarts.\n";
  } else {
    output.out << "No daemon answered at " << target.endpoint.describe() << " (" << printable(where->no_daemon) << "); "
               << printable(installed->name) << " loads when the daemon starts with these folders.\n";
  }
  return kExitOk;
}

int run_skills_uninstall(const Target& target, const std::string& name, const SkillFolders& given,
                         const Output& output) {
  if (!is_valid_utf8(name)) return report_failure(output, "the skill name is not UTF-8", "", kExitUsage);
  int status = kExitOk;
  const auto where = destination(target, given, output, status);
  if (!where) return status;
  const auto manifest = find_installed_manifest(name, where->folders);

  bool unloaded = false;
  if (where->daemon) {
    const OperatorRequest unload{"UNLOAD",
                                 {{"NAME", Value::string(name)}},
                                 {"", "unload what needs it first (`passepartout skills unload --cascade " + name +
                                          "` unloads those as well), then uninstall it; nothing was removed"},
                                 {}};
    ClientError error;
    const std::optional<Value> response = exchange_operator_request(target, unload, error);
    if (!response) {
      return report_failure(output, "the daemon did not answer the unload: " + error.message + "; nothing was removed",
                            client_error_hint(error), kExitProblem);
    }
    if (is_ok_response(*response)) {
      unloaded = true;
    } else if (error_response_code(*response) != wire_error::kNotFound) {
      std::string hint;
      const std::string text = operator_failure_text(target, unload, *response, hint);
      return report_failure(output, "the daemon did not unload " + name + ": " + text, hint, kExitProblem,
                            error_response_code(*response));
    }
  }
  if (!manifest) {
    if (!unloaded) {
      return report_failure(output, manifest.error().message,
                            "`passepartout skills list` shows what the daemon has loaded", kExitProblem);
    }
  }
  std::optional<RemovedSkill> removed;
  if (manifest) {
    auto result = remove_skill_files(name, where->folders);
    if (!result) return report_failure(output, result.error().message, "", kExitProblem);
    removed = std::move(*result);
  }

  if (output.json) {
    OrderedJson files = OrderedJson::array();
    if (removed) {
      files.push_back(removed->manifest.string());
      if (removed->library) files.push_back(removed->library->string());
    }
    print_json(output.out,
               OrderedJson{{"ok", true},
                           {"skill", name},
                           {"daemon", where->daemon ? OrderedJson(target.endpoint.describe()) : OrderedJson()},
                           {"unloaded", unloaded},
                           {"removed", files}});
    return kExitOk;
  }
  if (unloaded)
    output.out << "The daemon at " << target.endpoint.describe() << " unloaded " << printable(name) << ".\n";
  if (!where->daemon) {
    output.out << "No daemon answered at " << target.endpoint.describe() << " (" << printable(where->no_daemon)
               << ").\n";
  }
  if (removed) {
    output.out << "Removed " << printable(removed->name) << ' ' << printable(removed->version) << ":\n"
               << "  " << printable(removed->manifest.string()) << '\n';
    if (removed->library) {
      output.out << "  " << printable(removed->library->string()) << '\n';
    } else {
      output.out << "  (its library stays: another manifest names it, or it was gone)\n";
    }
  } else {
    output.out << "No manifest of " << printable(name) << " is in " << printable(where->folders.manifest_dir.string())
               << " (it was loaded from elsewhere); no files were removed.\n";
  }
  return kExitOk;
}

void add_install_commands(CLI::App& skills, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen) {
  auto* create = skills.add_subcommand(
      "new",
      "Start a skill: copy the SDK's template into a new folder NAME (or DIR/NAME) with the name filled\n"
      "in everywhere (manifest NAME.yaml, source, CMake project, library libNAME.so), and print the\n"
      "commands that configure, build and install it. Refuses a folder that exists and is not empty.");
  create
      ->add_option("name", parsed->new_skill.name,
                   "The skill's name: lower-case letters, digits and '-', at most 64 characters")
      ->required()
      ->type_name("NAME");
  create->add_option("--dir", parsed->new_skill.parent, "Make the project in this folder (default: here)")
      ->type_name("PARENT");
  create
      ->add_option("--template", parsed->new_skill.template_dir,
                   "Copy this template folder (default: $PASSEPARTOUT_TEMPLATE_DIR, else the one installed with\n"
                   "the SDK, <prefix>/share/passepartout/template)")
      ->type_name("DIR");
  create->add_flag("--json", parsed->json, "Print one JSON document");
  create->footer("Exit status: 0 created; 1 it could not be written; 2 a bad name, no template, or the folder exists.");
  create->callback([parsed, &chosen] {
    chosen = [parsed] {
      const Output output{std::cout, std::cerr, parsed->json};
      return run_skills_new(parsed->new_skill, output);
    };
  });

  auto* install = skills.add_subcommand(
      "install",
      "Install a built skill into the daemon's folders and load it: checks the manifest and library as\n"
      "`skills check` does (a skill that would not load is refused, nothing copied), writes the library\n"
      "into the daemon's plugin folder and the manifest into its manifest folder (mode 0644, each\n"
      "written whole then renamed), then asks the running daemon to load it (a new version of an\n"
      "installed skill is swapped in). Being in the daemon's folders, it stays across rescans and\n"
      "restarts. The folders are the running daemon's (it is asked); with no daemon running, --manifests\n"
      "and --plugins or the defaults, and the skill loads when the daemon starts. A refused load puts\n"
      "the folders back as they were. Another skill's files are never overwritten.");
  install->add_option("manifest", parsed->install.manifest, "The skill's manifest (NAME.yaml)")
      ->required()
      ->type_name("MANIFEST");
  install
      ->add_option("library", parsed->install.library,
                   "Its library (default: the manifest's `library` next to the manifest, else in build/ next "
                   "to it)")
      ->type_name("LIBRARY");
  install
      ->add_option("--manifests", parsed->install.folders.manifest_dir,
                   "The daemon's manifest folder when none is running (default: $PASSEPARTOUT_MANIFEST_DIR, else "
                   "the installed one)")
      ->type_name("DIR");
  install
      ->add_option("--plugins", parsed->install.folders.plugin_dir,
                   "The daemon's plugin folder when none is running (default: $PASSEPARTOUT_PLUGIN_DIR, else the "
                   "installed one)")
      ->type_name("DIR");
  add_connection_options(*install, *parsed, kReplyTimeoutS);
  install->footer(
      "Exit status: 0 installed (and loaded, when a daemon runs); 1 the check or the daemon refused it, or a file "
      "of another skill is in the way; 2 bad usage, a manifest that does not parse, or no library.");
  install->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      return run_skills_install(target, parsed->install, output);
    });
  });

  auto* uninstall = skills.add_subcommand(
      "uninstall",
      "Unload a skill from the running daemon and remove its files from the daemon's folders: the\n"
      "manifest whose name: is NAME and the library it names (kept when another manifest names it),\n"
      "nothing else. When something depends on the skill the daemon refuses, and nothing is removed.");
  uninstall->add_option("name", parsed->name, "The skill's name")->required()->type_name("NAME");
  uninstall
      ->add_option("--manifests", parsed->install.folders.manifest_dir,
                   "The daemon's manifest folder when none is running (default as for install)")
      ->type_name("DIR");
  uninstall
      ->add_option("--plugins", parsed->install.folders.plugin_dir,
                   "The daemon's plugin folder when none is running (default as for install)")
      ->type_name("DIR");
  add_connection_options(*uninstall, *parsed, kReplyTimeoutS);
  uninstall->footer(
      "Exit status: 0 removed (or unloaded); 1 the daemon refused, no such skill is installed, or a file could not "
      "be removed; 2 bad usage.");
  uninstall->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      return run_skills_uninstall(target, parsed->name, parsed->install.folders, output);
    });
  });
}

}  // namespace passepartout::cli

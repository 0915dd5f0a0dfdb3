// The command-line front end: `passepartout <command>`; each command prints
// text for people by default and one JSON document with --json.
#include "cli/cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include "cli/cli11.hpp"

#include "base/log.hpp"
#include "base/state_paths.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/history_format.hpp"
#include "cli/local_skills.hpp"
#include "cli/terminal_text.hpp"
#include "isolation/confine.hpp"
#include "isolation/skill_worker.hpp"
#include "skills/audit_log.hpp"
#include "skills/bundled_skills.hpp"
#include "skills/registry.hpp"
#include "skills/sandbox_spec.hpp"
#include "skills/skill_boot.hpp"

namespace passepartout::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void print_json(const json& document) { std::cout << document.dump(2) << '\n'; }

int fail_usage(const std::string& message, bool as_json) {
  if (as_json) {
    print_json(json{{"ok", false}, {"error", message}});
  } else {
    std::cerr << "passepartout: " << message << '\n';
  }
  return kExitUsage;
}

// What the manifest's `sandbox:` allows the skill's process, with what holds on this machine.
json sandbox_json(const SandboxSpec& spec) {
  json files = json::array();
  for (const auto& path : spec.files) files.push_back(path.string());
  return json{{"files", files},
              {"network", spec.network},
              {"processes", spec.processes},
              {"memory_bytes", spec.memory_bytes},
              {"open_files", spec.open_files},
              {"cpu_seconds", spec.cpu_seconds},
              {"require", spec.require},
              {"description", describe(spec, sandbox_capabilities())}};
}

json slot_json(const Slot& slot) {
  json deps = json::array();
  for (const auto& dep : slot.manifest().depends_on) deps.push_back(dep.text);
  json guards = json::array();
  for (const auto& guard : slot.manifest().guarded_by) guards.push_back(guard.text);
  json actuators = json::array();
  for (const auto& actuator : slot.actuators()) actuators.push_back(":" + actuator);
  json tools = json::array();
  for (const auto& tool : slot.tools()) tools.push_back(tool.name);
  // null when the skill does not declare its config keys (any key is accepted);
  // "" for a type, default or description the skill left out.
  json config_keys = nullptr;
  if (slot.declares_config()) {
    config_keys = json::array();
    for (const auto& key : slot.config_keys()) {
      config_keys.push_back(json{
          {"name", key.name}, {"type", key.type}, {"default", key.default_value}, {"description", key.description}});
    }
  }
  return json{{"name", slot.name()},
              {"version", slot.version_text()},
              {"priority", slot.priority()},
              {"library", slot.library_path().string()},
              {"sha256", slot.library_sha256()},
              {"depends_on", deps},
              {"guarded_by", guards},
              {"actuators", actuators},
              {"tools", tools},
              {"gate", slot.has_gate()},
              {"prompt", slot.has_prompt()},
              {"config_keys", config_keys},
              {"sandbox", sandbox_json(slot.manifest().sandbox)}};
}

// The skill's config keys for `skills check`, one line each after a heading:
// "greeting (string, default hello): what it does"; or that it declares none.
std::vector<std::string> describe_config_keys(const Slot& slot) {
  if (!slot.declares_config()) return {"config keys: not declared by the skill (any key is accepted, none checked)"};
  std::vector<std::string> lines{"config keys:"};
  for (const auto& key : slot.config_keys()) {
    std::string line = "  " + key.name;
    std::string details = key.type;
    if (!key.default_value.empty()) details += (details.empty() ? "default " : ", default ") + key.default_value;
    if (!details.empty()) line += " (" + details + ")";
    if (!key.description.empty()) line += ": " + key.description;
    lines.push_back(std::move(line));
  }
  return lines;
}

// --- passepartout skills check DIR ------------------------------------------

struct CheckOptions {
  fs::path manifest_dir;
  fs::path plugin_dir;
  bool json = false;
};

int run_check(const CheckOptions& options) {
  std::string error;
  auto loaded = load_local_skills(options.manifest_dir, options.plugin_dir, error);
  if (!loaded) return fail_usage(error, options.json);
  const BootResult& result = loaded->boot;
  const std::size_t total = result.manifests.size() + result.manifest_errors.size();

  if (options.json) {
    json order = json::array();
    for (const auto& slot : result.slots) order.push_back(slot_json(*slot));
    json disabled = json::array();
    for (const auto& d : result.disabled) disabled.push_back(json{{"name", d.name}, {"reason", d.reason}});
    json errors = json::array();
    for (const auto& e : result.manifest_errors) errors.push_back(json{{"message", e.message}});
    print_json(json{{"ok", result.all_loaded()},
                    {"manifest_dir", options.manifest_dir.string()},
                    {"plugin_dir", options.plugin_dir.string()},
                    {"manifests", total},
                    {"sandbox_protections", describe(sandbox_capabilities())},
                    {"order", order},
                    {"disabled", disabled},
                    {"manifest_errors", errors}});
    return result.all_loaded() ? kExitOk : kExitProblem;
  }

  std::cout << "Checked " << total << " manifest" << (total == 1 ? "" : "s") << " in " << options.manifest_dir.string()
            << " (plugins from " << options.plugin_dir.string() << ")\n"
            << describe(sandbox_capabilities()) << "\n";
  if (!result.slots.empty()) {
    std::cout << "\nLoad order:\n";
    for (std::size_t i = 0; i < result.slots.size(); ++i) {
      std::cout << "  " << (i + 1) << ". " << describe_slot(*result.slots[i]) << "\n";
      for (const auto& line : describe_config_keys(*result.slots[i])) std::cout << "     " << line << "\n";
      std::cout << "     sandbox (in a skill process): "
                << describe(result.slots[i]->manifest().sandbox, sandbox_capabilities()) << "\n";
    }
  }
  const std::size_t problems = result.manifest_errors.size() + result.disabled.size();
  if (problems > 0) {
    std::cout << "\nProblems:\n";
    for (const auto& e : result.manifest_errors) std::cout << "  " << e.message << "\n";
    for (const auto& d : result.disabled) std::cout << "  skill '" << d.name << "' disabled: " << d.reason << "\n";
  }
  std::cout << "\n" << result.slots.size() << " of " << total << " skills would load";
  if (problems > 0) std::cout << "; " << problems << " problem" << (problems == 1 ? "" : "s");
  std::cout << ".\n";
  return result.all_loaded() ? kExitOk : kExitProblem;
}

// --- passepartout skills history ------------------------------------------------

}  // namespace

std::string printable(std::string_view text, bool keep_layout) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    unsigned code = byte;
    if (byte == 0xc2 && i + 1 < text.size()) {
      auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) {
        code = next;
        ++i;
      }
    }
    const bool is_control = code < 0x20 || code == 0x7f || (code >= 0x80 && code <= 0x9f && code != byte);
    const bool is_kept_layout = keep_layout && (byte == '\n' || byte == '\t');
    if (is_control && !is_kept_layout) {
      out += "\\x";
      out += kHex[code >> 4];
      out += kHex[code & 0xf];
    } else {
      out += static_cast<char>(byte);
    }
  }
  return out;
}

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++width;
  }
  return width;
}

std::string local_iso8601(std::int64_t unix_ms) {
  const auto seconds = static_cast<std::time_t>(unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000);
  std::tm local{};
  if (::localtime_r(&seconds, &local) == nullptr) return std::to_string(unix_ms) + " ms";
  char text[40];
  if (std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &local) == 0) return std::to_string(unix_ms) + " ms";
  const long offset_minutes = local.tm_gmtoff / 60;
  const long magnitude = offset_minutes < 0 ? -offset_minutes : offset_minutes;
  auto two_digits = [](long n) { return (n < 10 ? "0" : "") + std::to_string(n); };
  return std::string(text) + (offset_minutes < 0 ? '-' : '+') + two_digits(magnitude / 60) + ":" +
         two_digits(magnitude % 60);
}

std::string format_duration(std::int64_t us) {
  if (us < 0) us = 0;
  if (us < 1000) return std::to_string(us) + " us";
  if (us < 1000000) return std::to_string(us / 1000) + "." + std::to_string(us % 1000 / 100) + " ms";
  const std::int64_t hundredths = us % 1000000 / 10000;
  return std::to_string(us / 1000000) + "." + (hundredths < 10 ? "0" : "") + std::to_string(hundredths) + " s";
}

namespace {

// "1.0.0 (3f5a12345678)", with " cfg <fingerprint>" inside the parentheses
// when the settings' fingerprint is known, either part alone, or "-" when
// there is none.
std::string version_side(const std::string& version, const std::string& sha256, const std::string& fingerprint) {
  std::string side = printable(version);
  std::string hashes = printable(sha256.substr(0, 12));
  if (!fingerprint.empty()) hashes += (hashes.empty() ? "cfg " : " cfg ") + printable(fingerprint);
  if (!hashes.empty()) {
    if (!side.empty()) side += ' ';
    side += "(" + hashes + ")";
  }
  return side.empty() ? "-" : side;
}

// Ordered as SkillChange declares its fields, so the document reads like the struct.
nlohmann::ordered_json change_json(const SkillChange& change) {
  return nlohmann::ordered_json{{"id", change.id},
                                {"at_unix_ms", change.at_unix_ms},
                                {"requester", change.requester},
                                {"action", change.action},
                                {"skill", change.skill},
                                {"from_version", change.from_version},
                                {"from_sha256", change.from_sha256},
                                {"to_version", change.to_version},
                                {"to_sha256", change.to_sha256},
                                {"outcome", change.outcome},
                                {"step", change.step},
                                {"error", change.error},
                                {"duration_us", change.duration_us},
                                {"from_fingerprint", change.from_fingerprint},
                                {"to_fingerprint", change.to_fingerprint},
                                {"details", change.details},
                                {"state_handover", change.state_handover},
                                {"detail", change.detail}};
}

int fail_history(const std::string& message, bool as_json) {
  if (as_json) {
    std::cout << json{{"ok", false}, {"error", message}}.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
  } else {
    std::cerr << "passepartout: " << message << '\n';
  }
  return kExitProblem;
}

}  // namespace

int run_local_history(const fs::path& state_dir, const HistoryRequest& request, bool as_json, const std::string& note) {
  const fs::path file = audit_file(state_dir);
  if (!note.empty() && !as_json) std::cerr << "passepartout: " << note << '\n';
  std::vector<SkillChange> changes;
  if (auto log = AuditLog::open_read_only(file); log) {
    auto listed = (*log)->list(request.limit, request.skill);
    if (!listed) return fail_history(listed.error().message, as_json);
    changes = std::move(*listed);
  } else if (log.error().code != ErrorCode::not_found) {
    return fail_history(log.error().message, as_json);
  }

  if (as_json) {
    std::cout << format_history_json(changes, "folder " + state_dir.string());
    return kExitOk;
  }
  if (changes.empty()) {
    if (request.skill.empty()) {
      std::cout << "No skill changes recorded yet (" << file.string() << ").\n";
    } else {
      std::cout << "No changes of skill '" << printable(request.skill) << "' recorded (" << file.string() << ").\n";
    }
    return kExitOk;
  }
  std::cout << format_history(changes);
  return kExitOk;
}

std::string format_history(const std::vector<SkillChange>& changes) {
  constexpr std::size_t kColumns = 7;
  constexpr std::size_t kDuration = 5;  // right-aligned; the rest left-aligned
  std::vector<std::array<std::string, kColumns>> rows;
  rows.reserve(changes.size());
  std::array<std::size_t, kColumns> widths{};
  for (const auto& change : changes) {
    rows.push_back({local_iso8601(change.at_unix_ms), printable(change.action), printable(change.skill),
                    version_side(change.from_version, change.from_sha256, change.from_fingerprint) + " -> " +
                        version_side(change.to_version, change.to_sha256, change.to_fingerprint),
                    printable(change.outcome), format_duration(change.duration_us), printable(change.requester)});
    for (std::size_t c = 0; c < kColumns; ++c) widths[c] = std::max(widths[c], display_width(rows.back()[c]));
  }

  std::string out;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto& row = rows[r];
    std::string line;
    for (std::size_t c = 0; c < kColumns; ++c) {
      if (c > 0) line += "  ";
      const std::string padding(widths[c] - display_width(row[c]), ' ');
      if (c == kDuration) line += padding;
      line += row[c];
      if (c != kDuration && c + 1 < kColumns) line += padding;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';

    const SkillChange& change = changes[r];
    // A message of several lines stays under its change, every line indented.
    auto indented = [&out](std::string_view rest) {
      while (true) {
        const std::size_t end = rest.find('\n');
        out += "    " + printable(rest.substr(0, end)) + '\n';
        if (end == std::string_view::npos) break;
        rest.remove_prefix(end + 1);
      }
    };
    if (!change.details.empty()) indented("changed: " + change.details);
    if (!change.state_handover.empty()) indented("state: " + change.state_handover);
    if (!change.detail.empty()) indented("shadow: " + change.detail);
    if (change.outcome == "ok" || (change.step.empty() && change.error.empty())) continue;
    indented(change.step.empty()    ? change.error
             : change.error.empty() ? change.step
                                    : change.step + ": " + change.error);
  }
  return out;
}

std::string format_history_json(const std::vector<SkillChange>& changes, std::string_view source) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& change : changes) list.push_back(change_json(change));
  nlohmann::ordered_json document = nlohmann::ordered_json::object();
  if (!source.empty()) document["source"] = std::string(source);
  document["changes"] = std::move(list);
  return document.dump(2, ' ', false, json::error_handler_t::replace) + '\n';
}

int run(int argc, char** argv) {
  // The worker a skill with `isolation: process` runs in: started by the
  // daemon, kept out of --help (not meant to be run by hand).
  if (argc >= 2 && std::string_view(argv[1]) == "skill-worker") return run_skill_worker(argc, argv);
  // The sandbox the daemon starts an MCP server over stdio in (isolation/confine.hpp).
  if (argc >= 2 && std::string_view(argv[1]) == "confine") return run_confine(argc, argv);
  CLI::App app{
      "Passepartout: an LLM-agent runtime whose intelligence lives in hot-swappable skills.\n"
      "The model proposes; deterministic gates in skills decide.",
      "passepartout"};
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 success; 1 a skill would not load or a command failed; 2 bad usage;\n"
      "3 (verify, chat) the gates blocked the action; 4 (verify, chat) the gates require approval;\n"
      "5 (chat) no model answered; 6 (interactive chat) the daemon could not be reached again;\n"
      "7 (verify --replay) the outcome of a recorded decision would change.");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Log what happens (to standard error)");

  // version
  bool version_json = false;
  auto* version = app.add_subcommand("version", "Print the version and the skill ABI this host supports");
  version->add_flag("--json", version_json, "Print one JSON document");

  // skills check
  auto* skills =
      app.add_subcommand("skills",
                         "Skills: start one from the template (new), install it into the daemon's folders and\n"
                         "load it (install), remove it (uninstall); check manifests locally; list, load, reload,\n"
                         "unload and rescan them in the running daemon, and read the history of their changes");
  skills->require_subcommand(1);
  CheckOptions check;
  auto* check_cmd = skills->add_subcommand(
      "check",
      "Validate a folder of manifests and the libraries they name, without starting anything:\n"
      "prints the load order and every problem; exits 1 when any skill would not load.\n"
      "Each library is loaded from a private copy, its skill created, self-tested and destroyed.");
  check_cmd->add_option("dir", check.manifest_dir, "Folder of *.yaml manifests")->required();
  check_cmd->add_option(
      "--plugins", check.plugin_dir,
      "Folder the manifests' libraries are resolved against (default: the installed or built plugins; "
      "env PASSEPARTOUT_PLUGIN_DIR)");
  check_cmd->add_flag("--json", check.json, "Print one JSON document");

  Runner chosen;
  add_daemon_command(app, chosen);
  add_client_commands(app, *skills, chosen);
  add_decisions_command(app, chosen);
  add_verify_command(app, chosen);
  add_mcp_command(app, chosen);
  add_fleet_command(app, chosen);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (chosen) return chosen();
  configure_logging(verbose ? LogLevel::debug : LogLevel::warn);

  if (version->parsed()) {
    if (version_json) {
      print_json(json{{"version", PASSEPARTOUT_VERSION},
                      {"abi", std::to_string(PP_ABI_MAJOR) + "." + std::to_string(PP_ABI_MINOR)}});
    } else {
      std::cout << "passepartout " << PASSEPARTOUT_VERSION << " (skill ABI " << PP_ABI_MAJOR << "." << PP_ABI_MINOR
                << ")\n";
    }
    return kExitOk;
  }
  if (check_cmd->parsed()) {
    if (check.plugin_dir.empty()) check.plugin_dir = default_plugin_dir();
    return run_check(check);
  }
  return kExitUsage;
}

}  // namespace passepartout::cli

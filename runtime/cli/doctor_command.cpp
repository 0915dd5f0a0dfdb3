// `passepartout doctor`: whether Passepartout can run here (tools, the state
// folder, the bundled skills, the daemon and its health; a model, for information).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>
#include "cli/cli11.hpp"

#include "base/state_paths.hpp"
#include "cli/client_commands.hpp"
#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"
#include "cli/terminal_text.hpp"
#include "daemon/protocol.hpp"
#include "skills/bundled_skills.hpp"
#include "skills/skill_boot.hpp"
#include "skills/skill_loader.hpp"

namespace passepartout::cli {
namespace fs = std::filesystem;

namespace {

enum class Verdict { ok, warn, fail, info };

const char* to_label(Verdict verdict) {
  switch (verdict) {
    case Verdict::ok:
      return "OK";
    case Verdict::fail:
      return "FAIL";
    case Verdict::info:
      return "INFO";
    case Verdict::warn:
      return "WARN";
  }
  return "FAIL";
}

struct Check {
  std::string name;
  Verdict verdict = Verdict::fail;
  std::string detail;
  std::string hint;  // what to do; empty when there is nothing to do
};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// The first executable `tool` on $PATH, or empty.
fs::path find_on_path(const std::string& tool) {
  std::string path = env("PATH");
  if (path.empty()) path = "/usr/bin:/bin";
  std::size_t from = 0;
  while (from <= path.size()) {
    const std::size_t end = std::min(path.find(':', from), path.size());
    const fs::path dir = end == from ? fs::path(".") : fs::path(path.substr(from, end - from));
    fs::path candidate = dir / tool;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    from = end + 1;
  }
  return {};
}

Check check_tool(const std::string& tool) {
  const fs::path found = find_on_path(tool);
  if (!found.empty()) return {"tool " + tool, Verdict::ok, found.string(), ""};
  return {"tool " + tool, Verdict::fail, "not found on $PATH",
          "install it (the shell skill runs commands with `sh -c`), or add its folder to PATH"};
}

Check check_state_dir(const fs::path& dir) {
  Check check{"state folder", Verdict::fail, dir.string(), ""};
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    check.detail += " does not exist";
    check.hint = "create it with `mkdir -p -m 700 " + dir.string() +
                 "` (the daemon keeps its audit log, approvals, memory and token there), or set PASSEPARTOUT_STATE_DIR";
    return check;
  }
  if (!fs::is_directory(dir, ec)) {
    check.detail += " is not a folder";
    check.hint = "move it away or set PASSEPARTOUT_STATE_DIR to a folder";
    return check;
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    check.detail += " is not writable";
    check.hint = "give this user write access to it, or set PASSEPARTOUT_STATE_DIR";
    return check;
  }
  check.verdict = Verdict::ok;
  check.detail += " (writable)";
  return check;
}

Check check_skills(const fs::path& manifest_dir, const fs::path& plugin_dir) {
  Check check{"bundled skills", Verdict::fail, "", ""};
  const std::string details = "see the details with `passepartout skills check " + manifest_dir.string() +
                              " --plugins " + plugin_dir.string() + "`";
  std::error_code ec;
  if (!fs::is_directory(manifest_dir, ec)) {
    check.detail = "no manifest folder at " + manifest_dir.string();
    check.hint = "pass --manifests DIR or set PASSEPARTOUT_MANIFEST_DIR";
    return check;
  }
  auto loader = SkillLoader::create(LoaderOptions{plugin_dir, {}, true, {}, default_state_dir() / "workspace"});
  if (!loader) {
    check.detail = loader.error().message;
    return check;
  }
  auto booted = boot_skill_dir(manifest_dir, *loader);
  if (!booted) {
    check.detail = booted.error().message;
    return check;
  }
  const std::size_t total = booted->manifests.size() + booted->manifest_errors.size();
  if (total == 0) {
    check.detail = "no manifests in " + manifest_dir.string();
    check.hint = "pass --manifests DIR or set PASSEPARTOUT_MANIFEST_DIR";
    return check;
  }
  check.detail =
      std::to_string(booted->slots.size()) + " of " + std::to_string(total) + " load from " + manifest_dir.string();
  if (booted->all_loaded()) {
    check.verdict = Verdict::ok;
    return check;
  }
  std::string problems;
  for (const auto& e : booted->manifest_errors) problems += (problems.empty() ? "" : "; ") + e.message;
  for (const auto& d : booted->disabled) problems += (problems.empty() ? "" : "; ") + d.name + ": " + d.reason;
  check.detail += " (" + printable(problems) + ")";
  check.hint = details;
  return check;
}

Check check_daemon(const Target& target) {
  Check check{"daemon", Verdict::fail, target.endpoint.describe(), ""};
  Client client;
  ClientError error;
  if (!client.open(target.endpoint, target.connect_timeout, error)) {
    check.detail = error.message;
    check.hint = "start it with `passepartout daemon`, or name where it listens with --socket PATH or --port N";
    return check;
  }
  const std::string version = client.daemon_version();
  if (!version.empty()) check.detail += ", version " + printable(version);
  const auto deadline = Client::Clock::now() + target.reply_timeout;
  Value health_check = Value::plist({{"TYPE", Value::keyword("HEALTH-CHECK")}});
  if (target.endpoint.is_tcp() && !target.token.empty()) {
    health_check = health_check.with("AUTH", Value::string(target.token));
  }
  if (!client.send(health_check, deadline, error)) {
    check.detail += ": " + error.message;
    return check;
  }
  for (;;) {
    Value frame;
    if (!client.read(frame, deadline, error)) {
      check.detail += ": no health response (" + error.message + ")";
      check.hint = "see the daemon's log";
      return check;
    }
    if (!is_health_response(frame)) continue;
    const Value& status = frame.at("STATUS");
    const std::string health = status.is_keyword() ? std::string(status.text()) : std::string("UNKNOWN");
    const bool checked = !frame.at("CHECKED-P").is_nil();
    check.detail += ", health " + printable(health);
    if (health == "HEALTHY") {
      check.verdict = Verdict::ok;
    } else if (health == "UNKNOWN" && !checked) {
      check.verdict = Verdict::ok;
      check.detail += " (no health check has run yet)";
    } else {
      check.hint = "the daemon's log says which of its checks failed";
    }
    return check;
  }
}

Check check_provider() {
  Check check{"language model", Verdict::info, "", ""};
  static constexpr const char* kKeys[] = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GROQ_API_KEY",
                                          "GEMINI_API_KEY"};
  std::string found;
  for (const char* key : kKeys) {
    if (!env(key).empty()) found += (found.empty() ? "" : ", ") + std::string(key);
  }
  std::string detail;
  if (const std::string cascade = env("PROVIDER_CASCADE"); !cascade.empty()) {
    detail = "PROVIDER_CASCADE=" + printable(cascade) + "; ";
  }
  // This daemon's providers are scripted and offline: what is found here is
  // reported as the seed's doctor does, and said to be unused.
  constexpr std::string_view kUnused = " (unused: the daemon's providers are scripted and offline)";
  if (!found.empty()) {
    check.detail = detail + found + " set" + std::string(kUnused);
    return check;
  }
  // A local Ollama: OLLAMA_HOST is host:port (default localhost:11434).
  std::string host = env("OLLAMA_HOST");
  if (host.empty()) host = "localhost:11434";
  if (const auto scheme = host.find("://"); scheme != std::string::npos) host = host.substr(scheme + 3);
  Endpoint ollama;
  ollama.host = host;
  ollama.port = 11434;
  if (const auto colon = host.rfind(':'); colon != std::string::npos && host.find(']') == std::string::npos) {
    ollama.host = host.substr(0, colon);
    const std::string port = host.substr(colon + 1);
    if (!port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos) {
      const int number = std::stoi(port);
      if (number > 0 && number < 65536) ollama.port = static_cast<std::uint16_t>(number);
    }
  }
  std::string why;
  if (is_listening(ollama, std::chrono::seconds(1), why)) {
    check.detail = detail + "something listens at " + ollama.describe() + " (Ollama?)" + std::string(kUnused);
    return check;
  }
  check.detail = detail + "no API key set and nothing listens at " + ollama.describe();
  check.hint =
      "the daemon answers with the scripted provider when given its rules (--script FILE), "
      "otherwise with the offline provider, which says that no model is reachable";
  return check;
}

// Which user the daemon runs as: the owner of its Unix socket, else (over
// TCP, or with no daemon) the user running this command, who would start it.
Check check_user(const Target& target) {
  Check check{"daemon user", Verdict::ok, "", ""};
  uid_t uid = ::geteuid();
  std::string whose = "this user (uid " + std::to_string(uid) + ")";
  struct stat st {};
  if (!target.endpoint.is_tcp() && ::stat(target.endpoint.socket_path.c_str(), &st) == 0) {
    uid = st.st_uid;
    whose = "the daemon (uid " + std::to_string(uid) + ", the owner of its socket)";
  }
  check.detail = whose;
  if (uid == 0) {
    check.verdict = Verdict::warn;
    check.detail += " runs as root: every skill runs with root's privileges";
    check.hint =
        "run the daemon as an unprivileged user: scripts/passepartout.service does (User=passepartout, "
        "scripts/passepartout.sysusers creates it); as root the shell skill runs commands as `nobody` "
        "unless its manifest says allow_root: true";
  }
  return check;
}

}  // namespace

int run_doctor(const Target& target, const DoctorOptions& options, const Output& output) {
  std::vector<Check> checks;
  for (const auto& tool : options.tools) checks.push_back(check_tool(tool));
  checks.push_back(check_state_dir(options.state_dir));
  checks.push_back(check_skills(options.manifest_dir, options.plugin_dir));
  checks.push_back(check_daemon(target));
  checks.push_back(check_user(target));
  if (options.check_provider) checks.push_back(check_provider());

  std::size_t failed = 0;
  for (const auto& check : checks) failed += check.verdict == Verdict::fail ? 1 : 0;
  const bool healthy = failed == 0;

  if (output.json) {
    OrderedJson list = OrderedJson::array();
    for (const auto& check : checks) {
      OrderedJson entry{{"name", check.name}, {"status", json_key(to_label(check.verdict))}, {"detail", check.detail}};
      if (!check.hint.empty()) entry["hint"] = check.hint;
      list.push_back(std::move(entry));
    }
    print_json(output.out, OrderedJson{{"ok", healthy}, {"failed", failed}, {"checks", list}});
    return healthy ? kExitOk : kExitProblem;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& check : checks) {
    std::string label = to_label(check.verdict);
    label.resize(4, ' ');  // the same column whichever labels occur
    rows.push_back({label, check.name, check.detail});
  }
  const std::string table = render_table(rows, {}, "");
  // Each check's hint goes on the line after it.
  std::size_t line_start = 0;
  for (const auto& check : checks) {
    const std::size_t line_end = table.find('\n', line_start);
    output.out << table.substr(line_start, line_end - line_start + 1);
    line_start = line_end + 1;
    if (!check.hint.empty()) output.out << "      hint: " << check.hint << '\n';
  }
  if (healthy) {
    output.out << "\nHealthy.\n";
  } else {
    output.out << "\n" << failed << " check" << (failed == 1 ? "" : "s") << " failed.\n";
  }
  return healthy ? kExitOk : kExitProblem;
}

void add_doctor_command(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen) {
  // doctor
  auto* doctor = app.add_subcommand(
      "doctor",
      "Check that Passepartout can run here: the tools the bundled skills need, the state folder,\n"
      "the bundled skills, the running daemon and its health, and (for information) a language model.\n"
      "Prints each check with OK, FAIL or INFO and a hint.");
  doctor
      ->add_option("--manifests", parsed->doctor.manifest_dir,
                   "Folder of the manifests to check (default: the bundled ones; env PASSEPARTOUT_MANIFEST_DIR)")
      ->type_name("DIR");
  doctor
      ->add_option("--plugins", parsed->doctor.plugin_dir,
                   "Plugin folder (default: the bundled skills; env PASSEPARTOUT_PLUGIN_DIR)")
      ->type_name("DIR");
  doctor
      ->add_option("--state-dir", parsed->doctor.state_dir,
                   "The state folder to check (default: " + default_state_dir().string() + ")")
      ->type_name("DIR");
  add_connection_options(*doctor, *parsed, kReplyTimeoutS);
  doctor->footer("Exit status: 0 every required check passed; 1 a check failed; 2 bad usage.");
  doctor->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      DoctorOptions options = parsed->doctor;
      if (options.manifest_dir.empty()) options.manifest_dir = default_manifest_dir();
      if (options.plugin_dir.empty()) options.plugin_dir = default_plugin_dir();
      if (options.state_dir.empty()) options.state_dir = default_state_dir();
      return run_doctor(target, options, output);
    });
  });
}

}  // namespace passepartout::cli

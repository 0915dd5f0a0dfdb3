// `passepartout verify`: the skills of a manifest folder loaded in this
// process run their gates on one proposed action, or (--replay) on every
// recorded decision of the decision log, whose changed outcomes it reports.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>
#include "cli/cli11.hpp"

#include "base/crash_context.hpp"
#include "base/log.hpp"
#include "cli/commands.hpp"
#include "cli/decision_files.hpp"
#include "cli/decision_replay.hpp"
#include "cli/exit_status.hpp"
#include "cli/fleet_log.hpp"
#include "cli/local_skills.hpp"
#include "pipeline/verifier.hpp"
#include "skills/bundled_skills.hpp"
#include "skills/registry.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t kNamedSkips = 10;   // skipped lines named on stderr; the rest counted
constexpr std::size_t kFleetPage = 5000;  // records read from the fleet's log at a time

struct VerifyOptions {
  std::string action;
  std::string signal = "(:TYPE :EVENT :META (:SOURCE :CLI) :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"\"))";
  std::string replay;  // a decision file, a folder of them, or "-"
  fs::path manifest_dir;
  fs::path plugin_dir;
  bool json = false;
  bool isolate = false;  // every gate in a worker process, whatever the manifests say
};

void print_json(const json& document) { std::cout << document.dump(2) << '\n'; }

int fail_usage(const std::string& message, bool as_json) {
  if (as_json) {
    print_json(json{{"ok", false}, {"error", message}});
  } else {
    std::cerr << "passepartout: " << message << '\n';
  }
  return kExitUsage;
}

// A gate that crashes takes this process with it: the crash writer then
// says what was loaded, in order, before its line naming the gate; a hook
// that calls exit() is named on the way out.
void guard_against_crashing_gates(const BootResult& result) {
  std::string note = "verify: load order:";
  for (std::size_t i = 0; i < result.slots.size(); ++i) {
    note += (i == 0 ? " " : ", ") + std::to_string(i + 1) + ". " + result.slots[i]->name() + " " +
            result.slots[i]->version_text();
  }
  note += result.slots.empty() ? " nothing loaded\n" : "\n";
  set_crash_note(note);
  write_held_logs_on_fatal_signals();
  log_exit_in_skill_hooks();
}

int run_verify(const VerifyOptions& options) {
  auto action = read_sexp(options.action, ReaderLimits{std::size_t{1024} * 1024, 64});
  if (!action) return fail_usage("the action is not a valid s-expression: " + action.error().message, options.json);
  auto signal = read_sexp(options.signal, ReaderLimits{std::size_t{1024} * 1024, 64});
  if (!signal) return fail_usage("the signal is not a valid s-expression: " + signal.error().message, options.json);

  std::string error;
  auto loaded = load_local_skills(options.manifest_dir, options.plugin_dir, error, options.isolate);
  if (!loaded) return fail_usage(error, options.json);
  const BootResult& result = loaded->boot;

  Registry registry;
  registry.publish(result.slots);
  auto snapshot = registry.snapshot();
  guard_against_crashing_gates(result);
  Verification verification = Verifier::verify(*snapshot, *action, *signal);
  set_crash_note({});
  const int status = verification.outcome == VerifyOutcome::passed    ? kExitOk
                     : verification.outcome == VerifyOutcome::blocked ? kExitBlocked
                                                                      : kExitApproval;

  if (options.json) {
    json trace = json::array();
    for (std::size_t i = 0; i < verification.trace.size(); ++i) {
      const auto& e = verification.trace[i];
      json entry{
          {"gate", std::string(e.name())}, {"version", std::string(e.version())}, {"result", to_string(e.result)}};
      if (e.reason.is_string()) entry["reason"] = std::string(e.reason.text());
      trace.push_back(entry);
    }
    json order = json::array();
    for (const auto& slot : result.slots) order.push_back(slot->name());
    json disabled = json::array();
    for (const auto& d : result.disabled) disabled.push_back(json{{"name", d.name}, {"reason", d.reason}});
    json document{{"outcome", to_string(verification.outcome)},
                  {"load_order", order},
                  {"disabled", disabled},
                  {"trace", trace},
                  {"result", to_sexp(verification.to_value())}};
    if (verification.reason.is_string()) document["reason"] = std::string(verification.reason.text());
    print_json(document);
    return status;
  }

  std::cout << "Load order:\n";
  for (std::size_t i = 0; i < result.slots.size(); ++i) {
    std::cout << "  " << (i + 1) << ". " << describe_slot(*result.slots[i]) << "\n";
  }
  for (const auto& e : result.manifest_errors) std::cout << "  problem: " << e.message << "\n";
  for (const auto& d : result.disabled) std::cout << "  skill '" << d.name << "' disabled: " << d.reason << "\n";

  std::cout << "\nAction:  " << to_sexp(*action) << "\n\nGate trace (highest priority first):\n";
  if (verification.trace.empty()) std::cout << "  (no gates loaded)\n";
  for (std::size_t i = 0; i < verification.trace.size(); ++i) {
    const auto& e = verification.trace[i];
    std::string gate = std::string(e.name()) + " " + std::string(e.version());
    std::string result_text = to_string(e.result);
    for (char& c : result_text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::printf("  %-28s %-9s %s\n", gate.c_str(), result_text.c_str(),
                e.reason.is_string() ? std::string(e.reason.text()).c_str() : "");
  }
  std::fflush(stdout);
  std::cout << "\nOutcome: " << to_string(verification.outcome);
  if (verification.reason.is_string()) std::cout << " — " << verification.reason.text();
  std::cout << "\nResult:  " << to_sexp(verification.to_value()) << "\n";
  return status;
}

// The files --replay names, oldest first: the file itself, or a folder's
// decision files (a state folder's decisions/ when it holds none itself).
// Empty with `error` set when there is nothing to read.
std::vector<fs::path> replay_files(const fs::path& given, std::string& error) {
  std::error_code ec;
  if (fs::is_directory(given, ec)) {
    std::vector<fs::path> files = decision_files_newest_first(given);
    if (files.empty() && fs::is_directory(given / "decisions", ec))
      files = decision_files_newest_first(given / "decisions");
    if (files.empty()) {
      error = "no decision files (decisions.jsonl, decisions-*.jsonl) in " + given.string();
    }
    return {files.rbegin(), files.rend()};
  }
  if (!fs::exists(given, ec)) {
    error = "decision file " + given.string() + " does not exist";
    return {};
  }
  return {given};
}

}  // namespace

int replay_decisions(const std::string& replay, const fs::path& manifest_dir, const fs::path& plugin_dir, bool as_json,
                     std::istream& in, std::ostream& out, std::ostream& err, bool isolate) {
  auto fail = [&](const std::string& message) {
    if (as_json) {
      out << json{{"ok", false}, {"error", message}}.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    } else {
      err << "passepartout: " << message << '\n';
    }
    return kExitUsage;
  };
  // A postgresql:// address: the fleet's log, every node's, oldest first.
  const bool fleet = replay.starts_with("postgresql://") || replay.starts_with("postgres://");
  std::optional<FleetTarget> target;
  if (fleet) {
    auto resolved = resolve_fleet_target({}, replay);
    if (!resolved) return fail(resolved.error().message);
    target = std::move(*resolved);
  }
  std::vector<fs::path> files;
  if (replay != "-" && !fleet) {
    std::string error;
    files = replay_files(replay, error);
    if (files.empty()) return fail(error);
    for (const fs::path& file : files) {
      if (!std::ifstream(file, std::ios::binary)) return fail("cannot read decision file " + file.string());
    }
  }

  std::string error;
  auto loaded = load_local_skills(manifest_dir, plugin_dir, error, isolate);
  if (!loaded) return fail(error);
  const BootResult& booted = loaded->boot;
  Registry registry;
  registry.publish(booted.slots);
  guard_against_crashing_gates(booted);
  DecisionReplay replayer(registry.snapshot());

  if (fleet) {
    std::map<std::string, std::size_t, std::less<>> numbers;  // each node's records, counted as lines are
    const auto read =
        read_fleet_decisions(*target, {}, false, kFleetPage, [&](std::string_view node, std::string_view line) {
          auto it = numbers.try_emplace(std::string(node), 0).first;
          replayer.replay_line(line, node, ++it->second);
          return true;
        });
    if (!read) return fail(read.error().message);
  } else if (replay == "-") {
    replayer.replay_stream(in, "stdin");
  } else {
    for (const fs::path& file : files) {
      std::ifstream stream(file, std::ios::binary);
      replayer.replay_stream(stream, file.string());
    }
  }
  const ReplayReport& report = replayer.report();
  const int status = report.changed > 0 ? kExitChanged : kExitOk;

  if (as_json) {
    DecisionJson document{{"ok", true}, {"manifest_dir", manifest_dir.string()}};
    DecisionJson skills = DecisionJson::array();
    for (const auto& slot : booted.slots) skills.push_back({{"name", slot->name()}, {"version", slot->version_text()}});
    document["skills"] = std::move(skills);
    DecisionJson problems = DecisionJson::array();
    for (const auto& e : booted.manifest_errors) problems.push_back(e.message);
    for (const auto& d : booted.disabled) problems.push_back("skill '" + d.name + "' disabled: " + d.reason);
    document["problems"] = std::move(problems);
    document.update(replay_json(report));
    out << document.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    return status;
  }

  for (std::size_t i = 0; i < report.skips.size() && i < kNamedSkips; ++i) {
    err << "passepartout: skipped " << report.skips[i].where << ": " << report.skips[i].why << '\n';
  }
  if (report.skipped > kNamedSkips) err << "passepartout: skipped " << report.skipped << " lines in all\n";
  out << "Replaying against " << booted.slots.size() << " skill" << (booted.slots.size() == 1 ? "" : "s") << " from "
      << manifest_dir.string() << ":";
  for (std::size_t i = 0; i < booted.slots.size(); ++i) {
    out << (i == 0 ? " " : ", ") << booted.slots[i]->name() << ' ' << booted.slots[i]->version_text();
  }
  out << ".\n";
  for (const auto& e : booted.manifest_errors) out << "  problem: " << e.message << '\n';
  for (const auto& d : booted.disabled) out << "  skill '" << d.name << "' disabled: " << d.reason << '\n';
  out << '\n' << format_replay(report);
  return status;
}

void add_verify_command(CLI::App& app, Runner& chosen) {
  auto options = std::make_shared<VerifyOptions>();
  auto* cmd =
      app.add_subcommand("verify",
                         "Load the skills and run every gate on one proposed action (a dry run: nothing is executed).\n"
                         "Prints the load order, the gate trace and the outcome.\n"
                         "With --replay, run every decision the daemon recorded (docs/decision-log.md) through the\n"
                         "skills instead: prints the decisions whose outcome would change, then a summary (records\n"
                         "read, replayed, skipped; outcomes now; changes by gate; how many carried masked text, which\n"
                         "the gates see masked). Exit status 0 when nothing changed, 7 when an outcome changed,\n"
                         "2 for bad input. Lines that are not records or whose action does not parse are skipped\n"
                         "and named (file:line) on standard error.\n"
                         "Skills run as their manifests say (`isolation:`; default a worker process of their own,\n"
                         "the bundled ones in-process); with --isolate every skill runs in a worker process, so a\n"
                         "gate that crashes is reported as failed instead of taking verify down.");
  auto* action =
      cmd->add_option("action", options->action,
                      "The proposed action as an s-expression, e.g.\n"
                      "'(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"ls\" :EXPLANATION \"list files\"))'");
  auto* signal =
      cmd->add_option("--signal", options->signal, "The signal the action answers (default: an empty user input)");
  auto* replay = cmd->add_option("--replay", options->replay,
                                 "Replay recorded decisions: a decision file, a folder of them (decisions.jsonl\n"
                                 "and the rotated decisions-*.jsonl, oldest first; or a state folder holding\n"
                                 "decisions/), - for standard input, or a postgresql:// state database: the\n"
                                 "fleet's log, every node's decisions, oldest first")
                     ->type_name("FILE");
  replay->excludes(action)->excludes(signal);
  cmd->add_option("--manifests", options->manifest_dir,
                  "Folder of manifests (default: the bundled ones; env PASSEPARTOUT_MANIFEST_DIR)");
  cmd->add_option("--plugins", options->plugin_dir,
                  "Plugin folder (default: the bundled skills; env PASSEPARTOUT_PLUGIN_DIR)");
  cmd->add_flag("--json", options->json, "Print one JSON document");
  cmd->add_flag("--isolate", options->isolate,
                "Run every skill in a worker process of its own, whatever its manifest says: a gate that\n"
                "crashes or exits is reported as FAILED (e.g. \"skill process died: SIGSEGV\")");
  const CLI::Option* verbose = app.get_option_no_throw("--verbose");
  cmd->callback([&chosen, options, action, replay, verbose] {
    chosen = [options, action, replay, verbose] {
      const bool is_verbose = verbose != nullptr && verbose->count() > 0;
      // A replay runs the gates thousands of times: what they log on each
      // block would bury the report, so only errors show unless --verbose.
      configure_logging(is_verbose ? LogLevel::debug : replay->count() > 0 ? LogLevel::error : LogLevel::warn);
      if (options->manifest_dir.empty()) options->manifest_dir = default_manifest_dir();
      if (options->plugin_dir.empty()) options->plugin_dir = default_plugin_dir();
      if (replay->count() > 0) {
        return replay_decisions(options->replay, options->manifest_dir, options->plugin_dir, options->json, std::cin,
                                std::cout, std::cerr, options->isolate);
      }
      if (action->count() == 0) return fail_usage("verify needs an action, or --replay FILE", options->json);
      return run_verify(*options);
    };
  });
}

}  // namespace passepartout::cli

// `passepartout skills list|load|reload|unload|rescan|shadow|promote`: the
// skills of the running daemon, and the changes to them with what each change did.
#include <ostream>
#include <string>
#include <system_error>
#include <vector>
#include "cli/cli11.hpp"

#include "base/state_paths.hpp"
#include "base/utf8.hpp"
#include "cli/client.hpp"
#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"
#include "cli/history_format.hpp"
#include "cli/operator_request.hpp"
#include "cli/terminal_text.hpp"
#include "skills/audit_log.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout::cli {
namespace fs = std::filesystem;

namespace {

// A string field's text (or a keyword's lower-case name) for a SkillChange.
std::string field_text(const Value& value) {
  if (value.is_string() || value.is_symbol()) return std::string(value.text());
  if (value.is_keyword()) return json_key(value.text());
  if (value.is_nil()) return {};
  return to_sexp(value);
}

SkillChange wire_change(const Value& change) {
  SkillChange out;
  out.at_unix_ms = change.at("AT-UNIX-MS").as_integer();
  out.requester = field_text(change.at("REQUESTER"));
  out.action = field_text(change.at("KIND"));
  out.skill = field_text(change.at("SKILL"));
  out.from_version = field_text(change.at("FROM-VERSION"));
  out.from_sha256 = field_text(change.at("FROM-SHA256"));
  out.to_version = field_text(change.at("TO-VERSION"));
  out.to_sha256 = field_text(change.at("TO-SHA256"));
  out.outcome = field_text(change.at("OUTCOME"));
  out.step = field_text(change.at("STEP"));
  out.error = field_text(change.at("ERROR"));
  out.duration_us = change.at("DURATION-US").as_integer();
  out.from_fingerprint = field_text(change.at("FROM-FINGERPRINT"));
  out.to_fingerprint = field_text(change.at("TO-FINGERPRINT"));
  out.details = field_text(change.at("DETAILS"));
  out.state_handover = field_text(change.at("STATE-HANDOVER"));
  out.detail = field_text(change.at("DETAIL"));
  return out;
}

// A count of a SHADOW-STATUS entry.
std::int64_t count_of(const Value& entry, std::string_view key) {
  const Value& n = entry.at(key);
  return n.is_integer() ? n.as_integer() : 0;
}

// The text of `skills shadow status`: one block per candidate.
void shadow_status_text(const Value& shadows, std::ostream& out) {
  for (const Value& entry : entries_of(shadows)) {
    out << field_text(entry.at("NAME")) << ": candidate " << printable(field_text(entry.at("CANDIDATE-VERSION")))
        << " (sha256 " << field_text(entry.at("CANDIDATE-SHA256")).substr(0, 12) << ") beside live "
        << printable(field_text(entry.at("LIVE-VERSION"))) << ", from " << printable(field_text(entry.at("MANIFEST")))
        << ", started by " << printable(field_text(entry.at("REQUESTER"))) << '\n';
    out << "  seen " << count_of(entry, "SEEN") << ", agreements " << count_of(entry, "AGREEMENTS")
        << ", disagreements " << count_of(entry, "DISAGREEMENTS") << " (candidate-blocks "
        << count_of(entry, "CANDIDATE-BLOCKS") << ", candidate-passes " << count_of(entry, "CANDIDATE-PASSES")
        << ", rewrites-differently " << count_of(entry, "REWRITES-DIFFERENTLY") << ", candidate-failed "
        << count_of(entry, "CANDIDATE-FAILED") << ")\n";
    const auto latest = entries_of(entry.at("LATEST"));
    if (latest.empty()) continue;
    out << "  latest disagreements, newest first:\n";
    for (const Value& sample : latest) {
      out << "    " << local_iso8601(count_of(sample, "AT-UNIX-MS")) << ' ' << field_text(sample.at("KIND")) << " ("
          << field_text(sample.at("STAGE")) << ", action " << field_text(sample.at("ACTION-DIGEST")) << "): live "
          << field_text(sample.at("LIVE"));
      const std::string live_reason = field_text(sample.at("LIVE-REASON"));
      if (!live_reason.empty()) out << " (" << printable(live_reason) << ')';
      out << ", candidate " << field_text(sample.at("CANDIDATE"));
      const std::string reason = field_text(sample.at("CANDIDATE-REASON"));
      if (!reason.empty()) out << " (" << printable(reason) << ')';
      out << '\n';
    }
  }
}
// A function, not a constant: a static ErrorHints would build its strings before main.
ErrorHints skill_hints() {
  return {"see the loaded skills with `passepartout skills list`",
          "`passepartout skills history` shows the recorded changes"};
}

// A change command (load, reload, unload, rescan): its text is the daemon's
// message (else `fallback`), then each change.
int run_change(const Target& target, const Output& output, OperatorRequest request, const std::string& fallback) {
  request.lists = {"CHANGES"};
  return run_operator_command(target, output, request, [&](const Value& response, std::ostream& out) {
    out << response_message(response, fallback) << '\n';
    std::vector<SkillChange> list;
    for (const Value& change : entries_of(response.path({"PAYLOAD", "CHANGES"}))) list.push_back(wire_change(change));
    if (list.empty()) {
      out << "No changes.\n";
    } else {
      out << format_history(list);
    }
  });
}

}  // namespace

int run_skills_list(const Target& target, const Output& output) {
  return run_operator_command(target, output, {"SKILLS", {}, skill_hints(), {"SKILLS"}},
                              [&](const Value& response, std::ostream& out) {
                                const Value& skills = response.path({"PAYLOAD", "SKILLS"});
                                const auto count = entries_of(skills).size();
                                if (count == 0) {
                                  out << "No skills loaded in the daemon at " << target.endpoint.describe() << ".\n";
                                  return;
                                }
                                out << count << " skill" << (count == 1 ? "" : "s") << " in the daemon at "
                                    << target.endpoint.describe() << ", in load order:\n"
                                    << skills_table(skills, true);
                              });
}

int run_skills_load(const Target& target, const fs::path& manifest, const Output& output) {
  std::error_code ec;
  fs::path absolute = fs::absolute(manifest, ec);
  if (ec) absolute = manifest;
  const std::string path = absolute.lexically_normal().string();
  if (!is_valid_utf8(path)) return report_failure(output, "the manifest path is not UTF-8", "", kExitUsage);
  return run_change(
      target, output,
      {"LOAD",
       {{"MANIFEST", Value::string(path)}},
       {"check the path; the daemon reads it itself, so it must be readable by the daemon", skill_hints().refused},
       {}},
      "Loaded " + printable(path) + ".");
}

int run_skills_reload(const Target& target, const std::string& name, const Output& output) {
  if (!is_valid_utf8(name)) return report_failure(output, "the skill name is not UTF-8", "", kExitUsage);
  return run_change(target, output, {"RELOAD", {{"NAME", Value::string(name)}}, skill_hints(), {}},
                    "Reloaded '" + printable(name) + "'.");
}

int run_skills_unload(const Target& target, const std::string& name, bool cascade, bool force, const Output& output) {
  if (!is_valid_utf8(name)) return report_failure(output, "the skill name is not UTF-8", "", kExitUsage);
  if (cascade && force) {
    return report_failure(output, "--cascade and --force exclude each other",
                          "--cascade unloads what needs the skill too; --force unloads a guard alone", kExitUsage);
  }
  const ErrorHints hints{skill_hints().not_found,
                         cascade || force ? skill_hints().refused
                                          : "to unload the skills that need it as well, add --cascade (a guard alone: "
                                            "--force, and what it guards refuses to act until it is back); " +
                                                skill_hints().refused};
  return run_change(target, output,
                    {"UNLOAD",
                     {{"NAME", Value::string(name)},
                      {"CASCADE", cascade ? Value::t() : Value()},
                      {"FORCE", force ? Value::t() : Value()}},
                     hints,
                     {}},
                    "Unloaded '" + printable(name) + "'.");
}

int run_skills_history(const Target& target, const HistoryRequest& request, const Output& output) {
  if (!request.state_dir.empty()) return run_local_history(request.state_dir, request, output.json, {});
  {
    // No daemon to ask: its default folder is the best guess, and says so.
    Client probe;
    ClientError error;
    if (!probe.open(target.endpoint, target.connect_timeout, error)) {
      const fs::path state_dir = default_state_dir();
      return run_local_history(state_dir, request, output.json,
                               "no daemon answered at " + target.endpoint.describe() + " (" + error.message +
                                   "); read the changes recorded in " + audit_file(state_dir).string());
    }
  }
  int status = kExitOk;
  const auto limit = static_cast<std::int64_t>(request.limit);
  const auto response = send_operator_request(
      target,
      {"HISTORY",
       {{"LIMIT", Value::integer(limit)}, {"SKILL", request.skill.empty() ? Value() : Value::string(request.skill)}},
       skill_hints(),
       {"CHANGES"}},
      output, status);
  if (!response) return status;
  std::vector<SkillChange> changes;
  for (const Value& change : entries_of(response->path({"PAYLOAD", "CHANGES"}))) {
    changes.push_back(wire_change(change));
  }
  const std::string source = "daemon " + target.endpoint.describe();
  if (output.json) {
    output.out << format_history_json(changes, source);
  } else if (changes.empty()) {
    output.out << (request.skill.empty() ? std::string("No skill changes recorded")
                                         : "No changes of skill '" + printable(request.skill) + "' recorded")
               << " in the daemon at " << target.endpoint.describe() << ".\n";
  } else {
    output.out << format_history(changes);
  }
  return kExitOk;
}

int run_skills_shadow(const Target& target, const fs::path& manifest, const Output& output) {
  std::error_code ec;
  fs::path absolute = fs::absolute(manifest, ec);
  if (ec) absolute = manifest;
  const std::string path = absolute.lexically_normal().string();
  if (!is_valid_utf8(path)) return report_failure(output, "the manifest path is not UTF-8", "", kExitUsage);
  return run_change(target, output,
                    {"SHADOW",
                     {{"MANIFEST", Value::string(path)}},
                     {"check the path; the daemon reads it itself, so it must be readable by the daemon",
                      "a candidate must be a version of a loaded skill that has a gate; " + skill_hints().refused},
                     {}},
                    "Shadowing the candidate of " + printable(path) + ".");
}

int run_skills_shadow_status(const Target& target, const std::string& name, const Output& output) {
  if (!is_valid_utf8(name)) return report_failure(output, "the skill name is not UTF-8", "", kExitUsage);
  return run_operator_command(
      target, output,
      {"SHADOW-STATUS",
       {{"NAME", name.empty() ? Value() : Value::string(name)}},
       {"start a candidate with `passepartout skills shadow MANIFEST`", skill_hints().refused},
       {"SHADOWS"}},
      [&](const Value& response, std::ostream& out) {
        const Value& shadows = response.path({"PAYLOAD", "SHADOWS"});
        if (entries_of(shadows).empty()) {
          out << "No shadow candidates in the daemon at " << target.endpoint.describe() << ".\n";
          return;
        }
        shadow_status_text(shadows, out);
      },
      [](OrderedJson& document, const Value& /*response*/) {
        // A candidate without disagreements has an empty list, not null.
        for (auto& entry : document["shadows"]) {
          if (entry.contains("latest") && entry["latest"].is_null()) entry["latest"] = OrderedJson::array();
        }
      });
}

int run_skills_shadow_stop(const Target& target, const std::string& name, const Output& output) {
  if (!is_valid_utf8(name)) return report_failure(output, "the skill name is not UTF-8", "", kExitUsage);
  return run_change(target, output,
                    {"SHADOW-STOP",
                     {{"NAME", Value::string(name)}},
                     {"see the candidates with `passepartout skills shadow status`", skill_hints().refused},
                     {}},
                    "Stopped shadowing '" + printable(name) + "'.");
}

int run_skills_promote(const Target& target, const std::string& name, const Output& output) {
  if (!is_valid_utf8(name)) return report_failure(output, "the skill name is not UTF-8", "", kExitUsage);
  return run_change(target, output,
                    {"PROMOTE",
                     {{"NAME", Value::string(name)}},
                     {"see the candidates with `passepartout skills shadow status`", skill_hints().refused},
                     {}},
                    "Promoted the candidate of '" + printable(name) + "'.");
}

int run_skills_rescan(const Target& target, const Output& output) {
  return run_change(target, output, {"RESCAN", {}, skill_hints(), {}}, "Rescanned the manifests.");
}

void add_skills_commands(CLI::App& skills, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen) {
  // skills list|load|reload|unload|rescan
  auto* list = skills.add_subcommand(
      "list",
      "List the skills the running daemon has, in load order: version, priority, state (and why a\n"
      "skill is disabled), whether it gates, its verified/blocked/failed counters, its library's sha256.");
  add_connection_options(*list, *parsed, kReplyTimeoutS);
  list->footer(kExitFooter);
  list->callback([parsed, &chosen] { choose(chosen, parsed, kReplyTimeoutS, run_skills_list); });

  auto* load = skills.add_subcommand(
      "load",
      "Load the skill a manifest describes into the running daemon (it swaps in a new version when the\n"
      "skill is loaded already). The old version keeps serving when the change is refused.");
  load->add_option("manifest", parsed->manifest, "The manifest (*.yaml); a relative path is made absolute here")
      ->required()
      ->type_name("MANIFEST");
  add_connection_options(*load, *parsed, kReplyTimeoutS);
  load->footer(kExitFooter);
  load->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      return run_skills_load(target, parsed->manifest, output);
    });
  });

  auto* reload = skills.add_subcommand(
      "reload", "Reload a skill in the running daemon from its manifest and library (a hot swap).");
  reload->add_option("name", parsed->name, "The skill's name")->required()->type_name("NAME");
  add_connection_options(*reload, *parsed, kReplyTimeoutS);
  reload->footer(kExitFooter);
  reload->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      return run_skills_reload(target, parsed->name, output);
    });
  });

  auto* unload = skills.add_subcommand("unload", "Unload a skill from the running daemon.");
  unload->add_option("name", parsed->name, "The skill's name")->required()->type_name("NAME");
  unload->add_flag("--cascade", parsed->cascade, "Also unload the skills that depend on it or are guarded by it");
  unload->add_flag("--force", parsed->force,
                   "Unload a guard although skills it guards stay loaded: their actuators and tools then refuse\n"
                   "to act until a guard is loaded again (audited as force-remove, logged as a warning)");
  add_connection_options(*unload, *parsed, kReplyTimeoutS);
  unload->footer(kExitFooter);
  unload->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      return run_skills_unload(target, parsed->name, parsed->cascade, parsed->force, output);
    });
  });

  auto* rescan = skills.add_subcommand(
      "rescan",
      "Make the running daemon read its manifest folder again: new skills load, changed ones swap,\n"
      "removed ones unload.");
  add_connection_options(*rescan, *parsed, kReplyTimeoutS);
  rescan->footer(kExitFooter);
  rescan->callback([parsed, &chosen] { choose(chosen, parsed, kReplyTimeoutS, run_skills_rescan); });

  auto* shadow = skills.add_subcommand(
      "shadow",
      "Try a new version of a loaded gate on live traffic without applying it: the daemon loads the\n"
      "candidate the manifest describes beside the live version (the same checks as a load), asks it\n"
      "about every action after the live gates have decided, and never obeys it; what it would have\n"
      "done differently is counted and written to the decision log. See `skills shadow status`,\n"
      "`skills shadow stop NAME` and `skills promote NAME`. (A manifest file named like a\n"
      "subcommand is given as ./status or ./stop.)");
  shadow->add_option("manifest", parsed->manifest, "The candidate's manifest (*.yaml); made absolute here")
      ->type_name("MANIFEST");
  add_connection_options(*shadow, *parsed, kReplyTimeoutS);
  shadow->footer(kExitFooter);
  shadow->require_subcommand(0, 1);

  auto* shadow_status = shadow->add_subcommand(
      "status",
      "Show each shadow candidate (or NAME's): verifications seen, agreements, disagreements by kind\n"
      "(candidate-blocks, candidate-passes, rewrites-differently, candidate-failed) and the latest\n"
      "disagreements with both verdicts and reasons.");
  shadow_status->add_option("name", parsed->name, "Only this skill's candidate")->type_name("NAME");
  add_connection_options(*shadow_status, *parsed, kReplyTimeoutS);
  shadow_status->footer(kExitFooter);
  shadow_status->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      return run_skills_shadow_status(target, parsed->name, output);
    });
  });

  auto* shadow_stop = shadow->add_subcommand("stop", "Drop a skill's shadow candidate (audited, with its statistics).");
  shadow_stop->add_option("name", parsed->name, "The skill's name")->required()->type_name("NAME");
  add_connection_options(*shadow_stop, *parsed, kReplyTimeoutS);
  shadow_stop->footer(kExitFooter);
  shadow_stop->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      return run_skills_shadow_stop(target, parsed->name, output);
    });
  });

  shadow->callback([parsed, shadow, &chosen] {
    if (!shadow->get_subcommands().empty()) return;  // status or stop chose already
    if (parsed->manifest.empty()) throw CLI::RequiredError("MANIFEST (or a subcommand: status, stop)");
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      return run_skills_shadow(target, parsed->manifest, output);
    });
  });

  auto* promote = skills.add_subcommand(
      "promote",
      "Swap a skill's shadow candidate in, through the ordinary hot swap (the live version's state is\n"
      "handed over as a reload does); audited as promote, with the shadow statistics.");
  promote->add_option("name", parsed->name, "The skill's name")->required()->type_name("NAME");
  add_connection_options(*promote, *parsed, kReplyTimeoutS);
  promote->footer(kExitFooter);
  promote->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      return run_skills_promote(target, parsed->name, output);
    });
  });

  const fs::path state_dir = default_state_dir();
  auto* history = skills.add_subcommand(
      "history",
      "List the recorded changes to the skills, newest first: when, what (load, swap, add, remove,\n"
      "shadow, shadow-stop, promote),\n"
      "which skill, from which version to which (each with the first 12 hex digits of its library's\n"
      "sha256 and `cfg` with the fingerprint of its settings and config), the outcome, how long it took\n"
      "and who asked; under it what the change changed, the state hand-over, and for a refused or\n"
      "failed change the step that failed and why.\n"
      "Asks the running daemon (its own audit log). When none answers, reads <state dir>/audit.sqlite3\n"
      "read-only and says so on standard error (--json: \"source\"); the state dir is\n"
      "$PASSEPARTOUT_STATE_DIR, else $XDG_STATE_HOME/passepartout, else ~/.local/state/passepartout\n"
      "(here: " +
          state_dir.string() + ").");
  history->add_option("--state-dir", parsed->state_dir, "Read this state folder's audit.sqlite3, not the daemon's")
      ->type_name("DIR");
  history->add_option("--skill", parsed->skill, "Only the changes of this skill")->type_name("NAME");
  history->add_option("--limit", parsed->limit, "At most this many changes (default 100)")
      ->type_name("N")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100000}));
  add_connection_options(*history, *parsed, kReplyTimeoutS);
  history->footer(kExitFooter);
  history->callback([parsed, &chosen] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      HistoryRequest request{parsed->state_dir, parsed->skill, 100};
      if (parsed->limit > 0) request.limit = static_cast<std::size_t>(parsed->limit);
      return run_skills_history(target, request, output);
    });
  });
}

}  // namespace passepartout::cli

// `passepartout skills list|load|reload|unload|rescan`: the skills of the
// running daemon, and the changes to them with what each change did.
#include <ostream>
#include <string>
#include <system_error>
#include <vector>
#include "cli/cli11.hpp"

#include "base/utf8.hpp"
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
  return out;
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
}

}  // namespace passepartout::cli

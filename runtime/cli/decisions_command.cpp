// `passepartout decisions`: the decision log's records, newest first, filtered,
// as one line each or as JSON. Reads the files alone (no daemon needed).
#include "cli/decisions_command.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>
#include "cli/cli11.hpp"

#include "base/state_paths.hpp"
#include "cli/commands.hpp"
#include "cli/decision_files.hpp"
#include "cli/exit_status.hpp"
#include "cli/fleet_log.hpp"
#include "cli/terminal_text.hpp"

namespace passepartout::cli {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kNamedMalformed = 10;  // malformed lines named on stderr; the rest counted

std::string utc_text(std::int64_t unix_s) {
  const auto seconds = static_cast<std::time_t>(unix_s);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[40];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S.000000Z", &utc);
  return text;
}

// Whether `record` is one the query asks for.
bool matches(const DecisionJson& record, const DecisionQuery& query, const std::string& since) {
  const std::string outcome = decision_text(record, "outcome");
  if (!since.empty() && decision_text(record, "time") < since) return false;
  if (!query.verdict.empty() && outcome != query.verdict) return false;
  if (!query.session.empty() && decision_text(record, "session") != query.session) return false;
  if (!query.skill.empty()) {
    auto gates = record.find("gates");
    if (gates == record.end() || !gates->is_array()) return false;
    bool found = false;
    for (const auto& gate : *gates) {
      if (!gate.is_object() || decision_text(gate, "name") != query.skill) continue;
      // With a verdict other than passed, the gate must have given it itself.
      if (query.verdict.empty() || query.verdict == "passed" || decision_text(gate, "verdict") == query.verdict) {
        found = true;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

std::string one_line(const DecisionJson& record) {
  const std::string outcome = decision_text(record, "outcome");
  std::string line = decision_text(record, "time");
  if (record.contains("node")) line += "  " + printable(decision_text(record, "node"));  // the fleet's log
  line += "  " + outcome;
  line.append(outcome.size() < 8 ? 8 - outcome.size() : 0, ' ');
  const std::string stage = decision_text(record, "stage");
  line += "  " + stage;
  line.append(stage.size() < 9 ? 9 - stage.size() : 0, ' ');
  line += "  session " + printable(decision_text(record, "session"));
  if (outcome == "passed") {
    auto gates = record.find("gates");
    const std::size_t n = gates != record.end() && gates->is_array() ? gates->size() : 0;
    std::string action = printable(decision_text(record, "action"));
    if (action.size() > 100) action = action.substr(0, 97) + "...";
    line += "  " + std::to_string(n) + (n == 1 ? " gate: " : " gates: ") + action;
  } else {
    const std::string gate = deciding_gate(record, outcome);
    line += "  " + (gate.empty() ? std::string() : printable(gate) + ": ") + printable(decision_text(record, "reason"));
  }
  return line;
}

}  // namespace

std::optional<std::string> since_time(std::string_view text, std::int64_t now_unix_s) {
  const bool duration = text.size() >= 2 && std::all_of(text.begin(), text.end() - 1, [](char c) {
                          return std::isdigit(static_cast<unsigned char>(c)) != 0;
                        });
  if (duration) {
    std::int64_t n = 0;
    const char* end = text.data() + text.size() - 1;
    auto [ptr, ec] = std::from_chars(text.data(), end, n);
    if (ec != std::errc() || ptr != end) return std::nullopt;
    std::int64_t unit = 0;
    switch (text.back()) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      default:
        return std::nullopt;
    }
    if (n > std::int64_t{100} * 366 * 86400 / unit) return std::nullopt;
    return utc_text(now_unix_s - n * unit);
  }
  // An RFC 3339 UTC time, 2026-11-27T05:00:00Z, a fraction optional: as the
  // log writes times (six decimals), so that the texts compare as the times do.
  if (text.size() < 20 || text.back() != 'Z') return std::nullopt;
  std::tm tm{};
  const std::string stamp(text.substr(0, 19));
  const char* rest = ::strptime(stamp.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr || *rest != '\0') return std::nullopt;
  std::string_view fraction = text.substr(19, text.size() - 20);
  std::string digits;
  if (!fraction.empty()) {
    if (fraction.front() != '.' || fraction.size() < 2 || fraction.size() > 7) return std::nullopt;
    fraction.remove_prefix(1);
    if (!std::all_of(fraction.begin(), fraction.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
      return std::nullopt;
    }
    digits = fraction;
  }
  digits.resize(6, '0');
  return stamp + "." + digits + "Z";
}

namespace {

// The folder's matching records, newest first (at most query.limit).
int folder_decisions(const DecisionQuery& query, const std::string& since, std::vector<DecisionJson>& found,
                     std::ostream& err) {
  std::error_code ec;
  if (!fs::is_directory(query.folder, ec)) {
    err << "passepartout: no decision log at " << query.folder.string()
        << " (the daemon writes one there unless --no-decision-log; give --state-dir for another state folder)\n";
    return kExitProblem;
  }
  std::size_t malformed = 0;
  for (const fs::path& file : decision_files_newest_first(query.folder)) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      err << "passepartout: cannot read " << file.string() << "\n";
      continue;
    }
    std::string line;
    std::size_t number = 0;
    bool any = false;     // the file holds a record
    bool all_old = true;  // every record of the file is before --since
    while (std::getline(in, line)) {
      ++number;
      if (line.empty()) continue;
      std::optional<DecisionJson> record = parse_decision_line(line);
      if (!record) {
        if (malformed++ < kNamedMalformed) {
          err << "passepartout: skipped a malformed line: " << file.string() << ":" << number << "\n";
        }
        continue;
      }
      any = true;
      if (since.empty() || decision_text(*record, "time") >= since) all_old = false;
      if (matches(*record, query, since)) found.push_back(std::move(*record));
    }
    // Older files hold older records: once enough are found, or a whole
    // file was before --since, the rest need not be read.
    if (found.size() >= query.limit || (!since.empty() && any && all_old)) break;
  }
  if (malformed > kNamedMalformed) {
    err << "passepartout: skipped " << malformed << " malformed lines in all\n";
  }
  std::stable_sort(found.begin(), found.end(), [](const DecisionJson& a, const DecisionJson& b) {
    return decision_text(a, "time") > decision_text(b, "time");
  });
  if (found.size() > query.limit) found.resize(query.limit);
  return kExitOk;
}

// The fleet's matching records, newest first, each with its "node"; the
// filters the table has columns for are the database's, --skill is ours.
int fleet_decisions(const DecisionQuery& query, const std::string& since, std::vector<DecisionJson>& found,
                    std::string& where, std::ostream& err) {
  const auto target = resolve_fleet_target(query.config_file, query.state_db);
  if (!target) {
    err << "passepartout decisions: " << target.error().message << '\n';
    return kExitUsage;
  }
  where = target->shown;
  const FleetDecisionFilter filter{query.node, since, query.verdict, query.session};
  std::size_t malformed = 0;
  const auto read = read_fleet_decisions(*target, filter, true,
                                         query.skill.empty() ? query.limit : std::max<std::size_t>(query.limit, 1000),
                                         [&](std::string_view node, std::string_view line) {
                                           std::optional<DecisionJson> record = parse_decision_line(line);
                                           if (!record) {
                                             ++malformed;
                                             return true;
                                           }
                                           if (!matches(*record, query, since)) return true;
                                           DecisionJson tagged{{"node", node}};
                                           for (auto& [key, value] : record->items()) tagged[key] = std::move(value);
                                           found.push_back(std::move(tagged));
                                           return found.size() < query.limit;
                                         });
  if (!read) {
    err << "passepartout decisions: " << read.error().message << '\n';
    return kExitProblem;
  }
  if (malformed > 0) err << "passepartout: skipped " << malformed << " malformed records of the fleet's log\n";
  return kExitOk;
}

}  // namespace

int list_decisions(const DecisionQuery& query, std::ostream& out, std::ostream& err) {
  std::string since;
  if (!query.since.empty()) {
    auto parsed = since_time(
        query.since,
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    if (!parsed) {
      err << "passepartout: --since '" << printable(query.since)
          << "' is neither a duration (30s, 15m, 1h, 2d) nor a UTC time (2026-11-27T05:00:00Z)\n";
      return kExitUsage;
    }
    since = *parsed;
  }

  std::vector<DecisionJson> found;
  std::string where = query.folder.string();
  const int status =
      query.fleet ? fleet_decisions(query, since, found, where, err) : folder_decisions(query, since, found, err);
  if (status != kExitOk) return status;

  if (query.json) {
    DecisionJson document{{"decisions", DecisionJson::array()}};
    for (DecisionJson& record : found) document["decisions"].push_back(std::move(record));
    out << document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return kExitOk;
  }
  if (found.empty()) {
    out << "No decisions match (" << where << ").\n";
    return kExitOk;
  }
  for (const DecisionJson& record : found) out << one_line(record) << '\n';
  return kExitOk;
}

void add_decisions_command(CLI::App& app, Runner& chosen) {
  const fs::path state_dir = default_state_dir();
  auto query = std::make_shared<DecisionQuery>();
  auto state = std::make_shared<fs::path>();
  const std::string help =
      "List recorded gate decisions, newest first: when, the outcome (passed, blocked, failed,\n"
      "approval, expired: an approval nobody decided, --unattended-approvals deny-after), where the\n"
      "verification ran (reason, last-mile, approval), the session, and the\n"
      "deciding gate with its reason (for a pass, the gates and the action). Every verification is\n"
      "recorded by the daemon in <state dir>/decisions/ (docs/decision-log.md), credentials masked.\n"
      "The files are read directly: a daemon need not run. Malformed lines are skipped and named\n"
      "on standard error. With --fleet (or --state-db, --config, --node), every node's decisions are\n"
      "read from the fleet's state database instead, each with its node. State dir here: " +
      state_dir.string();
  auto* cmd = app.add_subcommand("decisions", help);
  cmd->add_option("--since", query->since,
                  "Only decisions since then: a duration back (30s, 15m, 1h, 2d) or a UTC time")
      ->type_name("WHEN");
  cmd->add_option("--skill", query->skill,
                  "Only decisions in which the gate NAME ran; with --verdict blocked, failed or approval, those\n"
                  "in which it gave that verdict itself")
      ->type_name("NAME");
  cmd->add_option("--verdict", query->verdict, "Only decisions with this outcome")
      ->type_name("OUTCOME")
      ->check(CLI::IsMember({"passed", "blocked", "failed", "approval", "expired"}));
  cmd->add_option("--session", query->session, "Only decisions of this session")->type_name("ID");
  cmd->add_option("--limit", query->limit, "At most this many decisions (default 50)")
      ->type_name("N")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1'000'000}));
  cmd->add_flag("--json", query->json, "Print one JSON document: {\"decisions\": [...]}, each a record as written");
  cmd->add_option("--state-dir", *state, "The state folder holding decisions/ (default: " + state_dir.string() + ")")
      ->type_name("DIR");
  cmd->add_flag("--fleet", query->fleet,
                "Read the fleet's log: every node's decisions, shipped to the state database (--state-db,\n"
                "--config, or PASSEPARTOUT_STATE_DB); each shows its node");
  cmd->add_option("--state-db", query->state_db, "The fleet's state database (implies --fleet)")->type_name("URL");
  cmd->add_option("--config", query->config_file, "A daemon's config file, for its state_db: (implies --fleet)")
      ->type_name("FILE");
  cmd->add_option("--node", query->node, "Only decisions of this node (implies --fleet)")->type_name("ID");
  cmd->callback([&chosen, query, state, state_dir] {
    chosen = [query, state, state_dir] {
      query->folder = (state->empty() ? state_dir : *state) / "decisions";
      query->fleet = query->fleet || !query->state_db.empty() || !query->config_file.empty() || !query->node.empty();
      return list_decisions(*query, std::cout, std::cerr);
    };
  });
}

}  // namespace passepartout::cli

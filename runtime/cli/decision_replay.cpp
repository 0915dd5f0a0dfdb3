// DecisionReplay: each recorded action and signal read again (nothing is
// evaluated), verified against the snapshot, and compared with the record.
#include "cli/decision_replay.hpp"

#include <algorithm>
#include <array>
#include <istream>
#include <utility>

#include "cli/terminal_text.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/verifier.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout::cli {

namespace {

constexpr std::string_view kNotRun = "not run";
constexpr std::array<std::string_view, 4> kOutcomes{"passed", "blocked", "failed", "approval"};

bool known_outcome(std::string_view outcome) {
  return std::find(kOutcomes.begin(), kOutcomes.end(), outcome) != kOutcomes.end();
}

std::string place(std::string_view name, std::size_t number) {
  return std::string(name) + ":" + std::to_string(number);
}

ReplaySide recorded_side(const DecisionJson& record) {
  ReplaySide side{decision_text(record, "outcome"), {}, {}};
  if (side.outcome != "passed") {
    side.gate = deciding_gate(record, side.outcome);
    side.reason = decision_text(record, "reason");
  }
  return side;
}

ReplaySide new_side(const Verification& verification) {
  ReplaySide side{decision_outcome(verification.outcome, verification.trace), {}, {}};
  if (side.outcome == "passed") return side;
  for (std::size_t i = verification.trace.size(); i-- > 0;) {
    if (side.outcome == to_string(verification.trace[i].result)) {
      side.gate = std::string(verification.trace[i].name());
      break;
    }
  }
  if (verification.reason.is_string()) side.reason = std::string(verification.reason.text());
  return side;
}

// Each gate's verdict by name, in the order the gates ran.
std::vector<std::pair<std::string, std::string>> recorded_verdicts(const DecisionJson& record) {
  std::vector<std::pair<std::string, std::string>> verdicts;
  auto gates = record.find("gates");
  if (gates == record.end() || !gates->is_array()) return verdicts;
  for (const auto& gate : *gates) {
    if (gate.is_object()) verdicts.emplace_back(decision_text(gate, "name"), decision_text(gate, "verdict"));
  }
  return verdicts;
}

std::vector<std::pair<std::string, std::string>> new_verdicts(const GateTrace& trace) {
  std::vector<std::pair<std::string, std::string>> verdicts;
  verdicts.reserve(trace.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    verdicts.emplace_back(std::string(trace[i].name()), to_string(trace[i].result));
  }
  return verdicts;
}

std::string verdict_of(const std::vector<std::pair<std::string, std::string>>& verdicts, const std::string& name) {
  for (const auto& [gate, verdict] : verdicts) {
    if (gate == name) return verdict;
  }
  return std::string(kNotRun);
}

std::string decided(const ReplaySide& side) {
  if (side.outcome == "passed") return "-";
  std::string text = side.gate.empty() ? std::string() : printable(side.gate) + ": ";
  return text + printable(side.reason);
}

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::string table(const std::vector<std::array<std::string, 6>>& rows) {
  std::array<std::size_t, 6> widths{};
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      line += row[c];
      if (c + 1 < row.size()) line.append(widths[c] - display_width(row[c]), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

DecisionJson side_json(const ReplaySide& side) {
  DecisionJson json{{"outcome", side.outcome}};
  if (side.outcome != "passed") {
    json["gate"] = side.gate;
    json["reason"] = side.reason;
  }
  return json;
}

}  // namespace

void DecisionReplay::replay_stream(std::istream& in, std::string_view name) {
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) replay_line(line, name, ++number);
}

void DecisionReplay::skip(std::string_view name, std::size_t number, std::string why) {
  ++report_.skipped;
  if (report_.skips.size() < ReplayReport::kMaxSkips) report_.skips.push_back({place(name, number), std::move(why)});
}

void DecisionReplay::replay_line(std::string_view line, std::string_view name, std::size_t number) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return;
  ++report_.read;
  const std::optional<DecisionJson> record = parse_decision_line(line);
  if (!record) return skip(name, number, "not a decision record (a JSON object with a \"time\")");
  const ReplaySide then = recorded_side(*record);
  if (!known_outcome(then.outcome)) {
    return skip(name, number, "unknown outcome '" + printable(then.outcome) + "'");
  }
  auto action_text = record->find("action");
  if (action_text == record->end() || !action_text->is_string()) {
    return skip(name, number, "no \"action\" string");
  }
  auto signal_text = record->find("signal");
  if (signal_text == record->end() || !signal_text->is_string()) {
    return skip(name, number, "no \"signal\" string");
  }
  auto action = read_sexp(action_text->get_ref<const std::string&>());
  if (!action) return skip(name, number, "the action does not parse: " + action.error().message);
  auto signal = read_sexp(signal_text->get_ref<const std::string&>());
  if (!signal) return skip(name, number, "the signal does not parse: " + signal.error().message);

  Verification verification;
  Verifier::verify(*snapshot_, *action, *signal, verification);
  ++report_.replayed;
  const auto masked = record->find("masked");
  const bool is_masked = masked != record->end() && masked->is_boolean() && masked->get<bool>();
  if (is_masked) ++report_.masked;
  ReplaySide now = new_side(verification);
  ++report_.now[now.outcome];

  const auto verdicts_then = recorded_verdicts(*record);
  const auto verdicts_now = new_verdicts(verification.trace);
  auto count_gate = [this, &verdicts_then, &verdicts_now](const std::string& gate) {
    const std::string before = verdict_of(verdicts_then, gate);
    const std::string after = verdict_of(verdicts_now, gate);
    if (before != after) ++report_.gate_changes[gate][before + " -> " + after];
  };
  for (const auto& [gate, verdict] : verdicts_then) count_gate(gate);
  for (const auto& [gate, verdict] : verdicts_now) {
    if (verdict_of(verdicts_then, gate) == kNotRun) count_gate(gate);
  }

  if (now.outcome == then.outcome) return;
  ++report_.changed;
  if (is_masked) ++report_.masked_changed;
  if (report_.changes.size() >= ReplayReport::kMaxChanges) return;
  report_.changes.push_back(ReplayChange{place(name, number), decision_text(*record, "id"),
                                         decision_text(*record, "time"), decision_text(*record, "stage"), then,
                                         std::move(now), is_masked});
}

std::string format_replay(const ReplayReport& report) {
  std::string out;
  if (report.changed == 0) {
    out += "No recorded outcome would change.\n";
  } else {
    std::vector<std::array<std::string, 6>> rows;
    rows.push_back({"ID", "TIME", "STAGE", "RECORDED -> NOW", "DECIDED THEN", "DECIDES NOW"});
    for (const ReplayChange& change : report.changes) {
      rows.push_back({printable(change.id.empty() ? change.where : change.id), printable(change.time),
                      printable(change.stage), change.then.outcome + " -> " + change.now.outcome, decided(change.then),
                      decided(change.now)});
    }
    out += "Decisions whose outcome would change:\n\n" + table(rows);
    if (report.changed > report.changes.size()) {
      out +=
          "(the first " + std::to_string(report.changes.size()) + " of " + std::to_string(report.changed) + " shown)\n";
    }
  }

  out += "\nRead " + plural(report.read, "record", "records") + ": " + std::to_string(report.replayed) + " replayed, " +
         std::to_string(report.skipped) + " skipped (malformed or unparsable).\n";
  auto now = [&report](const std::string& outcome) {
    auto it = report.now.find(outcome);
    return std::to_string(it == report.now.end() ? 0 : it->second);
  };
  out += "Now: " + now("passed") + " passed, " + now("blocked") + " blocked, " + now("failed") + " failed, " +
         now("approval") + " approval.\n";
  out += "Changed: " + std::to_string(report.changed) + " of " + plural(report.replayed, "outcome", "outcomes") + ".\n";
  if (!report.gate_changes.empty()) {
    out += "Gate verdicts that changed:\n";
    std::vector<std::array<std::string, 6>> rows;
    for (const auto& [gate, transitions] : report.gate_changes) {
      for (const auto& [transition, count] : transitions) {
        rows.push_back({"  " + printable(gate), transition, std::to_string(count), {}, {}, {}});
      }
    }
    out += table(rows);
  }
  out += "Masked: " + plural(report.masked, "replayed record", "replayed records") +
         " carried masked text (\"masked\": true)";
  if (report.masked == 0) {
    out += ".\n";
  } else {
    out += ", " + std::to_string(report.masked_changed) +
           " of them changed: their gates saw [MASKED] where the credentials were, so their verdicts may differ "
           "from the recorded ones.\n";
  }
  return out;
}

DecisionJson replay_json(const ReplayReport& report) {
  DecisionJson changes = DecisionJson::array();
  for (const ReplayChange& change : report.changes) {
    changes.push_back(DecisionJson{{"id", change.id},
                                   {"time", change.time},
                                   {"stage", change.stage},
                                   {"where", change.where},
                                   {"masked", change.masked},
                                   {"recorded", side_json(change.then)},
                                   {"now", side_json(change.now)}});
  }
  DecisionJson gates = DecisionJson::array();
  for (const auto& [gate, transitions] : report.gate_changes) {
    for (const auto& [transition, count] : transitions) {
      const std::size_t arrow = transition.find(" -> ");
      gates.push_back(DecisionJson{{"gate", gate},
                                   {"from", transition.substr(0, arrow)},
                                   {"to", transition.substr(arrow + 4)},
                                   {"count", count}});
    }
  }
  DecisionJson skips = DecisionJson::array();
  for (const ReplaySkip& skip : report.skips) skips.push_back(DecisionJson{{"where", skip.where}, {"why", skip.why}});
  DecisionJson now = DecisionJson::object();
  for (std::string_view outcome : kOutcomes) {
    auto it = report.now.find(std::string(outcome));
    now[std::string(outcome)] = it == report.now.end() ? 0 : it->second;
  }
  return DecisionJson{{"read", report.read},
                      {"replayed", report.replayed},
                      {"skipped", report.skipped},
                      {"now", now},
                      {"changed", report.changed},
                      {"masked", report.masked},
                      {"masked_changed", report.masked_changed},
                      {"changes", changes},
                      {"gate_changes", gates},
                      {"skipped_lines", skips}};
}

}  // namespace passepartout::cli

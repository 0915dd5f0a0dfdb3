// `passepartout status` and `passepartout stop`: the running daemon's state,
// and asking it to shut down.
#include <ostream>
#include <string>
#include <vector>
#include "cli/cli11.hpp"

#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/operator_request.hpp"

namespace passepartout::cli {

namespace {

void print_status(const Target& target, const Value& response, std::ostream& out) {
  const Value& p = response.at("PAYLOAD");
  const std::string version = display_text(p.at("VERSION"));
  out << "passepartout daemon" << (version.empty() ? "" : " " + version) << " at " << target.endpoint.describe()
      << '\n';
  const std::string health = display_text(p.at("HEALTH"));
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"health", health.empty() ? "unknown" : health});
  rows.push_back({"uptime", p.at("UPTIME-S").is_integer() ? format_uptime(p.at("UPTIME-S").as_integer()) : "-"});
  rows.push_back({"connections", integer_text(p.at("CONNECTIONS"))});
  std::string signals = integer_text(p.at("SIGNALS-PROCESSED"));
  if (p.at("IN-FLIGHT").is_integer()) signals += " (" + std::to_string(p.at("IN-FLIGHT").as_integer()) + " in flight)";
  rows.push_back({"signals processed", signals});
  std::string approvals = integer_text(p.at("PENDING-APPROVALS"));
  if (p.at("PENDING-APPROVALS").as_integer() > 0) approvals += " (see `passepartout approvals list`)";
  rows.push_back({"pending approvals", approvals});
  std::string refused = integer_text(p.at("APPROVALS-REFUSED"));
  if (p.at("APPROVALS-REFUSED").as_integer() > 0) refused += " (past --max-pending-approvals[-per-session])";
  rows.push_back({"approvals refused", refused});
  if (p.at("DECISION-LOG").is_keyword()) {
    std::string decisions = "off";
    const std::string state = display_text(p.at("DECISION-LOG"));
    if (state != "OFF" && state != "off") {
      decisions =
          integer_text(p.at("DECISIONS-WRITTEN")) + " written, " + integer_text(p.at("DECISIONS-DROPPED")) + " dropped";
      if (p.at("DECISIONS-DROPPED").as_integer() > 0) decisions += " (the writer fell behind; see the log's warnings)";
    }
    rows.push_back({"decision log", decisions});
  }
  const std::string metrics = display_text(p.at("METRICS"));
  rows.push_back({"metrics", metrics.empty() ? "off" : metrics});
  out << render_table(rows, {}, "  ");
  const auto providers = entries_of(p.at("PROVIDERS"));
  if (!providers.empty()) {
    out << "\nProviders (in cascade order):\n";
    std::vector<std::vector<std::string>> table;
    for (const Value& e : providers) {
      std::string where = display_text(e.at("MODEL"));
      if (!display_text(e.at("BASE-URL")).empty()) where += " at " + display_text(e.at("BASE-URL"));
      std::string figures;
      if (e.at("CALLS").is_integer()) {
        figures = integer_text(e.at("CALLS")) + " calls";
        const auto failures = e.at("FAILURES").items();
        for (std::size_t i = 0; i + 1 < failures.size(); i += 2) {
          figures += ", " + integer_text(failures[i + 1]) + " " + display_text(failures[i]);
        }
        if (e.at("SUCCESSES").as_integer() > 0) {
          figures += ", p50 " + integer_text(e.at("LATENCY-P50-MS")) + " ms, p99 " +
                     integer_text(e.at("LATENCY-P99-MS")) + " ms, tokens " + integer_text(e.at("TOKENS-IN")) +
                     " in / " + integer_text(e.at("TOKENS-OUT")) + " out";
        }
      }
      table.push_back(
          {display_text(e.at("NAME")), display_text(e.at("KIND")), where, display_text(e.at("STATE")), figures});
    }
    out << render_table(table, {}, "  ");
  }
  const auto skills = entries_of(p.at("SKILLS"));
  out << "\nSkills (" << skills.size() << ", in load order):\n";
  if (skills.empty()) {
    out << "  (none loaded)\n";
  } else {
    out << skills_table(p.at("SKILLS"), false);
  }
  const auto shadows = entries_of(p.at("SHADOWS"));
  if (!shadows.empty()) {
    out << "\nShadow candidates (" << shadows.size() << ", tried, never applied; `skills shadow status`):\n";
    for (const Value& s : shadows) {
      out << "  " << display_text(s.at("NAME")) << " " << display_text(s.at("CANDIDATE-VERSION")) << " beside "
          << display_text(s.at("LIVE-VERSION")) << ": seen " << integer_text(s.at("SEEN")) << ", disagreements "
          << integer_text(s.at("DISAGREEMENTS")) << '\n';
    }
  }
}

}  // namespace

int run_status(const Target& target, const Output& output) {
  return run_operator_command(target, output, {"STATUS", {}, {}, {"SKILLS", "SHADOWS"}},
                              [&](const Value& response, std::ostream& out) { print_status(target, response, out); });
}

int run_stop(const Target& target, const Output& output) {
  return run_operator_command(target, output, {"SHUTDOWN", {}, {}, {}}, [&](const Value& response, std::ostream& out) {
    out << "The daemon at " << target.endpoint.describe() << " is shutting down";
    const std::string message = response_message(response, "");
    if (!message.empty()) out << ": " << message;
    out << '\n';
  });
}

void add_status_commands(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen) {
  // status
  auto* status =
      app.add_subcommand("status",
                         "Show the running daemon: version, uptime, health, connections, signals processed, pending\n"
                         "approvals, and the loaded skills with their versions and gate counters.");
  add_connection_options(*status, *parsed, kReplyTimeoutS);
  status->footer(kExitFooter);
  status->callback([parsed, &chosen] { choose(chosen, parsed, kReplyTimeoutS, run_status); });

  // stop
  auto* stop = app.add_subcommand(
      "stop", "Ask the running daemon to shut down gracefully (as on SIGTERM: it drains its connections and saves).");
  add_connection_options(*stop, *parsed, kReplyTimeoutS);
  stop->footer(kExitFooter);
  stop->callback([parsed, &chosen] { choose(chosen, parsed, kReplyTimeoutS, run_stop); });
}

}  // namespace passepartout::cli

// `passepartout status` and `passepartout stop`: the running daemon's state,
// and asking it to shut down.
#include <fmt/format.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>
#include "cli/cli11.hpp"

#include "cli/client.hpp"
#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"
#include "cli/operator_request.hpp"
#include "daemon/protocol.hpp"
#include "providers/budget.hpp"

namespace passepartout::cli {

namespace {

// A cap's amount in the unit its :UNIT names.
std::string amount_text(const Value& unit, double amount) {
  return budget_amount_text(display_text(unit) == "usd" ? BudgetUnit::usd : BudgetUnit::tokens, amount);
}

double real_of(const Value& v) {
  if (v.is_integer()) return static_cast<double>(v.as_integer());
  return v.is_float() ? v.as_float() : 0.0;
}

// "daily_usd $0.0123 of $5.0000": each cap's spend against its limit.
std::string caps_summary(const Value& budget) {
  std::string summary;
  for (const Value& c : entries_of(budget.at("CAPS"))) {
    if (!summary.empty()) summary += "; ";
    summary += display_text(c.at("NAME")) + " " + amount_text(c.at("UNIT"), real_of(c.at("SPENT"))) + " of " +
               amount_text(c.at("UNIT"), real_of(c.at("LIMIT")));
  }
  return summary;
}

// One row per provider and model: calls, tokens (cached and their share), cost.
std::vector<std::vector<std::string>> usage_table(const Value& rows) {
  std::vector<std::vector<std::string>> table;
  for (const Value& t : entries_of(rows)) {
    const std::int64_t input = t.at("INPUT-TOKENS").as_integer();
    const std::int64_t cached = t.at("CACHED-TOKENS").as_integer();
    std::string tokens = std::to_string(input) + " in";
    if (cached > 0 && input > 0) {
      tokens += fmt::format(" ({} cached, {:.0f} %)", cached,
                            100.0 * static_cast<double>(cached) / static_cast<double>(input));
    }
    tokens += ", " + integer_text(t.at("OUTPUT-TOKENS")) + " out";
    std::string cost =
        t.at("UNPRICED").is_true() ? "unpriced (tokens only)" : fmt::format("${:.4f}", real_of(t.at("USD")));
    if (t.at("ESTIMATED").as_integer() > 0) cost += " (" + integer_text(t.at("ESTIMATED")) + " calls estimated)";
    table.push_back({display_text(t.at("PROVIDER")), display_text(t.at("MODEL")),
                     integer_text(t.at("CALLS")) + " calls", tokens, cost});
  }
  return table;
}

void print_budget(const Value& response, std::ostream& out) {
  const Value& p = response.at("PAYLOAD");
  out << "Usage ledger " << display_text(p.at("LEDGER")) << ": " << integer_text(p.at("IN-FLIGHT"))
      << " calls in flight, " << integer_text(p.at("REFUSED")) << " refused since the daemon started\n";
  const auto caps = entries_of(p.at("CAPS"));
  if (caps.empty()) {
    out << "\nCaps: none (set them under budget: in the config file)\n";
  } else {
    out << "\nCaps:\n";
    std::vector<std::vector<std::string>> table{{"cap", "limit", "spent", "reserved", "resets"}};
    for (const Value& c : caps) {
      const std::string resets = c.at("RESETS").is_string() ? display_text(c.at("RESETS"))
                                                            : "never (per session: the session that spent most)";
      table.push_back({display_text(c.at("NAME")), amount_text(c.at("UNIT"), real_of(c.at("LIMIT"))),
                       amount_text(c.at("UNIT"), real_of(c.at("SPENT"))),
                       amount_text(c.at("UNIT"), real_of(c.at("RESERVED"))), resets});
    }
    out << render_table(table, {}, "  ");
  }
  for (const auto& [key, title] : {std::pair{"TODAY", "Today (UTC)"}, std::pair{"THIS-MONTH", "This month (UTC)"}}) {
    const auto table = usage_table(p.at(key));
    out << '\n' << title << ":\n";
    if (table.empty()) {
      out << "  (no calls)\n";
    } else {
      out << render_table(table, {}, "  ");
    }
  }
}

void print_status(const Target& target, const Value& response, std::ostream& out) {
  const Value& p = response.at("PAYLOAD");
  const std::string version = display_text(p.at("VERSION"));
  out << "passepartout daemon" << (version.empty() ? "" : " " + version) << " at " << target.endpoint.describe()
      << '\n';
  const std::string health = display_text(p.at("HEALTH"));
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"health", health.empty() ? "unknown" : health});
  rows.push_back({"uptime", p.at("UPTIME-S").is_integer() ? format_uptime(p.at("UPTIME-S").as_integer()) : "-"});
  std::string connections = integer_text(p.at("CONNECTIONS"));
  const std::int64_t refused_connections = p.at("CONNECTIONS-REFUSED").as_integer();
  const std::int64_t evicted_connections = p.at("CONNECTIONS-EVICTED").as_integer();
  if (refused_connections > 0 || evicted_connections > 0) {
    connections += " (" + std::to_string(refused_connections) + " refused, " + std::to_string(evicted_connections) +
                   " closed to make room at a limit)";
  }
  rows.push_back({"connections", connections});
  std::string signals = integer_text(p.at("SIGNALS-PROCESSED"));
  if (p.at("IN-FLIGHT").is_integer()) signals += " (" + std::to_string(p.at("IN-FLIGHT").as_integer()) + " in flight)";
  rows.push_back({"signals processed", signals});
  std::string approvals = integer_text(p.at("PENDING-APPROVALS"));
  if (p.at("PENDING-APPROVALS").as_integer() > 0) approvals += " (see `passepartout approvals list`)";
  rows.push_back({"pending approvals", approvals});
  std::string refused = integer_text(p.at("APPROVALS-REFUSED"));
  if (p.at("APPROVALS-REFUSED").as_integer() > 0) refused += " (past --max-pending-approvals[-per-session])";
  rows.push_back({"approvals refused", refused});
  if (const Value& rules = p.at("RULES"); rules.is_list()) {
    rows.push_back({"rules", integer_text(rules.at("DENY")) + " deny, " + integer_text(rules.at("ASK")) + " ask, " +
                                 integer_text(rules.at("ALLOW")) + " standing approvals; hits " +
                                 integer_text(rules.at("DENY-HITS")) + " / " + integer_text(rules.at("ASK-HITS")) +
                                 " / " + integer_text(rules.at("ALLOW-HITS")) + " (`passepartout rules list`)"});
  }
  if (const Value& db = p.at("STATE-DB"); db.is_list()) {
    std::string text = display_text(db.at("TARGET")) + ", node " + display_text(db.at("NODE")) + ": ";
    if (db.at("CONNECTED").is_true()) {
      text += "connected, schema " + integer_text(db.at("SCHEMA"));
    } else {
      text += "unavailable (" +
              (db.at("LAST-ERROR").is_string() ? display_text(db.at("LAST-ERROR")) : std::string("connecting")) +
              "); what needs it is refused";
    }
    rows.push_back({"state database", text});
    if (const Value& shipping = db.at("DECISIONS"); shipping.is_list()) {
      std::string shipped = integer_text(shipping.at("SHIPPED")) + " shipped";
      if (shipping.at("SPOOL-BYTES").as_integer() > 0) {
        shipped += ", " + integer_text(shipping.at("SPOOL-BYTES")) + " bytes in " +
                   integer_text(shipping.at("SPOOL-FILES")) + " files waiting (the oldest " +
                   std::to_string(static_cast<std::int64_t>(shipping.at("LAG-SECONDS").as_float())) + " s old)";
      }
      if (shipping.at("SKIPPED").as_integer() > 0)
        shipped += ", " + integer_text(shipping.at("SKIPPED")) + " malformed lines passed over";
      rows.push_back({"decisions to the fleet", shipped});
    }
  }
  if (const auto sessions = entries_of(p.at("LOCAL-ONLY-SESSIONS")); !sessions.empty()) {
    rows.push_back({"local-only", std::to_string(sessions.size()) + " sessions (private data: local providers only)"});
  }
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
  std::string metrics = display_text(p.at("METRICS"));
  if (metrics.empty()) metrics = "off";
  if (p.at("METRICS-EVICTED").as_integer() > 0) {
    metrics += " (" + std::to_string(p.at("METRICS-EVICTED").as_integer()) + " connections closed to make room)";
  }
  rows.push_back({"metrics", metrics});
  if (const Value& budget = p.at("BUDGET"); budget.is_list()) {
    std::string usage;
    double today = 0;
    std::int64_t calls = 0;
    for (const Value& t : entries_of(budget.at("TODAY"))) {
      today += real_of(t.at("USD"));
      calls += t.at("CALLS").as_integer();
    }
    usage = fmt::format("${:.4f} today over {} calls", today, calls);
    if (const std::string caps = caps_summary(budget); !caps.empty()) usage += "; " + caps;
    rows.push_back({"budget", usage + " (`passepartout budget`)"});
    // The prompt cache's hit rate: the share of each provider's input this month served from its cache.
    std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> providers;
    for (const Value& t : entries_of(budget.at("THIS-MONTH"))) {
      const std::string provider = display_text(t.at("PROVIDER"));
      auto found =
          std::find_if(providers.begin(), providers.end(), [&](const auto& entry) { return entry.first == provider; });
      if (found == providers.end()) found = providers.insert(providers.end(), {provider, {0, 0}});
      found->second.first += t.at("CACHED-TOKENS").as_integer();
      found->second.second += t.at("INPUT-TOKENS").as_integer();
    }
    std::string cache;
    for (const auto& [provider, tokens] : providers) {
      if (tokens.second <= 0) continue;
      if (!cache.empty()) cache += ", ";
      cache +=
          fmt::format("{} {:.0f} % of {} input tokens", provider,
                      100.0 * static_cast<double>(tokens.first) / static_cast<double>(tokens.second), tokens.second);
    }
    if (!cache.empty()) rows.push_back({"prompt cache", cache + " this month"});
  }
  out << render_table(rows, {}, "  ");
  const auto providers = entries_of(p.at("PROVIDERS"));
  if (!providers.empty()) {
    out << "\nProviders (in cascade order):\n";
    std::vector<std::vector<std::string>> table;
    for (const Value& e : providers) {
      std::string where = display_text(e.at("MODEL"));
      if (!display_text(e.at("BASE-URL")).empty()) where += " at " + display_text(e.at("BASE-URL"));
      if (e.at("LOCAL").is_true()) where += " (local)";
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
  const auto local_sessions = entries_of(p.at("LOCAL-ONLY-SESSIONS"));
  if (!local_sessions.empty()) {
    out << "\nLocal-only sessions (" << local_sessions.size() << ", sent to local providers only from now on):\n";
    std::vector<std::vector<std::string>> table;
    table.reserve(local_sessions.size());
    for (const Value& s : local_sessions) {
      table.push_back({display_text(s.at("SESSION")), "since " + display_text(s.at("SINCE")),
                       display_text(s.at("REASON")), "said " + display_text(s.at("BY"))});
    }
    out << render_table(table, {}, "  ");
  }
  const auto rounds = entries_of(p.at("CONSENSUS"));
  if (!rounds.empty()) {
    out << "\nConsensus (rounds per set of voting providers):\n";
    std::vector<std::vector<std::string>> table;
    table.reserve(rounds.size());
    for (const Value& r : rounds) {
      std::string flags;
      for (const Value& f : entries_of(r.at("RED-FLAGS"))) {
        flags += (flags.empty() ? "" : ", ") + display_text(f.at("PROVIDER")) + " " + integer_text(f.at("COUNT"));
      }
      table.push_back({display_text(r.at("PROVIDERS")),
                       integer_text(r.at("AGREED")) + " agreed, " + integer_text(r.at("DISAGREED")) + " disagreed",
                       integer_text(r.at("CALLS")) + " calls (" + integer_text(r.at("CANCELLED")) + " cancelled)",
                       "red flags: " + (flags.empty() ? std::string("none") : flags)});
    }
    out << render_table(table, {}, "  ");
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

// --health: what /healthz says, over the socket: the daemon answers a health
// check (answered by the connection itself, needing no token and no skill).
int run_health(const Target& target, const Output& output) {
  ClientError error;
  Client client;
  const auto deadline = Client::Clock::now() + target.reply_timeout;
  Value frame;
  bool answered = client.open(target.endpoint, target.connect_timeout, error) &&
                  client.send(Value::plist({{"TYPE", Value::keyword("HEALTH-CHECK")}}), deadline, error);
  while (answered && !is_health_response(frame)) {
    answered = client.read(frame, deadline, error);
  }
  if (!answered) {
    if (error.failure == ClientFailure::timeout) {
      error.message = "no answer to a health check from the daemon at " + target.endpoint.describe() + " within " +
                      format_seconds(target.reply_timeout);
    }
    return report_client_error(output, error);
  }
  const std::string health = display_text(frame.at("STATUS"));
  if (output.json) {
    OrderedJson document;
    document["ok"] = true;
    document["daemon"] = target.endpoint.describe();
    document["health"] = health;
    output.out << document.dump(2) << '\n';
  } else {
    output.out << "ok: the daemon at " << target.endpoint.describe() << " serves (health " << health << ")\n";
  }
  return kExitOk;
}

// --ready: what /readyz says: skills loaded and a model provider configured.
int run_ready(const Target& target, const Output& output) {
  int status = kExitOk;
  const auto response = send_operator_request(target, {"STATUS", {}, {}, {}}, output, status);
  if (!response) return status;
  const Value& p = response->at("PAYLOAD");
  const std::string reason = display_text(p.at("NOT-READY"));
  const bool ready = p.at("READY").is_true();
  if (output.json) {
    OrderedJson document;
    document["ok"] = ready;
    document["daemon"] = target.endpoint.describe();
    document["ready"] = ready;
    if (!ready) document["reason"] = reason;
    output.out << document.dump(2) << '\n';
  } else if (ready) {
    output.out << "ready: the daemon at " << target.endpoint.describe() << " has its skills and a model provider\n";
  } else {
    output.err << "passepartout: " << (reason.empty() ? "not ready" : reason) << '\n';
  }
  return ready ? kExitOk : kExitProblem;
}

int run_status(const Target& target, const Output& output) {
  return run_operator_command(target, output, {"STATUS", {}, {}, {"SKILLS", "SHADOWS"}},
                              [&](const Value& response, std::ostream& out) { print_status(target, response, out); });
}

int run_budget(const Target& target, const Output& output) {
  return run_operator_command(
      target, output,
      {"BUDGET", {}, {"this daemon records no usage: its log says why", {}}, {"CAPS", "TODAY", "THIS-MONTH"}},
      [](const Value& response, std::ostream& out) { print_budget(response, out); });
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
  auto probe = std::make_shared<std::string>();
  status->add_flag_callback(
      "--health", [probe] { *probe = "health"; },
      "Only ask whether the daemon serves, as GET /healthz does, without TCP: a health check over the socket\n"
      "(no token needed). Exit 0 when it answers, whatever its health; 1 when it does not. For supervisors.");
  status->add_flag_callback(
      "--ready", [probe] { *probe = "ready"; },
      "Only ask whether the daemon is ready, as GET /readyz does: skills loaded and a model provider\n"
      "configured. Exit 0 when ready; 1 with the reason when not.");
  status->footer(kExitFooter);
  status->callback([parsed, probe, &chosen] {
    if (*probe == "health") return choose(chosen, parsed, kReplyTimeoutS, run_health);
    if (*probe == "ready") return choose(chosen, parsed, kReplyTimeoutS, run_ready);
    choose(chosen, parsed, kReplyTimeoutS, run_status);
  });

  // budget
  auto* budget = app.add_subcommand(
      "budget",
      "Show what the model calls cost: each budget cap with its limit, what was spent and is reserved in\n"
      "its current window, and when it resets; and today's and this month's calls, tokens (cached ones\n"
      "and their share) and cost by provider and model, from the usage ledger in the state folder.");
  add_connection_options(*budget, *parsed, kReplyTimeoutS);
  budget->footer(kExitFooter);
  budget->callback([parsed, &chosen] { choose(chosen, parsed, kReplyTimeoutS, run_budget); });

  // stop
  auto* stop = app.add_subcommand(
      "stop", "Ask the running daemon to shut down gracefully (as on SIGTERM: it drains its connections and saves).");
  add_connection_options(*stop, *parsed, kReplyTimeoutS);
  stop->footer(kExitFooter);
  stop->callback([parsed, &chosen] { choose(chosen, parsed, kReplyTimeoutS, run_stop); });
}

}  // namespace passepartout::cli

// The daemon's metrics: each family read from where its figures already
// live (gate counters, the pipeline's and the skill host's sharded counts,
// provider health, the server's counters, the approval store, /proc).
#include "daemon/metrics.hpp"
#include "daemon/decision_shipper.hpp"
#include "daemon/state_db.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "daemon/mcp_hub.hpp"

#include "base/prometheus_text.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/gate_log.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/rule_book.hpp"
#include "providers/budget.hpp"
#include "providers/cascade.hpp"
#include "skills/gate_counters.hpp"
#include "skills/skill_host.hpp"
#include "skills/slot.hpp"

namespace passepartout {
namespace {

using Type = PrometheusText::Type;

std::string read_whole(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Seconds since the epoch the machine booted at (/proc/stat's btime); -1 when unknown.
double boot_time_seconds() {
  const std::string stat = read_whole("/proc/stat");
  const std::size_t at = stat.find("\nbtime ");
  if (at == std::string::npos) return -1;
  return std::strtod(stat.c_str() + at + 7, nullptr);
}

std::uint64_t u64(std::int64_t n) { return n > 0 ? static_cast<std::uint64_t>(n) : 0; }

// "rate_limited" stays as it is: label values are the enum's names.
const char* failure_label(FailureClass failure) { return to_string(failure); }

}  // namespace

ProcessStats read_process_stats() {
  ProcessStats stats;
  const std::string stat = read_whole("/proc/self/stat");
  // The command (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
  const std::size_t close = stat.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f;
    for (std::string field; fields >> field;) f.push_back(field);
    // f[0] is field 3 (state): field n is f[n - 3].
    if (f.size() > 21) {
      const auto ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
      const auto page = static_cast<double>(::sysconf(_SC_PAGESIZE));
      stats.cpu_seconds = (std::stod(f[14 - 3]) + std::stod(f[15 - 3])) / ticks;
      stats.virtual_bytes = std::stod(f[23 - 3]);
      stats.resident_bytes = std::stod(f[24 - 3]) * page;
      const double boot = boot_time_seconds();
      if (boot >= 0) stats.start_time_seconds = boot + std::stod(f[22 - 3]) / ticks;
    }
  }
  if (DIR* fds = ::opendir("/proc/self/fd")) {
    double count = 0;
    while (const dirent* entry = ::readdir(fds)) {
      if (entry->d_name[0] != '.') ++count;
    }
    ::closedir(fds);
    stats.open_fds = count - 1;  // the one opendir holds
  }
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    stats.max_fds = limit.rlim_cur == RLIM_INFINITY ? -1 : static_cast<double>(limit.rlim_cur);
  }
  return stats;
}

void DaemonMetrics::set_decisions_dropped(std::function<std::uint64_t()> read) {
  std::lock_guard lock(source_mutex_);
  decisions_dropped_ = std::move(read);
}

std::string DaemonMetrics::scrape() const {
  PrometheusText out;
  constexpr std::string_view kPrefix = "passepartout_";
  auto name = [&](std::string_view suffix) { return std::string(kPrefix) + std::string(suffix); };

  {
    const std::string n = name("build_info");
    out.family(n, Type::gauge, "Always 1; the version label says which passepartout serves.");
    out.sample(n, {{"version", sources_.version}}, std::uint64_t{1});
  }

  // Signals.
  if (sources_.pipeline != nullptr) {
    const std::string n = name("signals_total");
    out.family(n, Type::counter,
               "Signals injected whose loop has ended, by the sensor of the injected signal (unknown sensors: "
               "other; none: no sensor) and how the loop ended (done, depth, interrupt, error, skip, abort, "
               "cancelled).");
    for (const Pipeline::SignalTally& t : sources_.pipeline->signals_finished()) {
      out.sample(n, {{"sensor", t.sensor}, {"outcome", t.outcome}}, t.count);
    }
    const std::string in_flight = name("signals_in_flight");
    out.family(in_flight, Type::gauge, "Signals being processed or queued behind their session.");
    out.sample(in_flight, {}, static_cast<std::uint64_t>(sources_.pipeline->in_flight()));
  }

  // Skills and gates.
  if (sources_.skills != nullptr) {
    const auto snapshot = sources_.skills->snapshot();
    const std::string loaded = name("skills_loaded");
    out.family(loaded, Type::gauge, "Skills loaded (in the published registry snapshot).");
    out.sample(loaded, {}, static_cast<std::uint64_t>(snapshot->slots().size()));

    std::vector<std::pair<const Slot*, GateCounts>> gates;
    for (const auto& slot : snapshot->slots()) {
      if (slot->has_gate()) gates.emplace_back(slot.get(), slot->counters().read());
    }
    const std::string verdicts = name("gate_verdicts_total");
    out.family(verdicts, Type::counter,
               "Gate decisions by skill, version and verdict (pass, rewrite, block, approval, failure: the gate "
               "erred, threw or ran out of time). Counted per loaded version: a swap starts a new series.");
    for (const auto& [slot, c] : gates) {
      const std::array<std::pair<std::string_view, std::uint64_t>, 5> by_verdict{{{"pass", c.passes},
                                                                                  {"rewrite", c.rewrites},
                                                                                  {"block", c.blocks},
                                                                                  {"approval", c.approvals},
                                                                                  {"failure", c.failures}}};
      for (const auto& [verdict, count] : by_verdict) {
        out.sample(verdicts, {{"skill", slot->name()}, {"version", slot->version_text()}, {"verdict", verdict}}, count);
      }
    }
    const std::string latency = name("gate_latency_seconds");
    out.family(latency, Type::summary,
               "Time a gate took, over a sample of its calls (the gate counters time a sample, not every call): "
               "_sum / _count is the mean; no quantiles.");
    for (const auto& [slot, c] : gates) {
      const std::array labels{MetricLabel{"skill", slot->name()}, MetricLabel{"version", slot->version_text()}};
      out.sample(latency + "_sum", labels, static_cast<double>(c.timed_ns) / 1e9);
      out.sample(latency + "_count", labels, c.timed_calls);
    }

    const std::string changes = name("skill_changes_total");
    out.family(changes, Type::counter,
               "Changes to the loaded skills (hot swaps and the rest) by kind (load, swap, add, remove, "
               "force-remove, shadow, shadow-stop, promote, quarantine) and outcome (ok, refused, failed).");
    const auto kinds = SkillHost::change_kinds();
    const auto outcomes = SkillHost::change_outcomes();
    for (std::size_t k = 0; k < kinds.size(); ++k) {
      for (std::size_t o = 0; o < outcomes.size(); ++o) {
        if (kinds[k] == "other" || outcomes[o] == "other") {
          if (sources_.skills->change_count(k, o) == 0) continue;  // shown only when something odd was counted
        }
        out.sample(changes, {{"kind", kinds[k]}, {"outcome", outcomes[o]}}, sources_.skills->change_count(k, o));
      }
    }

    // Shadow candidates: per skill, totals of every candidate it had (a
    // stopped one's counts stay), so the series only grow.
    const auto shadow = sources_.skills->shadow_counts();
    const std::string shadowed = name("shadow_verifications_total");
    out.family(shadowed, Type::counter,
               "Verifications a shadow candidate was asked about (its live gate was reached), by skill.");
    for (const auto& [skill, counts] : shadow) out.sample(shadowed, {{"skill", skill}}, counts.seen);
    const std::string disagreements = name("shadow_disagreements_total");
    out.family(disagreements, Type::counter,
               "Shadow candidates' disagreements with the live gate, by skill and kind (candidate-blocks, "
               "candidate-passes, rewrites-differently, candidate-failed).");
    for (const auto& [skill, counts] : shadow) {
      for (std::size_t k = 1; k < kShadowKinds; ++k) {
        out.sample(disagreements, {{"skill", skill}, {"kind", to_string(static_cast<ShadowKind>(k))}},
                   counts.by_kind[k]);
      }
    }
  }

  {
    const std::string n = name("verifications_total");
    out.family(n, Type::counter,
               "Verifications of an action by all gates, by stage (reason: the model's proposal; last-mile: "
               "before the actuator; approval: an approved action's run) and outcome.");
    for (const VerificationTally& t : verifications_counted()) {
      if (t.stage == "other" && t.count == 0) continue;  // shown only when an unnamed stage was counted
      out.sample(n, {{"stage", t.stage}, {"outcome", t.outcome}}, t.count);
    }
  }

  // The state database a fleet shares (only with --state-db).
  if (sources_.state_db != nullptr) {
    const StateDb::Figures db = sources_.state_db->figures();
    const std::string up = name("state_db_up");
    out.family(up, Type::gauge, "1 while the state database is connected, else 0; the node label is this daemon's.");
    out.sample(up, {{"node", db.node}}, static_cast<std::uint64_t>(db.connected ? 1 : 0));
    const std::string schema = name("state_db_schema_version");
    out.family(schema, Type::gauge, "The state database's schema version as last read (0: not read yet).");
    out.sample(schema, {}, static_cast<std::uint64_t>(db.schema));
    const std::string connections = name("state_db_connections_total");
    out.family(connections, Type::counter, "Connections made to the state database (the first and each reconnection).");
    out.sample(connections, {}, db.connections);
    const std::string unavailable = name("state_db_unavailable_total");
    out.family(unavailable, Type::counter,
               "Requests to the state database that failed because it was unavailable (they failed closed).");
    out.sample(unavailable, {}, db.failed);
  }
  // The decision log's shipping to the state database (only with --state-db).
  if (sources_.shipper != nullptr) {
    const DecisionShipper::Figures f = sources_.shipper->figures();
    const std::string shipped = name("decisions_shipped_total");
    out.family(shipped, Type::counter, "Decisions this daemon shipped to the state database since it started.");
    out.sample(shipped, {}, f.shipped);
    const std::string spool = name("decisions_spool_bytes");
    out.family(spool, Type::gauge, "Bytes of the decision log not shipped to the state database yet.");
    out.sample(spool, {}, f.spool_bytes);
    const std::string lag = name("decisions_ship_lag_seconds");
    out.family(lag, Type::gauge, "How old the oldest decision not shipped yet is (0: every one is shipped).");
    out.sample(lag, {}, f.lag_seconds);
    const std::string failures = name("decisions_ship_failures_total");
    out.family(failures, Type::counter,
               "Shipping attempts that failed (the database away, a batch refused); each is tried again.");
    out.sample(failures, {}, f.failures);
  }

  // Consensus rounds, per set of voting providers (only once one ran).
  if (sources_.pipeline != nullptr) {
    const auto sets = sources_.pipeline->consensus_stats().figures();
    if (!sets.empty()) {
      const std::string rounds = name("consensus_rounds_total");
      out.family(rounds, Type::counter,
                 "Consensus rounds on a proposal, by the providers that vote and outcome (agreed, disagreed).");
      for (const auto& [set, f] : sets) {
        out.sample(rounds, {{"providers", set}, {"outcome", "agreed"}}, f.agreed);
        out.sample(rounds, {{"providers", set}, {"outcome", "disagreed"}}, f.disagreed);
      }
      const std::string calls = name("consensus_calls_total");
      out.family(calls, Type::counter,
                 "Model calls made by consensus rounds, by the providers that vote and outcome (made; cancelled "
                 "once the round was decided).");
      for (const auto& [set, f] : sets) {
        out.sample(calls, {{"providers", set}, {"outcome", "made"}}, f.calls);
        out.sample(calls, {{"providers", set}, {"outcome", "cancelled"}}, f.cancelled);
      }
      const std::string flags = name("consensus_red_flags_total");
      out.family(flags, Type::counter,
                 "Answers discarded before they voted (malformed, or arguments that do not match the schema), by "
                 "the providers that vote and the provider that answered.");
      for (const auto& [set, f] : sets) {
        for (const auto& [provider, count] : f.red_flags) {
          out.sample(flags, {{"providers", set}, {"provider", provider}}, count);
        }
      }
    }
  }

  // Approvals.
  if (sources_.approvals != nullptr) {
    const std::string pending = name("approvals_pending");
    out.family(pending, Type::gauge, "Actions waiting for a human's approval.");
    out.sample(pending, {}, static_cast<std::uint64_t>(sources_.approvals->pending_count()));
    const std::string decided = name("approvals_decided_total");
    out.family(decided, Type::counter, "Approvals decided since the daemon started, by decision.");
    out.sample(decided, {{"decision", "approved"}}, sources_.approvals->approved_count());
    out.sample(decided, {{"decision", "denied"}}, sources_.approvals->denied_count());
    const std::string refused = name("approvals_refused_total");
    out.family(refused, Type::counter, "Approval requests refused for a pending-approvals bound.");
    out.sample(refused, {}, sources_.approvals->refused_count());
  }

  // The operator's rules and standing approvals.
  if (sources_.rules != nullptr) {
    const RuleBook::Counts counts = sources_.rules->counts();
    const std::string rules = name("rules");
    out.family(rules, Type::gauge, "The operator's rules in force, by decision (allow: standing approvals).");
    out.sample(rules, {{"decision", "deny"}}, counts.deny);
    out.sample(rules, {{"decision", "ask"}}, counts.ask);
    out.sample(rules, {{"decision", "allow"}}, counts.allow);
    const std::string hits = name("rule_hits_total");
    out.family(hits, Type::counter, "Actions a rule decided since the daemon started, by the rule's decision.");
    out.sample(hits, {{"decision", "deny"}}, counts.deny_hits);
    out.sample(hits, {{"decision", "ask"}}, counts.ask_hits);
    out.sample(hits, {{"decision", "allow"}}, counts.allow_hits);
  }

  // MCP servers.
  if (sources_.mcp != nullptr) {
    const std::vector<McpServerStatus> servers = sources_.mcp->status();
    const std::string up = name("mcp_server_ready");
    out.family(up, Type::gauge, "1 when the MCP server is ready (its tools offered), else 0.");
    for (const McpServerStatus& server : servers) {
      out.sample(up, {{"server", server.name}, {"state", server.state}},
                 server.state == "ready" ? std::uint64_t{1} : std::uint64_t{0});
    }
    const std::string calls = name("mcp_calls_total");
    out.family(calls, Type::counter, "Tool calls made to the MCP server since the daemon started.");
    for (const McpServerStatus& server : servers) out.sample(calls, {{"server", server.name}}, server.calls);
    const std::string failures = name("mcp_call_failures_total");
    out.family(failures, Type::counter,
               "MCP tool calls that failed (no answer, the server gone, an error, or the tool's isError).");
    for (const McpServerStatus& server : servers) out.sample(failures, {{"server", server.name}}, server.failures);
    const std::string starts = name("mcp_server_starts_total");
    out.family(starts, Type::counter, "Times the MCP server was started (the first start and each restart).");
    for (const McpServerStatus& server : servers) out.sample(starts, {{"server", server.name}}, server.starts);
    const std::string changes = name("mcp_definition_changes_total");
    out.family(changes, Type::counter,
               "MCP tool definitions found changed since they were pinned (refused until trusted).");
    for (const McpServerStatus& server : servers) {
      out.sample(changes, {{"server", server.name}}, server.definition_changes);
    }
  }

  // Connections.
  if (sources_.connections) {
    const ServerCounters c = sources_.connections();
    const std::string open = name("connections_open");
    out.family(open, Type::gauge, "Open protocol connections, by transport.");
    out.sample(open, {{"transport", "tcp"}}, c.connections_open_tcp);
    out.sample(open, {{"transport", "unix"}}, c.connections_open_unix);
    const std::string accepted = name("connections_accepted_total");
    out.family(accepted, Type::counter, "Protocol connections admitted since start (both transports).");
    out.sample(accepted, {}, c.connections_total);
    const std::string rejected = name("connections_rejected_total");
    out.family(rejected, Type::counter, "Protocol connections refused at a connection limit or while stopping.");
    out.sample(rejected, {}, c.connections_rejected);
    const std::string evicted = name("connections_evicted_total");
    out.family(evicted, Type::counter,
               "Protocol connections closed to make room for a newer one at a TCP limit (the one that had done "
               "least for longest, never an authenticated one).");
    out.sample(evicted, {}, c.connections_evicted);
  }
  if (sources_.metrics_endpoint) {
    const MetricsListenerCounters m = sources_.metrics_endpoint();
    const std::string accepted = name("metrics_connections_accepted_total");
    out.family(accepted, Type::counter, "Connections to this endpoint since start.");
    out.sample(accepted, {}, m.accepted);
    const std::string evicted = name("metrics_connections_evicted_total");
    out.family(evicted, Type::counter,
               "Connections to this endpoint closed to make room for a newer one (none is ever refused).");
    out.sample(evicted, {}, m.evicted);
  }

  // Providers.
  if (sources_.cascade != nullptr) {
    const auto lineup = sources_.cascade->lineup();
    const std::string calls = name("provider_calls_total");
    const std::string duration = name("provider_call_duration_seconds");
    const std::string tokens = name("provider_tokens_total");
    out.family(calls, Type::counter,
               "Model calls (attempts; a retry is one) by provider and outcome: success, or the failure's class.");
    std::vector<ProviderFigures> figures;
    figures.reserve(lineup->health.size());
    for (std::size_t i = 0; i < lineup->health.size(); ++i) {
      figures.push_back(lineup->health[i]->figures());
      const std::string& provider = lineup->names[i];
      out.sample(calls, {{"provider", provider}, {"outcome", "success"}}, figures.back().successes);
      for (const auto& [failure, count] : figures.back().failures) {
        out.sample(calls, {{"provider", provider}, {"outcome", failure_label(failure)}}, count);
      }
    }
    out.family(duration, Type::histogram, "Model call latency by provider (answered and failed attempts).");
    for (std::size_t i = 0; i < lineup->health.size(); ++i) {
      const auto h = lineup->health[i]->latency_histogram();
      const std::array labels{MetricLabel{"provider", lineup->names[i]}};
      out.histogram(duration, labels, ProviderHealth::kLatencyBounds, h.counts, h.sum_seconds);
    }
    out.family(tokens, Type::counter, "Tokens the providers reported, by provider and direction (input, output).");
    for (std::size_t i = 0; i < figures.size(); ++i) {
      out.sample(tokens, {{"provider", lineup->names[i]}, {"direction", "input"}}, u64(figures[i].tokens_in));
      out.sample(tokens, {{"provider", lineup->names[i]}, {"direction", "output"}}, u64(figures[i].tokens_out));
    }
  }

  // The budget: each cap's limit, spend and reservations in its current
  // window, and what the ledger counted by provider and model.
  if (sources_.budget != nullptr) {
    const BudgetReport report = sources_.budget->report(-1, false);
    const std::string limit = name("budget_limit");
    const std::string spent = name("budget_spent");
    const std::string reserved = name("budget_reserved");
    out.family(limit, Type::gauge, "Each budget cap's limit, in its unit (usd or tokens).");
    for (const CapStatus& c : report.caps)
      out.sample(limit, {{"cap", c.cap.name}, {"unit", to_string(c.cap.unit)}}, c.cap.limit);
    out.family(spent, Type::gauge,
               "What calls spent against each cap in its current window (a session cap: the session with most).");
    for (const CapStatus& c : report.caps)
      out.sample(spent, {{"cap", c.cap.name}, {"unit", to_string(c.cap.unit)}}, c.spent);
    out.family(reserved, Type::gauge, "The worst case of the calls in flight, held against each cap.");
    for (const CapStatus& c : report.caps) {
      out.sample(reserved, {{"cap", c.cap.name}, {"unit", to_string(c.cap.unit)}}, c.reserved);
    }
    const std::string refused = name("budget_refusals_total");
    out.family(refused, Type::counter, "Calls the budget refused before they went out, since the daemon started.");
    out.sample(refused, {}, report.refusals);
    const std::string usage = name("usage_tokens_total");
    const std::string cost = name("usage_cost_usd_total");
    out.family(usage, Type::counter,
               "Tokens of the calls the usage ledger counted, by provider, model and kind (input, cached_input, "
               "output; cached input is part of input).");
    for (const UsageTotals& t : report.all_time) {
      out.sample(usage, {{"provider", t.provider}, {"model", t.model}, {"kind", "input"}}, u64(t.input_tokens));
      out.sample(usage, {{"provider", t.provider}, {"model", t.model}, {"kind", "cached_input"}}, u64(t.cached_tokens));
      out.sample(usage, {{"provider", t.provider}, {"model", t.model}, {"kind", "output"}}, u64(t.output_tokens));
    }
    out.family(cost, Type::counter, "What those calls cost at the price table's prices, in US dollars.");
    for (const UsageTotals& t : report.all_time)
      out.sample(cost, {{"provider", t.provider}, {"model", t.model}}, t.usd);
  }

  {
    std::uint64_t dropped = 0;
    {
      std::lock_guard lock(source_mutex_);
      if (decisions_dropped_) dropped = decisions_dropped_();
    }
    const std::string n = name("decisions_dropped_total");
    out.family(n, Type::counter, "Gate decisions the decision log could not keep (0 without a decision log).");
    out.sample(n, {}, dropped);
  }

  // The standard process metrics, as the Prometheus client libraries name them.
  const ProcessStats p = read_process_stats();
  auto process = [&out](std::string_view n, Type type, std::string_view help, double value) {
    if (value < 0) return;
    out.family(n, type, help);
    out.sample(n, {}, value);
  };
  process("process_cpu_seconds_total", Type::counter, "Total user and system CPU time spent in seconds.",
          p.cpu_seconds);
  process("process_resident_memory_bytes", Type::gauge, "Resident memory size in bytes.", p.resident_bytes);
  process("process_virtual_memory_bytes", Type::gauge, "Virtual memory size in bytes.", p.virtual_bytes);
  process("process_open_fds", Type::gauge, "Number of open file descriptors.", p.open_fds);
  process("process_max_fds", Type::gauge, "Maximum number of open file descriptors.", p.max_fds);
  process("process_start_time_seconds", Type::gauge, "Start time of the process since unix epoch in seconds.",
          p.start_time_seconds);
  return out.take();
}

}  // namespace passepartout

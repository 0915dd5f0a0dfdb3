// The operator commands: each reads its arguments, acts through the skill
// host, the pipeline or the approval store, and builds the response plist.
#include "daemon/operator_handler.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <limits>
#include <optional>
#include <system_error>

#include <passepartout/name_pattern.hpp>

#include "base/ascii.hpp"
#include "base/executor.hpp"
#include "base/log.hpp"
#include "daemon/mcp_hub.hpp"
#include "daemon/operator_args.hpp"
#include "daemon/rules_requests.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/model_routing.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/rule_book.hpp"
#include "skills/skill_host.hpp"
#include "skills/skill_manifest.hpp"

namespace passepartout {

using namespace operator_args;

namespace {

constexpr std::string_view kComponent = "operator";

// A folder as a client in another working directory can use it.
std::string absolute_text(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return (ec ? path : absolute).lexically_normal().string();
}

// "skill 'x': reload refused at step 'create': why" and what it left as it was.
// The manifest a request's :MANIFEST names, read; nullopt with `error` set
// (:NOT-FOUND for a missing file, :BAD-REQUEST otherwise) when it cannot be.
std::optional<SkillManifest> manifest_argument(const Value& request, Value& error) {
  const Value* path = string_argument(request, "MANIFEST", error);
  if (path == nullptr) return std::nullopt;
  auto manifest = SkillManifest::load(std::string(path->text()));
  if (!manifest) {
    error = make_error_response(
        manifest.error().code == ErrorCode::not_found ? wire_error::kNotFound : wire_error::kBadRequest,
        manifest.error().message);
    return std::nullopt;
  }
  return std::move(*manifest);
}

std::string describe_failure(const SkillChange& change,
                             std::string_view consequence = "the previous version keeps serving; see the audit log") {
  std::string text = "skill '" + change.skill + "': " + change.action + " " + change.outcome;
  if (!change.step.empty()) text += " at step '" + change.step + "'";
  if (!change.error.empty()) text += ": " + change.error;
  return text + " (" + std::string(consequence) + ")";
}

// The response to a list of changes: :OK with :CHANGES, or :REFUSED naming the
// first that did not succeed (the list is still attached).
Value changes_response(const std::vector<const SkillChange*>& changes, std::string_view ok_message) {
  std::vector<Value> items;
  const SkillChange* failed = nullptr;
  for (const SkillChange* change : changes) {
    items.push_back(change_value(*change));
    if (failed == nullptr && change->outcome != "ok") failed = change;
  }
  const Value list = Value::list(items);
  if (failed != nullptr) {
    Value response = make_error_response(wire_error::kRefused, describe_failure(*failed));
    return response.with("PAYLOAD", response.at("PAYLOAD").with("CHANGES", list));
  }
  return make_ok_response(ok_message, Value::plist({{"CHANGES", list}}));
}

// An approval as :APPROVALS and :APPROVAL list it; the node that asked in a
// fleet, the decision and the run only once there is one.
Value approval_value(const Approval& approval) {
  std::vector<Value> gates;
  for (const auto& gate : approval.gates) gates.push_back(str(gate));
  Value value = Value::plist({{"TOKEN", str(approval.token)},
                              {"STATE", Value::keyword(ascii_upper(to_string(approval.state)))},
                              {"SESSION-ID", str(approval.session_id)},
                              {"ACTION", approval.action},
                              {"REASON", str(approval.reason)},
                              {"GATES", Value::list(gates)},
                              {"CREATED-UNIX-MS", num(approval.created_unix_ms)},
                              {"EXPIRES-UNIX-MS", num(approval.expires_unix_ms)}});
  if (!approval.node.empty()) value = std::move(value).with("NODE", str(approval.node));  // which node of a fleet asked
  if (approval.decided_unix_ms != 0) {
    value = std::move(value)
                .with("DECIDED-BY", str(approval.decided_by))
                .with("DECIDED-UNIX-MS", num(approval.decided_unix_ms));
  }
  if (approval.run != Approval::Run::none) {
    value = std::move(value).with("RUN", Value::keyword(ascii_upper(to_string(approval.run))));
    if (!approval.run_error.empty()) value = std::move(value).with("RUN-ERROR", str(approval.run_error));
  }
  return value;
}

}  // namespace

// --- SkillProblems ---------------------------------------------------------------

void SkillProblems::record(const BootResult& boot) {
  std::lock_guard lock(problems_mutex_);
  disabled_.clear();
  manifest_errors_.clear();
  for (const auto& d : boot.disabled) {
    Entry entry{d.reason, {}, 0};
    for (const auto& m : boot.manifests) {
      if (m.name == d.name) {
        entry.version = m.version.to_string();
        entry.priority = m.priority;
      }
    }
    disabled_[d.name] = std::move(entry);
  }
  for (const auto& e : boot.manifest_errors) manifest_errors_.push_back(e.message);
}

void SkillProblems::record(const ChangeResult& result) {
  const SkillChange& change = result.change;
  std::lock_guard lock(problems_mutex_);
  if (change.outcome == "ok") {
    disabled_.erase(change.skill);
  } else if (change.action == "add" || change.action == "load") {
    disabled_[change.skill] =
        Entry{change.step.empty() ? change.error : change.step + ": " + change.error, change.to_version, 0};
  }
}

void SkillProblems::record(const RescanResult& rescan) {
  for (const auto& change : rescan.changes) record(change);
  std::lock_guard lock(problems_mutex_);
  manifest_errors_.clear();
  for (const auto& e : rescan.manifest_errors) manifest_errors_.push_back(e.message);
}

std::map<std::string, SkillProblems::Entry> SkillProblems::disabled() const {
  std::lock_guard lock(problems_mutex_);
  return disabled_;
}

std::vector<std::string> SkillProblems::manifest_errors() const {
  std::lock_guard lock(problems_mutex_);
  return manifest_errors_;
}

bool SkillProblems::empty() const {
  std::lock_guard lock(problems_mutex_);
  return disabled_.empty() && manifest_errors_.empty();
}

// --- OperatorHandler -----------------------------------------------------------

Value change_value(const SkillChange& change) {
  return Value::plist({{"KIND", str(change.action)},
                       {"SKILL", str(change.skill)},
                       {"FROM-VERSION", str(change.from_version)},
                       {"FROM-SHA256", str(change.from_sha256)},
                       {"TO-VERSION", str(change.to_version)},
                       {"TO-SHA256", str(change.to_sha256)},
                       {"OUTCOME", str(change.outcome)},
                       {"STEP", str(change.step)},
                       {"ERROR", str(change.error)},
                       {"REQUESTER", str(change.requester)},
                       {"DURATION-US", num(change.duration_us)},
                       {"AT-UNIX-MS", num(change.at_unix_ms)},
                       {"FROM-FINGERPRINT", str(change.from_fingerprint)},
                       {"TO-FINGERPRINT", str(change.to_fingerprint)},
                       {"DETAILS", str(change.details)},
                       {"STATE-HANDOVER", str(change.state_handover)},
                       {"DETAIL", str(change.detail)}});
}

// A shadow candidate as SHADOW-STATUS lists it.
static Value shadow_status_value(const SkillHost::ShadowStatus& status) {
  std::vector<Value> latest;
  latest.reserve(status.latest.size());
  for (const ShadowSample& sample : status.latest) {
    latest.push_back(Value::plist({{"AT-UNIX-MS", num(sample.at_unix_ms)},
                                   {"STAGE", str(sample.stage)},
                                   {"KIND", str(to_string(sample.kind))},
                                   {"LIVE", str(sample.live)},
                                   {"CANDIDATE", str(sample.candidate)},
                                   {"LIVE-REASON", str(sample.live_reason)},
                                   {"CANDIDATE-REASON", str(sample.candidate_reason)},
                                   {"ACTION-DIGEST", str(sample.action_digest)}}));
  }
  const ShadowCounts& c = status.counts;
  auto count = [](std::uint64_t n) { return num(static_cast<std::int64_t>(n)); };
  return Value::plist({{"NAME", str(status.skill)},
                       {"LIVE-VERSION", str(status.live_version)},
                       {"CANDIDATE-VERSION", str(status.candidate_version)},
                       {"CANDIDATE-SHA256", str(status.candidate_sha256)},
                       {"MANIFEST", str(status.manifest.string())},
                       {"SINCE-UNIX-MS", num(status.since_unix_ms)},
                       {"REQUESTER", str(status.requester)},
                       {"SEEN", count(c.seen)},
                       {"AGREEMENTS", count(c.agreements())},
                       {"DISAGREEMENTS", count(c.disagreements())},
                       {"CANDIDATE-BLOCKS", count(c.of(ShadowKind::candidate_blocks))},
                       {"CANDIDATE-PASSES", count(c.of(ShadowKind::candidate_passes))},
                       {"REWRITES-DIFFERENTLY", count(c.of(ShadowKind::rewrites_differently))},
                       {"CANDIDATE-FAILED", count(c.of(ShadowKind::candidate_failed))},
                       {"LATEST", Value::list(latest)}});
}

Value OperatorHandler::shadows_value() const {
  std::vector<Value> items;
  for (const auto& status : services_.skills.shadow_status()) items.push_back(shadow_status_value(status));
  return Value::list(items);
}

namespace {

// What the loaded tool-permissions table says of `tool` (its config read as
// the skill reads it: the name's own level, else the longest matching
// pattern's, else ask); "" when no tool-permissions skill is loaded.
std::string permission_of(const Snapshot& snapshot, std::string_view tool) {
  const Slot* table = snapshot.find("tool-permissions");
  if (table == nullptr) return "";
  const Value* tools = table->manifest().config.get("TOOLS");
  if (tools == nullptr || !tools->is_list()) return "ask";
  const std::string name = ascii_lower(tool);
  const std::span<const Value> items = tools->items();
  std::string best_pattern;
  std::string best = "ask";
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (!items[i].is_keyword() || !(items[i + 1].is_string() || items[i + 1].is_keyword())) continue;
    const std::string key = ascii_lower(items[i].text());
    std::string level = ascii_lower(items[i + 1].text());
    if (key == name) return level;
    if (key.find('*') != std::string::npos && name_matches(key, name) && key.size() > best_pattern.size()) {
      best_pattern = key;
      best = level;
    }
  }
  return best;
}

}  // namespace

Value OperatorHandler::mcp_value() const {
  if (services_.mcp == nullptr) return {};
  const std::shared_ptr<const Snapshot> snapshot = services_.skills.registry().snapshot();
  std::vector<Value> servers;
  for (const McpServerStatus& server : services_.mcp->status()) {
    std::vector<Value> tools;
    for (const McpServerStatus::Tool& tool : server.tools) {
      const std::string offered = "mcp__" + server.name + "__" + tool.name;
      tools.push_back(Value::plist({{"NAME", str(tool.name)},
                                    {"OFFERED", str(tool.offered)},
                                    {"PERMISSION", str(snapshot ? permission_of(*snapshot, offered) : "")},
                                    {"SHA256", str(tool.digest)},
                                    {"PIN", str(tool.pin)},
                                    {"PINNED-SHA256", str(tool.pinned_digest)},
                                    {"ANNOTATIONS-JSON", str(tool.annotations_json)},
                                    {"NOTE", str(tool.note)}}));
    }
    servers.push_back(Value::plist({{"NAME", str(server.name)},
                                    {"TRANSPORT", str(server.transport)},
                                    {"STATE", str(server.state)},
                                    {"REASON", str(server.reason)},
                                    {"PROTOCOL-VERSION", str(server.protocol_version)},
                                    {"PID", num(server.pid)},
                                    {"STARTS", num(static_cast<std::int64_t>(server.starts))},
                                    {"CALLS", num(static_cast<std::int64_t>(server.calls))},
                                    {"FAILURES", num(static_cast<std::int64_t>(server.failures))},
                                    {"LATENCY-P50-US", num(static_cast<std::int64_t>(server.latency_p50_us))},
                                    {"LATENCY-P99-US", num(static_cast<std::int64_t>(server.latency_p99_us))},
                                    {"DEFINITION-CHANGES", num(static_cast<std::int64_t>(server.definition_changes))},
                                    {"SANDBOX", str(server.sandbox)},
                                    {"TOOLS", Value::list(tools)}}));
  }
  return Value::list(servers);
}

OperatorHandler::OperatorHandler(Services services) : services_(std::move(services)) {}

void OperatorHandler::handle(Value request, std::string requester, Answer answer) {
  const Value* id = request.get("REQUEST-ID");
  Value request_id = id != nullptr ? *id : Value();
  // Echoes the request id and logs refusals; called once.
  auto reply = [answer = std::move(answer), request_id](Value response) {
    if (!request_id.is_nil()) response = response.with("REQUEST-ID", request_id);
    answer(std::move(response));
  };
  services_.control.post([this, request = std::move(request), requester = std::move(requester), reply]() {
    try {
      run(request, requester, reply);
    } catch (const std::exception& e) {
      log_message(LogLevel::error, kComponent, "operator command failed: {}", e.what());
      reply(make_error_response(wire_error::kInternal, std::string("the command failed: ") + e.what()));
    }
  });
}

Value OperatorHandler::skills_value() const {
  std::vector<Value> items;
  auto snapshot = services_.skills.snapshot();
  const auto retired = services_.skills.retired_counts();
  for (const auto& slot : snapshot->slots()) {
    const GateCounts counts = slot->counters().read();
    // The skill's totals: this version's counts and those of its earlier versions.
    GateCounts totals = counts;
    if (auto earlier = retired.find(slot->name()); earlier != retired.end()) {
      totals.passes += earlier->second.passes;
      totals.rewrites += earlier->second.rewrites;
      totals.blocks += earlier->second.blocks;
      totals.approvals += earlier->second.approvals;
      totals.failures += earlier->second.failures;
    }
    Value item = Value::plist({{"NAME", str(slot->name())},
                               {"VERSION", str(slot->version_text())},
                               {"PRIORITY", num(slot->priority())},
                               {"STATE", Value::keyword("LOADED")},
                               {"SHA256", str(slot->library_sha256())},
                               {"GATE", Value::boolean(slot->has_gate())},
                               {"VERIFIED", num(static_cast<std::int64_t>(totals.calls()))},
                               {"BLOCKED", num(static_cast<std::int64_t>(totals.blocks))},
                               {"FAILED", num(static_cast<std::int64_t>(totals.failures))},
                               {"VERSION-VERIFIED", num(static_cast<std::int64_t>(counts.calls()))},
                               {"VERSION-BLOCKED", num(static_cast<std::int64_t>(counts.blocks))},
                               {"VERSION-FAILED", num(static_cast<std::int64_t>(counts.failures))}});
    // Where its code runs: in the daemon, or a worker process (pid, restarts, quarantine).
    const IsolationStatus isolation = slot->isolation_status();
    item = std::move(item).with("ISOLATION", str(to_string(isolation.tier)));
    if (isolation.tier == Isolation::process) {
      item = std::move(item)
                 .with("WORKER-PID", num(isolation.pid))
                 .with("RESTARTS", num(static_cast<std::int64_t>(isolation.restarts)))
                 .with("SANDBOX-DENIALS", num(static_cast<std::int64_t>(isolation.sandbox_denials)));
      if (!isolation.last_death.empty()) item = std::move(item).with("LAST-DEATH", str(isolation.last_death));
      if (isolation.quarantined) item = std::move(item).with("QUARANTINED", str(isolation.quarantine_reason));
    }
    if (slot->acts()) {  // what it offers, and the gates it must have to act
      std::vector<Value> actuators, tools, guards;
      for (const std::string& a : slot->actuators()) actuators.push_back(Value::keyword(a));
      for (const SkillTool& t : slot->tools()) tools.push_back(str(t.name));
      for (const Dependency& g : slot->manifest().guarded_by) guards.push_back(str(g.text));
      item = std::move(item)
                 .with("ACTUATORS", Value::list(actuators))
                 .with("TOOLS", Value::list(tools))
                 .with("GUARDED-BY", Value::list(guards));
      if (const std::string missing = snapshot->missing_guard(*slot); !missing.empty()) {
        item = std::move(item).with("UNGUARDED", str(missing));  // "is guarded by x, which is not loaded"
      }
    }
    items.push_back(std::move(item));
  }
  for (const auto& [name, entry] : services_.problems.disabled()) {
    if (snapshot->find(name) != nullptr) continue;
    items.push_back(Value::plist({{"NAME", str(name)},
                                  {"VERSION", str(entry.version)},
                                  {"PRIORITY", num(entry.priority)},
                                  {"STATE", Value::keyword("DISABLED")},
                                  {"REASON", str(entry.reason)}}));
  }
  return Value::list(items);
}

void OperatorHandler::run(const Value& request, const std::string& requester, const Answer& answer) {
  const Value& command = request.at("COMMAND");
  if (!command.is_keyword() && !command.is_string()) {
    answer(
        bad_request(":COMMAND is required: one of :STATUS :SKILLS :LOAD :RELOAD :UNLOAD :RESCAN :HISTORY "
                    ":SHADOW :SHADOW-STATUS :SHADOW-STOP :PROMOTE :APPROVALS :APPROVAL :APPROVE :DENY :MCP :MCP-TRUST "
                    ":MCP-RELOAD :RULES :RULE :RULE-ADD :RULE-REMOVE :RULE-TEST :RULES-CARRY :SHUTDOWN"));
    return;
  }
  const std::string name = ascii_upper(command.text());
  SkillHost& host = services_.skills;
  Value error;

  if (name == "STATUS") {
    // The rules in force and what they decided, as `status` shows them.
    auto rules_status = [this]() -> Value {
      if (services_.rules == nullptr) return Value();
      const RuleBook::Counts c = services_.rules->counts();
      return Value::plist({{"FILE", str(services_.rules->file().string())},
                           {"DENY", num(static_cast<std::int64_t>(c.deny))},
                           {"ASK", num(static_cast<std::int64_t>(c.ask))},
                           {"ALLOW", num(static_cast<std::int64_t>(c.allow))},
                           {"DENY-HITS", num(static_cast<std::int64_t>(c.deny_hits))},
                           {"ASK-HITS", num(static_cast<std::int64_t>(c.ask_hits))},
                           {"ALLOW-HITS", num(static_cast<std::int64_t>(c.allow_hits))}});
    };
    // Sessions the model router kept on local providers, and why.
    auto local_only_value = [this]() -> Value {
      std::vector<Value> sessions;
      for (const LocalOnlySessions::Entry& e : services_.pipeline.local_only_sessions().list()) {
        sessions.push_back(Value::plist({{"SESSION", str(e.session)},
                                         {"REASON", str(e.reason)},
                                         {"SINCE", str(e.since)},
                                         {"BY", str(e.marked_by)}}));
      }
      return Value::list(sessions);
    };
    // What the consensus rounds came to, per set of voting providers.
    auto consensus_value = [this]() -> Value {
      std::vector<Value> sets;
      for (const auto& [set, f] : services_.pipeline.consensus_stats().figures()) {
        std::vector<Value> flags;
        for (const auto& [provider, count] : f.red_flags) {
          flags.push_back(
              Value::plist({{"PROVIDER", str(provider)}, {"COUNT", num(static_cast<std::int64_t>(count))}}));
        }
        sets.push_back(Value::plist({{"PROVIDERS", str(set)},
                                     {"AGREED", num(static_cast<std::int64_t>(f.agreed))},
                                     {"DISAGREED", num(static_cast<std::int64_t>(f.disagreed))},
                                     {"CALLS", num(static_cast<std::int64_t>(f.calls))},
                                     {"CANCELLED", num(static_cast<std::int64_t>(f.cancelled))},
                                     {"RED-FLAGS", Value::list(flags)}}));
      }
      return Value::list(sets);
    };
    const HealthReport health = services_.health ? services_.health() : HealthReport{};
    const auto uptime =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - services_.started);
    const std::size_t pending = services_.approvals != nullptr ? services_.approvals->pending_count() : 0;
    const std::uint64_t refused = services_.approvals != nullptr ? services_.approvals->refused_count() : 0;
    const ConnectionFigures figures =
        services_.connection_figures ? services_.connection_figures() : ConnectionFigures{};
    const std::string not_ready = services_.not_ready ? services_.not_ready() : std::string();
    answer(make_ok_response(
        "running",
        Value::plist(
            {{"VERSION", str(services_.version)},
             {"UPTIME-S", num(uptime.count())},
             {"HEALTH", Value::keyword(health.status)},
             {"READY", Value::boolean(not_ready.empty())},
             {"NOT-READY", not_ready.empty() ? Value() : str(not_ready)},
             {"CONNECTIONS", num(static_cast<std::int64_t>(services_.connections ? services_.connections() : 0))},
             {"CONNECTIONS-REFUSED", num(static_cast<std::int64_t>(figures.refused))},
             {"CONNECTIONS-EVICTED", num(static_cast<std::int64_t>(figures.evicted))},
             {"METRICS-EVICTED", num(static_cast<std::int64_t>(figures.metrics_evicted))},
             {"SIGNALS-PROCESSED", num(static_cast<std::int64_t>(services_.pipeline.signals_processed()))},
             {"IN-FLIGHT", num(static_cast<std::int64_t>(services_.pipeline.in_flight()))},
             {"PENDING-APPROVALS", num(static_cast<std::int64_t>(pending))},
             {"APPROVALS-REFUSED", num(static_cast<std::int64_t>(refused))},
             {"RULES", rules_status()},
             {"LOCAL-ONLY-SESSIONS", local_only_value()},
             {"CONSENSUS", consensus_value()},
             {"STATE-DB", services_.state_db ? services_.state_db() : Value()},
             {"DECISION-LOG", Value::keyword(services_.decisions != nullptr ? "ON" : "OFF")},
             {"DECISIONS-WRITTEN",
              num(static_cast<std::int64_t>(services_.decisions != nullptr ? services_.decisions->written() : 0))},
             {"DECISIONS-DROPPED",
              num(static_cast<std::int64_t>(services_.decisions != nullptr ? services_.decisions->dropped() : 0))},
             {"PROVIDERS", services_.providers ? services_.providers() : Value()},
             {"BUDGET", services_.budget ? services_.budget() : Value()},
             {"METRICS", services_.metrics_url ? str(services_.metrics_url()) : Value()},
             {"SKILLS", skills_value()},
             {"SHADOWS", shadows_value()},
             {"MCP-SERVERS", mcp_value()},
             {"MANIFEST-DIR", str(absolute_text(host.options().manifest_dir))},
             {"PLUGIN-DIR", str(absolute_text(host.options().plugin_dir))}})));
    return;
  }
  if (name == "BUDGET") {
    const Value budget = services_.budget ? services_.budget() : Value();
    if (budget.is_nil()) {
      return answer(make_error_response(wire_error::kNotFound, "this daemon records no usage (see its log)"));
    }
    answer(make_ok_response("usage and budget", budget));
    return;
  }
  if (name == "MCP") {
    const Value servers = mcp_value();
    answer(make_ok_response(std::to_string(servers.size()) + " MCP servers", Value::plist({{"SERVERS", servers}})));
    return;
  }
  if (name == "MCP-RELOAD") {
    if (!services_.mcp_reload) return answer(bad_request("this daemon runs no MCP servers"));
    auto reloaded = services_.mcp_reload();
    if (!reloaded) return answer(make_error_response(code_for(reloaded.error().code), reloaded.error().message));
    log_message(LogLevel::info, kComponent, "MCP servers reloaded by {}: {} configured", requester, *reloaded);
    answer(make_ok_response(std::to_string(*reloaded) + " MCP servers configured; changed ones restart",
                            Value::plist({{"CONFIGURED", num(static_cast<std::int64_t>(*reloaded))}})));
    return;
  }
  if (name == "MCP-TRUST") {
    if (services_.mcp == nullptr) return answer(bad_request("this daemon runs no MCP servers"));
    const Value& server = request.at("SERVER");
    const Value& tool = request.at("TOOL");
    if (!server.is_string() || server.text().empty()) return answer(bad_request("MCP-TRUST needs :SERVER \"name\""));
    if (!tool.is_nil() && !tool.is_string()) return answer(bad_request("MCP-TRUST's :TOOL is a tool's name"));
    auto report =
        services_.mcp->trust(std::string(server.text()), tool.is_string() ? std::string(tool.text()) : "", requester);
    if (!report) return answer(make_error_response(code_for(report.error().code), report.error().message));
    std::vector<Value> changes;
    for (const McpTrustReport::Change& change : report->changes) {
      changes.push_back(Value::plist({{"TOOL", str(change.tool)},
                                      {"FROM-SHA256", str(change.from_digest)},
                                      {"TO-SHA256", str(change.to_digest)},
                                      {"FROM-DEFINITION", str(change.from_definition)},
                                      {"TO-DEFINITION", str(change.to_definition)}}));
    }
    answer(make_ok_response(changes.empty() ? std::string("nothing to trust: every definition matches its pin")
                                            : std::to_string(changes.size()) + " tool definition(s) trusted",
                            Value::plist({{"CHANGES", Value::list(changes)}})));
    return;
  }
  if (name == "SKILLS") {
    const Value skills = skills_value();
    answer(make_ok_response(std::to_string(skills.size()) + " skills", Value::plist({{"SKILLS", skills}})));
    return;
  }
  if (name == "LOAD") {
    const std::optional<SkillManifest> manifest = manifest_argument(request, error);
    if (!manifest) return answer(error);
    const bool loaded = host.snapshot()->find(manifest->name) != nullptr;
    ChangeResult result = loaded ? host.swap(*manifest, requester) : host.add(*manifest, requester);
    services_.problems.record(result);
    if (services_.changed) services_.changed();
    answer(changes_response({&result.change}, loaded ? "swapped" : "loaded"));
    return;
  }
  if (name == "RELOAD") {
    const Value* skill = string_argument(request, "NAME", error);
    if (skill == nullptr) return answer(error);
    const std::string skill_name(skill->text());
    const auto disabled = services_.problems.disabled();
    if (host.snapshot()->find(skill_name) == nullptr && disabled.find(skill_name) == disabled.end()) {
      answer(make_error_response(wire_error::kNotFound, "no skill named '" + skill_name + "' is loaded or disabled"));
      return;
    }
    ChangeResult result = host.reload(skill_name, requester);
    services_.problems.record(result);
    if (services_.changed) services_.changed();
    answer(changes_response({&result.change}, "reloaded"));
    return;
  }
  if (name == "UNLOAD") {
    const Value* skill = string_argument(request, "NAME", error);
    if (skill == nullptr) return answer(error);
    const std::string skill_name(skill->text());
    if (host.snapshot()->find(skill_name) == nullptr) {
      // A skill a failed load left disabled: unloading it clears the entry
      // (and the DEGRADED health it caused), audited as a remove.
      const auto disabled = services_.problems.disabled();
      auto entry = disabled.find(skill_name);
      if (entry == disabled.end()) {
        answer(make_error_response(wire_error::kNotFound, "no skill named '" + skill_name + "' is loaded or disabled"));
        return;
      }
      ChangeResult result = host.forget_disabled(skill_name, entry->second.version, entry->second.reason, requester);
      services_.problems.record(result);
      if (services_.changed) services_.changed();
      answer(changes_response({&result.change}, "cleared the disabled skill '" + skill_name + "'"));
      return;
    }
    const bool cascade = static_cast<bool>(request.at("CASCADE"));
    const bool force = static_cast<bool>(request.at("FORCE"));
    if (cascade && force) return answer(bad_request(":CASCADE and :FORCE exclude each other; give one"));
    const RemoveMode mode = cascade ? RemoveMode::cascade : force ? RemoveMode::force : RemoveMode::refuse_if_needed;
    std::vector<ChangeResult> results = host.remove(skill_name, mode, requester);
    std::vector<const SkillChange*> changes;
    for (const auto& r : results) {
      services_.problems.record(r);
      changes.push_back(&r.change);
    }
    if (services_.changed) services_.changed();
    answer(changes_response(changes, "unloaded"));
    return;
  }
  if (name == "RESCAN") {
    RescanResult result = host.rescan(requester);
    services_.problems.record(result);
    if (services_.changed) services_.changed();
    std::vector<const SkillChange*> changes;
    for (const auto& r : result.changes) changes.push_back(&r.change);
    std::string message = std::to_string(changes.size()) + (changes.size() == 1 ? " change" : " changes");
    for (const auto& e : result.manifest_errors) message += "; " + e.message;
    if (!result.deferred.empty())
      message += "; " + std::to_string(result.deferred.size()) + " deferred (still being written)";
    for (const std::string& kept : result.kept) message += "; kept " + kept;
    answer(changes_response(changes, message));
    return;
  }
  if (name == "SHADOW") {
    const std::optional<SkillManifest> manifest = manifest_argument(request, error);
    if (!manifest) return answer(error);
    ChangeResult result = host.shadow(*manifest, requester);
    if (services_.changed) services_.changed();
    if (!result.ok()) {
      Value response = make_error_response(wire_error::kRefused, describe_failure(result.change, "nothing changed"));
      answer(
          response.with("PAYLOAD", response.at("PAYLOAD").with("CHANGES", Value::list({change_value(result.change)}))));
      return;
    }
    answer(make_ok_response(
        "shadowing " + result.change.skill + " " + result.change.to_version + " beside " + result.change.from_version,
        Value::plist({{"CHANGES", Value::list({change_value(result.change)})}})));
    return;
  }
  if (name == "SHADOW-STATUS") {
    std::string only;
    if (const Value* s = request.get("NAME")) {
      if (!s->is_string() || s->text().empty()) return answer(bad_request(":NAME must be a non-empty string"));
      only = std::string(s->text());
    }
    std::vector<Value> items;
    for (const auto& status : host.shadow_status()) {
      if (only.empty() || status.skill == only) items.push_back(shadow_status_value(status));
    }
    if (!only.empty() && items.empty()) {
      return answer(make_error_response(wire_error::kNotFound, "skill '" + only + "' has no shadow candidate"));
    }
    answer(make_ok_response(std::to_string(items.size()) + (items.size() == 1 ? " candidate" : " candidates"),
                            Value::plist({{"SHADOWS", Value::list(items)}})));
    return;
  }
  if (name == "SHADOW-STOP" || name == "PROMOTE") {
    const Value* skill = string_argument(request, "NAME", error);
    if (skill == nullptr) return answer(error);
    const std::string skill_name(skill->text());
    const auto statuses = host.shadow_status();
    if (std::none_of(statuses.begin(), statuses.end(),
                     [&](const SkillHost::ShadowStatus& s) { return s.skill == skill_name; })) {
      answer(make_error_response(wire_error::kNotFound, "skill '" + skill_name +
                                                            "' has no shadow candidate; start one with "
                                                            "skills shadow MANIFEST"));
      return;
    }
    const bool promote = name == "PROMOTE";
    ChangeResult result = promote ? host.promote(skill_name, requester) : host.shadow_stop(skill_name, requester);
    if (promote) services_.problems.record(result);
    if (services_.changed) services_.changed();
    answer(changes_response({&result.change}, promote ? "promoted " + skill_name + " " + result.change.to_version
                                                      : "stopped shadowing " + skill_name));
    return;
  }
  if (name == "HISTORY") {
    std::int64_t limit = 100;
    if (const Value* n = request.get("LIMIT")) {
      if (!n->is_integer() || n->as_integer() < 1 || n->as_integer() > 100000) {
        return answer(bad_request(":LIMIT must be a whole number from 1 to 100000"));
      }
      limit = n->as_integer();
    }
    std::string only;
    if (const Value* s = request.get("SKILL")) {
      if (!s->is_string()) return answer(bad_request(":SKILL must be a string"));
      only = std::string(s->text());
    }
    // The host lists every skill's changes; a filtered list looks further back.
    auto history = host.history(only.empty() ? static_cast<std::size_t>(limit) : std::size_t{100000});
    if (!history) return answer(make_error_response(wire_error::kInternal, history.error().message));
    std::vector<Value> items;
    for (const auto& change : *history) {
      if (!only.empty() && change.skill != only) continue;
      if (static_cast<std::int64_t>(items.size()) >= limit) break;
      items.push_back(change_value(change));
    }
    answer(
        make_ok_response(std::to_string(items.size()) + " changes", Value::plist({{"CHANGES", Value::list(items)}})));
    return;
  }
  if (name == "APPROVALS") {
    // A page at a time, so that however many are pending the answer fits in a frame.
    std::int64_t limit = 100;
    std::int64_t offset = 0;
    if (!count_argument(request, "LIMIT", 1, 1000, limit, error)) return answer(error);
    if (!count_argument(request, "OFFSET", 0, std::numeric_limits<std::int64_t>::max(), offset, error)) {
      return answer(error);
    }
    std::vector<Value> items;
    std::size_t total = 0;
    if (services_.approvals != nullptr) {
      auto page = services_.approvals->pending_page(static_cast<std::size_t>(limit), static_cast<std::size_t>(offset));
      if (!page) return answer(make_error_response(wire_error::kInternal, page.error().message));
      for (const auto& approval : page->approvals) items.push_back(approval_value(approval));
      total = page->total;
    }
    const std::string message = items.empty() ? std::to_string(total) + " pending"
                                              : std::to_string(offset + 1) + "-" +
                                                    std::to_string(offset + static_cast<std::int64_t>(items.size())) +
                                                    " of " + std::to_string(total) + " pending (newest first)";
    answer(make_ok_response(message, Value::plist({{"APPROVALS", Value::list(items)},
                                                   {"TOTAL", num(static_cast<std::int64_t>(total))},
                                                   {"OFFSET", num(offset)},
                                                   {"LIMIT", num(limit)}})));
    return;
  }
  if (name == "APPROVAL") {
    const Value* token = string_argument(request, "TOKEN", error);
    if (token == nullptr) return answer(error);
    if (services_.approvals == nullptr) {
      return answer(make_error_response(wire_error::kRefused, "approvals are not enabled on this daemon"));
    }
    auto found = services_.approvals->find(token->text());
    if (!found) return answer(make_error_response(code_for(found.error().code), found.error().message));
    answer(make_ok_response(to_string(found->state), Value::plist({{"APPROVAL", approval_value(*found)}})));
    return;
  }
  if (handle_rules_request(name, request, requester, services_, answer)) return;
  if (name == "APPROVE") {
    const Value* token = string_argument(request, "TOKEN", error);
    if (token == nullptr) return answer(error);
    services_.pipeline.approve(std::string(token->text()), requester, [answer](Result<Value> result) {
      if (!result) {
        log_message(LogLevel::warn, kComponent, "approval refused: {}", result.error().message);
        answer(make_error_response(code_for(result.error().code), result.error().message));
        return;
      }
      answer(make_ok_response("approved", Value::plist({{"RESULT", *result}})));
    });
    return;
  }
  if (name == "DENY" && request.get("SESSION") != nullptr) {
    if (request.get("TOKEN") != nullptr) return answer(bad_request(":DENY takes :TOKEN or :SESSION, not both"));
    const Value* session = string_argument(request, "SESSION", error);
    if (session == nullptr) return answer(error);
    if (services_.approvals == nullptr) {
      return answer(make_error_response(wire_error::kRefused, "approvals are not enabled on this daemon"));
    }
    const std::string session_id(session->text());
    auto denied = services_.approvals->deny_session(session_id, requester);
    if (!denied) return answer(make_error_response(code_for(denied.error().code), denied.error().message));
    const std::string message = *denied == 0 ? "no pending approvals of session '" + session_id + "'"
                                             : "denied " + std::to_string(*denied) + " pending approval" +
                                                   (*denied == 1 ? "" : "s") + " of session '" + session_id + "'";
    if (*denied > 0) log_message(LogLevel::info, kComponent, "{} ({})", message, requester);
    answer(make_ok_response(
        message, Value::plist({{"DENIED", num(static_cast<std::int64_t>(*denied))}, {"SESSION", str(session_id)}})));
    return;
  }
  if (name == "DENY") {
    const Value* token = string_argument(request, "TOKEN", error);
    if (token == nullptr) return answer(error);
    auto denied = services_.pipeline.deny(std::string(token->text()), requester);
    if (!denied) {
      answer(make_error_response(code_for(denied.error().code), denied.error().message));
      return;
    }
    answer(make_ok_response("denied"));
    return;
  }
  if (name == "SHUTDOWN") {
    log_message(LogLevel::info, kComponent, "shutdown requested by an operator ({})", requester);
    answer(make_ok_response("shutting down"));
    if (services_.shutdown) services_.shutdown();
    return;
  }
  answer(bad_request(
      "unknown command :" + name +
      "; known: :STATUS :SKILLS :LOAD :RELOAD :UNLOAD :RESCAN :HISTORY :SHADOW :SHADOW-STATUS :SHADOW-STOP :PROMOTE "
      ":APPROVALS :APPROVAL :APPROVE :DENY :MCP :MCP-TRUST :MCP-RELOAD :RULES :RULE :RULE-ADD :RULE-REMOVE "
      ":RULE-TEST :RULES-CARRY :SHUTDOWN"));
}

}  // namespace passepartout

// `passepartout fleet status`: the fleet a state database holds, read from
// the database itself (no daemon needs to run): every node that registered,
// the version it runs and its skills', when it started and was last seen
// (alive while seen within the fleet's lease), where the fleet's approvals
// stand, and each skill's latest rollout with every node's report.
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/duration_text.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/fleet_log.hpp"
#include "daemon/fleet_rollout.hpp"
#include "store/pg_client.hpp"

namespace passepartout::cli {
namespace {

using json = nlohmann::ordered_json;

constexpr std::chrono::milliseconds kWait{5000};

struct FleetOptions {
  std::filesystem::path config_file;
  std::string state_db;
  std::string lease;
  bool json = false;
};

int run_fleet_status(const FleetOptions& options) {
  const auto config = resolve_fleet_target(options.config_file, options.state_db, options.lease);
  if (!config) {
    std::cerr << "passepartout fleet status: " << config.error().message << '\n';
    return kExitUsage;
  }
  const std::string lease_ms = std::to_string(config->lease.count());
  const PgOutcome asked = pg_run_once(
      config->conninfo,
      {{"SELECT coalesce(max(version), 0) AS schema FROM passepartout_schema", {}},
       {"SELECT node, version, to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS started, "
        "(extract(epoch FROM clock_timestamp() - seen_at) * 1000)::bigint AS seen_ms_ago, seen_at > clock_timestamp() "
        "- $1::bigint * interval '1 millisecond' AS alive, skills FROM passepartout_nodes ORDER BY node",
        {lease_ms}},
       {"SELECT count(*) FILTER (WHERE state = 'pending') AS pending, count(*) FILTER (WHERE state = 'approved' AND "
        "run_state = 'none') AS waiting, count(*) FILTER (WHERE run_state = 'claimed') AS claimed, count(*) FILTER "
        "(WHERE run_state = 'running') AS running FROM passepartout_approvals",
        {}},
       {"SELECT DISTINCT ON (name) id, name, version, stages, stage, state, reason FROM passepartout_rollouts ORDER "
        "BY name, id DESC",
        {}},
       {"SELECT r.rollout, r.node, r.state, r.step, r.error, r.verifications, r.disagreements, r.failures, r.blocks "
        "FROM passepartout_rollout_reports r JOIN (SELECT DISTINCT ON (name) id FROM passepartout_rollouts ORDER BY "
        "name, id DESC) latest ON latest.id = r.rollout ORDER BY r.rollout, r.node",
        {}}},
      kWait);
  if (!asked.ok()) {
    std::cerr << "passepartout fleet status: " << config->shown << ": " << asked.error->message
              << (asked.error->sqlstate == "42P01" ? " (no daemon has migrated this database yet: start one with "
                                                     "--state-db)"
                                                   : "")
              << '\n';
    return kExitProblem;
  }
  const PgRows& nodes = asked.results[1];
  const PgRows& approvals = asked.results[2];
  const PgRows& rollouts = asked.results[3];
  const PgRows& reports = asked.results[4];
  const auto text = [](const PgRows& rows, std::size_t i, const char* column) {
    return std::string(rows.at(i, column).value_or(""));
  };
  // Where a rollout stands: "stage 2 of 3 (10%)", "done", "halted: why".
  const auto standing = [&](std::size_t i) {
    std::string state = text(rollouts, i, "state");
    if (state != "running") return state == "halted" ? "halted: " + text(rollouts, i, "reason") : state;
    auto stages = parse_rollout_stages(text(rollouts, i, "stages"));
    const auto stage = static_cast<std::size_t>(rollouts.integer(i, "stage"));
    if (!stages || stage >= stages->size()) return state;
    return "stage " + std::to_string(stage + 1) + " of " + std::to_string(stages->size()) + " (" +
           (*stages)[stage].text() + ")";
  };
  if (options.json) {
    json document{{"target", config->shown}, {"schema", asked.results[0].integer(0, "schema")}};
    json list = json::array();
    for (std::size_t i = 0; i < nodes.rows.size(); ++i) {
      list.push_back({{"node", std::string(nodes.at(i, "node").value_or(""))},
                      {"version", std::string(nodes.at(i, "version").value_or(""))},
                      {"started_at", std::string(nodes.at(i, "started").value_or(""))},
                      {"seen_ms_ago", nodes.integer(i, "seen_ms_ago")},
                      {"alive", nodes.at(i, "alive") == std::optional<std::string_view>("t")},
                      {"skills", text(nodes, i, "skills")}});
    }
    document["nodes"] = std::move(list);
    json rollout_list = json::array();
    for (std::size_t i = 0; i < rollouts.rows.size(); ++i) {
      json node_reports = json::array();
      for (std::size_t j = 0; j < reports.rows.size(); ++j) {
        if (reports.integer(j, "rollout") != rollouts.integer(i, "id")) continue;
        node_reports.push_back({{"node", text(reports, j, "node")},
                                {"state", text(reports, j, "state")},
                                {"step", text(reports, j, "step")},
                                {"error", text(reports, j, "error")},
                                {"verifications", reports.integer(j, "verifications")},
                                {"disagreements", reports.integer(j, "disagreements")},
                                {"failures", reports.integer(j, "failures")},
                                {"blocks", reports.integer(j, "blocks")}});
      }
      rollout_list.push_back({{"id", rollouts.integer(i, "id")},
                              {"name", text(rollouts, i, "name")},
                              {"version", text(rollouts, i, "version")},
                              {"stages", text(rollouts, i, "stages")},
                              {"stage", rollouts.integer(i, "stage")},
                              {"state", text(rollouts, i, "state")},
                              {"standing", standing(i)},
                              {"reason", text(rollouts, i, "reason")},
                              {"nodes", std::move(node_reports)}});
    }
    document["rollouts"] = std::move(rollout_list);
    document["approvals"] = {{"pending", approvals.integer(0, "pending")},
                             {"approved_waiting", approvals.integer(0, "waiting")},
                             {"claimed", approvals.integer(0, "claimed")},
                             {"running", approvals.integer(0, "running")}};
    std::cout << document.dump(2) << '\n';
    return kExitOk;
  }
  std::cout << "Fleet: " << config->shown << " (schema " << asked.results[0].integer(0, "schema") << ")\n";
  if (nodes.rows.empty()) std::cout << "  no node has registered yet\n";
  for (std::size_t i = 0; i < nodes.rows.size(); ++i) {
    const bool alive = nodes.at(i, "alive") == std::optional<std::string_view>("t");
    const auto ago = std::chrono::milliseconds(nodes.integer(i, "seen_ms_ago"));
    std::cout << "  " << nodes.at(i, "node").value_or("") << ": " << (alive ? "alive" : "gone") << ", version "
              << nodes.at(i, "version").value_or("") << ", started " << nodes.at(i, "started").value_or("")
              << ", last seen " << span_text(std::chrono::duration_cast<std::chrono::seconds>(ago)) << " ago\n";
    if (const std::string skills = text(nodes, i, "skills"); !skills.empty())
      std::cout << "    skills: " << skills << '\n';
  }
  std::cout << "Approvals: " << approvals.integer(0, "pending") << " pending, " << approvals.integer(0, "waiting")
            << " approved and waiting for their node, " << approvals.integer(0, "claimed") << " claimed, "
            << approvals.integer(0, "running") << " running\n";
  for (std::size_t i = 0; i < rollouts.rows.size(); ++i) {
    std::cout << "Rollout #" << rollouts.integer(i, "id") << " of " << text(rollouts, i, "name") << ' '
              << text(rollouts, i, "version") << " (" << text(rollouts, i, "stages") << "): " << standing(i) << '\n';
    for (std::size_t j = 0; j < reports.rows.size(); ++j) {
      if (reports.integer(j, "rollout") != rollouts.integer(i, "id")) continue;
      const std::string state = text(reports, j, "state");
      std::cout << "  " << text(reports, j, "node") << ": " << state;
      if (state == "refused") std::cout << " at its " << text(reports, j, "step") << ": " << text(reports, j, "error");
      if (state == "shadowing") {
        std::cout << ", " << reports.integer(j, "disagreements") << " disagreements in "
                  << reports.integer(j, "verifications") << " verifications";
      }
      if (state == "live") {
        std::cout << ", " << reports.integer(j, "verifications") << " verifications, " << reports.integer(j, "failures")
                  << " failures, " << reports.integer(j, "blocks") << " blocks";
      }
      std::cout << '\n';
    }
  }
  return kExitOk;
}

}  // namespace

void add_fleet_command(CLI::App& app, Runner& chosen) {
  auto* fleet = app.add_subcommand("fleet", "The fleet of daemons that share a state database (--state-db)");
  fleet->require_subcommand(1);
  auto options = std::make_shared<FleetOptions>();
  auto* status = fleet->add_subcommand(
      "status",
      "Every node registered in the state database: alive (seen within the fleet's lease) or gone, the\n"
      "version it runs and its skills', when it started and was last seen; the fleet's approvals:\n"
      "pending, approved and waiting for their node, claimed, running; and each skill's latest rollout,\n"
      "where it stands and what every node reported. Read from the database: no daemon need run.");
  status->add_option("--config", options->config_file, "The daemon's config file, for its state_db: and fleet_lease:")
      ->type_name("FILE");
  status
      ->add_option("--state-db", options->state_db,
                   "The state database (default: the config's state_db:, or PASSEPARTOUT_STATE_DB)")
      ->type_name("URL");
  status
      ->add_option("--fleet-lease", options->lease,
                   "How long a node not seen is taken for alive (default: the config's fleet_lease:, or 10)")
      ->type_name("SECONDS");
  status->add_flag("--json", options->json, "Print one JSON document");
  status->footer("Exit status: 0 read; 1 the database could not be read; 2 bad usage or no state database.");
  status->callback([&chosen, options] { chosen = [options] { return run_fleet_status(*options); }; });
  add_fleet_release_commands(*fleet, chosen);
}

}  // namespace passepartout::cli

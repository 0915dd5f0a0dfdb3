// `passepartout fleet keygen | publish | rollout | halt`: a fleet's skill
// releases and their rollouts, written to the state database (no daemon need
// run); the nodes carry them out (daemon/rollout_agent.cpp).
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "base/digest.hpp"
#include "base/duration_text.hpp"
#include "base/file_io.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/fleet_log.hpp"
#include "daemon/fleet_rollout.hpp"
#include "daemon/rollout_agent.hpp"
#include "skills/bundled_skills.hpp"
#include "skills/skill_manifest.hpp"
#include "store/pg_client.hpp"

namespace passepartout::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr std::chrono::milliseconds kWait{10000};
constexpr std::size_t kMaxLibraryBytes = std::size_t{256} << 20;

struct Target {
  fs::path config_file;
  std::string state_db;
};

void add_target_options(CLI::App& command, Target& target) {
  command.add_option("--config", target.config_file, "A daemon's config file, for its state_db:")->type_name("FILE");
  command
      .add_option("--state-db", target.state_db,
                  "The fleet's state database (default: the config's state_db:, or PASSEPARTOUT_STATE_DB)")
      ->type_name("URL");
}

int problem(std::string_view command, const std::string& message, int status = kExitProblem) {
  std::cerr << "passepartout fleet " << command << ": " << message << '\n';
  return status;
}

// --- keygen -----------------------------------------------------------------------------------

int run_keygen(const fs::path& out) {
  std::error_code ec;
  if (fs::exists(out, ec)) return problem("keygen", out.string() + " exists: give a new file", kExitUsage);
  const std::string key = ed25519_private_key();
  {
    std::ofstream file(out, std::ios::binary);
    if (!file) return problem("keygen", "cannot write " + out.string());
    ::chmod(out.c_str(), 0600);
    file << key << '\n';
    if (!file.flush()) return problem("keygen", "cannot write " + out.string());
  }
  ::chmod(out.c_str(), 0600);
  std::cout << "Private key: " << out.string() << " (only its owner may read it; sign with fleet publish --sign-key)\n"
            << "Public key:  " << ed25519_public_key(key) << "\n"
            << "Give the public key to every node (fleet_trusted_key: in the config, or --fleet-trusted-key):\n"
            << "they then load only releases it signed.\n";
  return kExitOk;
}

// --- publish ----------------------------------------------------------------------------------

struct PublishOptions {
  Target target;
  fs::path manifest;
  fs::path library;
  fs::path sign_key;
  bool json = false;
};

// The signing key in `file`: owner-only, 64 hex digits.
Result<std::string> read_sign_key(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return fail(ErrorCode::not_found, "cannot read the key " + file.string());
  if ((st.st_mode & 077) != 0) {
    return fail(ErrorCode::refused, "the key " + file.string() + " may be read by others: chmod 600 it");
  }
  auto text = read_bounded_file(file, 1024);
  if (!text) return fail(text.error().code, "cannot read the key " + file.string() + ": " + text.error().message);
  std::string key = *text;
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (ed25519_public_key(key).empty()) {
    return fail(ErrorCode::invalid_input, file.string() +
                                              " is not an Ed25519 private key (64 hex digits, as "
                                              "`passepartout fleet keygen` writes one)");
  }
  return key;
}

int run_publish(const PublishOptions& options) {
  const auto target = resolve_fleet_target(options.target.config_file, options.target.state_db);
  if (!target) return problem("publish", target.error().message, kExitUsage);
  auto manifest_text = read_bounded_file(options.manifest, SkillManifest::kMaxFileSize);
  if (!manifest_text)
    return problem("publish", "cannot read " + options.manifest.string() + ": " + manifest_text.error().message,
                   kExitUsage);
  auto manifest = SkillManifest::parse(*manifest_text, options.manifest);
  if (!manifest) return problem("publish", manifest.error().message, kExitUsage);
  // The library: as given, else beside the manifest, else in the bundled skills' folder.
  fs::path library = options.library;
  std::error_code ec;
  if (library.empty()) {
    library = options.manifest.parent_path() / manifest->library;
    if (!fs::exists(library, ec)) library = default_plugin_dir() / manifest->library;
  }
  auto bytes = read_bounded_file(library, kMaxLibraryBytes);
  if (!bytes) {
    return problem("publish",
                   "cannot read the library " + library.string() + ": " + bytes.error().message +
                       " (give its path after the manifest's)",
                   kExitUsage);
  }
  const std::string version = manifest->version.to_string();
  const std::string manifest_sha256 = sha256_hex(*manifest_text);
  const std::string library_sha256 = sha256_hex(*bytes);
  if (manifest->sha256 && *manifest->sha256 != library_sha256) {
    return problem(
        "publish",
        "the manifest pins sha256 " + *manifest->sha256 + " but " + library.string() + " is " + library_sha256,
        kExitUsage);
  }
  std::string signature;
  std::string signed_by;
  if (!options.sign_key.empty()) {
    auto key = read_sign_key(options.sign_key);
    if (!key) return problem("publish", key.error().message, kExitUsage);
    signature = ed25519_sign(*key, release_statement(manifest->name, version, manifest_sha256, library_sha256));
    signed_by = ed25519_public_key(*key);
  }
  std::string hex = "\\x";
  hex.reserve(2 + bytes->size() * 2);
  static constexpr char kDigits[] = "0123456789abcdef";
  for (const char c : *bytes) {
    hex += kDigits[static_cast<unsigned char>(c) >> 4];
    hex += kDigits[static_cast<unsigned char>(c) & 0x0f];
  }
  const PgOutcome asked = pg_run_once(
      target->conninfo,
      {{"INSERT INTO passepartout_releases (name, version, manifest, library, manifest_sha256, library_sha256, "
        "signature, published_by) VALUES ($1, $2, $3, $4::bytea, $5, $6, $7, $8) ON CONFLICT (name, version) DO "
        "NOTHING RETURNING name",
        {manifest->name, version, *manifest_text, hex, manifest_sha256, library_sha256, signature,
         "cli uid=" + std::to_string(::getuid())}},
       {"SELECT manifest_sha256, library_sha256, signature FROM passepartout_releases WHERE name = $1 AND version = $2",
        {manifest->name, version}}},
      kWait);
  if (!asked.ok()) return problem("publish", target->shown + ": " + asked.error->message);
  const bool inserted = !asked.results[0].rows.empty();
  const PgRows& stored = asked.results[1];
  if (!inserted && (stored.at(0, "library_sha256") != std::optional<std::string_view>(library_sha256) ||
                    stored.at(0, "manifest_sha256") != std::optional<std::string_view>(manifest_sha256))) {
    return problem("publish", manifest->name + " " + version +
                                  " is published already, with other bytes: give the new build a new version");
  }
  if (options.json) {
    std::cout << json{{"name", manifest->name},           {"version", version},
                      {"library_sha256", library_sha256}, {"manifest_sha256", manifest_sha256},
                      {"signed_by", signed_by},           {"published", inserted}}
                     .dump(2)
              << '\n';
    return kExitOk;
  }
  std::cout << (inserted ? "Published " : "Already published: ") << manifest->name << ' ' << version
            << " (library sha256 " << library_sha256.substr(0, 16) << "..., "
            << (signed_by.empty() ? std::string("not signed") : "signed by " + signed_by.substr(0, 16) + "...")
            << ")\nRoll it out with: passepartout fleet rollout " << manifest->name << ' ' << version << '\n';
  return kExitOk;
}

// --- rollout ----------------------------------------------------------------------------------

struct RolloutOptions {
  Target target;
  std::string name;
  std::string version;
  std::string stages = "shadow,10%,100%";
  std::string dwell = "60s";
  std::uint64_t min_verifications = 100;
  double max_disagreements = 0;
  double max_failures = 1;
  double max_blocks = 1000;
  bool wait = false;
};

// Follows rollout `id` until it is done or halted, printing each change.
int follow(const FleetTarget& target, const std::string& id) {
  std::string last;
  for (;;) {
    const PgOutcome asked = pg_run_once(
        target.conninfo,
        {{"SELECT stages, stage, state, reason FROM passepartout_rollouts WHERE id = $1::bigint", {id}}}, kWait);
    if (!asked.ok()) return problem("rollout", target.shown + ": " + asked.error->message);
    const PgRows& row = asked.results[0];
    if (row.rows.empty()) return problem("rollout", "rollout #" + id + " is gone");
    const std::string state(row.at(0, "state").value_or(""));
    auto stages = parse_rollout_stages(row.at(0, "stages").value_or(""));
    const auto stage = static_cast<std::size_t>(row.integer(0, "stage"));
    std::string now = state;
    if (state == "running" && stages && stage < stages->size()) {
      now = "stage " + std::to_string(stage + 1) + " of " + std::to_string(stages->size()) + ": " +
            (*stages)[stage].text();
    }
    if (now != last) {
      std::cout << "rollout #" << id << ": " << now;
      if (state != "running") std::cout << " (" << row.at(0, "reason").value_or("") << ")";
      std::cout << std::endl;
      last = now;
    }
    if (state == "done") return kExitOk;
    if (state == "halted") return kExitProblem;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

int run_rollout(const RolloutOptions& options) {
  const auto target = resolve_fleet_target(options.target.config_file, options.target.state_db);
  if (!target) return problem("rollout", target.error().message, kExitUsage);
  auto stages = parse_rollout_stages(options.stages);
  if (!stages) return problem("rollout", stages.error().message, kExitUsage);
  auto dwell = parse_span(options.dwell);
  if (!dwell) return problem("rollout", "--dwell: " + dwell.error().message, kExitUsage);
  const auto real = [](double v) { return std::to_string(v); };
  const PgOutcome asked = pg_run_once(
      target->conninfo,
      {{"WITH started AS (INSERT INTO passepartout_rollouts (name, version, stages, state, dwell_ms, "
        "min_verifications, "
        "max_disagreements, max_failures, max_blocks, started_by) VALUES ($1, $2, $3, 'running', $4::bigint, "
        "$5::bigint, $6::float8, $7::float8, $8::float8, $9) RETURNING id), logged AS (INSERT INTO "
        "passepartout_rollout_events (rollout, node, event, detail) SELECT id, $9, 'start', $3 FROM started "
        "RETURNING rollout) SELECT rollout AS id, pg_notify('" +
            std::string(kRolloutChannel) + "', rollout::text) FROM logged",
        {options.name, options.version, options.stages, std::to_string(dwell->count()),
         std::to_string(options.min_verifications), real(options.max_disagreements), real(options.max_failures),
         real(options.max_blocks), "cli uid=" + std::to_string(::getuid())}}},
      kWait);
  if (!asked.ok()) {
    if (asked.error->sqlstate == "23505") {
      return problem("rollout", "a rollout of " + options.name +
                                    " is running already: wait for it, or stop it "
                                    "with `passepartout fleet halt " +
                                    options.name + "`");
    }
    if (asked.error->sqlstate == "23503") {
      return problem("rollout", "no release " + options.name + " " + options.version +
                                    " in the state database: publish it first (passepartout fleet publish MANIFEST)");
    }
    return problem("rollout", target->shown + ": " + asked.error->message);
  }
  const std::string id(asked.results[0].at(0, "id").value_or(""));
  std::cout << "Rollout #" << id << " of " << options.name << ' ' << options.version << " started: " << options.stages
            << " (each stage at least " << span_text(*dwell) << " and " << options.min_verifications
            << " verifications). passepartout fleet status shows where it stands.\n";
  if (!options.wait) return kExitOk;
  return follow(*target, id);
}

// --- halt -------------------------------------------------------------------------------------

int run_halt(const Target& target_options, const std::string& name, const std::string& reason) {
  const auto target = resolve_fleet_target(target_options.config_file, target_options.state_db);
  if (!target) return problem("halt", target.error().message, kExitUsage);
  const std::string why = reason.empty() ? "halted by an operator" : "halted by an operator: " + reason;
  const PgOutcome asked = pg_run_once(
      target->conninfo,
      {{"WITH halted AS (UPDATE passepartout_rollouts SET state = 'halted', finished_at = clock_timestamp(), reason = "
        "$2 WHERE name = $1 AND state = 'running' RETURNING id), logged AS (INSERT INTO passepartout_rollout_events "
        "(rollout, node, event, detail) SELECT id, $3, 'halt', $2 FROM halted RETURNING rollout) SELECT rollout AS "
        "id, pg_notify('" +
            std::string(kRolloutChannel) + "', rollout::text) FROM logged",
        {name, why, "cli uid=" + std::to_string(::getuid())}}},
      kWait);
  if (!asked.ok()) return problem("halt", target->shown + ": " + asked.error->message);
  if (asked.results[0].rows.empty()) return problem("halt", "no rollout of " + name + " is running");
  std::cout << "Rollout #" << asked.results[0].at(0, "id").value_or("") << " of " << name
            << " halted: its canaries go back to the version they ran, shadows stop.\n";
  return kExitOk;
}

}  // namespace

void add_fleet_release_commands(CLI::App& fleet, Runner& chosen) {
  auto key_out = std::make_shared<fs::path>();
  auto* keygen = fleet.add_subcommand(
      "keygen",
      "Make an Ed25519 key pair for signing releases: the private key into FILE (owner-only), the public\n"
      "key printed, to give every node as fleet_trusted_key:");
  keygen->add_option("FILE", *key_out, "Where to write the private key (must not exist)")->required();
  keygen->callback([&chosen, key_out] { chosen = [key_out] { return run_keygen(*key_out); }; });

  auto publish_options = std::make_shared<PublishOptions>();
  auto* publish = fleet.add_subcommand(
      "publish",
      "Store a skill's release in the state database: its manifest, its library's bytes and both\n"
      "SHA-256 digests, signed with --sign-key. Nodes load it only when a rollout asks, and only when\n"
      "the digests (and, on a node with fleet_trusted_key:, the signature) check.");
  publish->add_option("MANIFEST", publish_options->manifest, "The skill's manifest")->required();
  publish->add_option("LIBRARY", publish_options->library,
                      "Its library (default: the manifest's library: beside the manifest, or among the bundled ones)");
  publish->add_option("--sign-key", publish_options->sign_key, "Sign with this private key (fleet keygen)")
      ->type_name("FILE");
  publish->add_flag("--json", publish_options->json, "Print one JSON document");
  add_target_options(*publish, publish_options->target);
  publish->footer(
      "Exit status: 0 published (or already, with the same bytes); 1 refused or the database could not\n"
      "be written; 2 bad usage.");
  publish->callback(
      [&chosen, publish_options] { chosen = [publish_options] { return run_publish(*publish_options); }; });

  auto rollout_options = std::make_shared<RolloutOptions>();
  auto* rollout = fleet.add_subcommand(
      "rollout",
      "Move the fleet to a published release through stages: shadow (every node judges live traffic\n"
      "with the release beside the live version, never obeying it), then live on a stable share of the\n"
      "nodes (N%), then on all (100%). A stage ends once it has lasted --dwell, every live node has\n"
      "reported and it has seen --min-verifications; the rollout halts on its own, and its canaries\n"
      "go back to the version they ran, when a node refuses the release or a threshold is passed.");
  rollout->add_option("NAME", rollout_options->name, "The skill")->required();
  rollout->add_option("VERSION", rollout_options->version, "Its published version")->required();
  rollout->add_option("--stages", rollout_options->stages, "The stages (default shadow,10%,100%)")->type_name("LIST");
  rollout->add_option("--dwell", rollout_options->dwell, "How long each stage lasts at least (default 60s)")
      ->type_name("SPAN");
  rollout
      ->add_option("--min-verifications", rollout_options->min_verifications,
                   "Verifications each stage must see before the next (default 100)")
      ->type_name("N");
  rollout
      ->add_option("--max-disagreements", rollout_options->max_disagreements,
                   "Shadow disagreements with the live gate allowed, per thousand (default 0)")
      ->type_name("PER-1000")
      ->check(CLI::Range(0.0, 1000.0));
  rollout
      ->add_option("--max-failures", rollout_options->max_failures,
                   "Gate failures allowed on the nodes running it, per thousand verifications (default 1)")
      ->type_name("PER-1000")
      ->check(CLI::Range(0.0, 1000.0));
  rollout
      ->add_option("--max-blocks", rollout_options->max_blocks,
                   "Blocks allowed on the nodes running it, per thousand verifications (default 1000: any)")
      ->type_name("PER-1000")
      ->check(CLI::Range(0.0, 1000.0));
  rollout->add_flag("--wait", rollout_options->wait, "Follow it until it is done (exit 0) or halted (exit 1)");
  add_target_options(*rollout, rollout_options->target);
  rollout->callback(
      [&chosen, rollout_options] { chosen = [rollout_options] { return run_rollout(*rollout_options); }; });

  auto halt_target = std::make_shared<Target>();
  auto halt_name = std::make_shared<std::string>();
  auto halt_reason = std::make_shared<std::string>();
  auto* halt = fleet.add_subcommand("halt", "Halt a skill's running rollout: canaries go back, shadows stop");
  halt->add_option("NAME", *halt_name, "The skill")->required();
  halt->add_option("--reason", *halt_reason, "Why, for the audit")->type_name("TEXT");
  add_target_options(*halt, *halt_target);
  halt->callback([&chosen, halt_target, halt_name, halt_reason] {
    chosen = [halt_target, halt_name, halt_reason] { return run_halt(*halt_target, *halt_name, *halt_reason); };
  });
}

}  // namespace passepartout::cli

// A node's side of the fleet's rollouts: read, apply, report, judge.
#include "daemon/rollout_agent.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "base/file_io.hpp"
#include "base/log.hpp"
#include "daemon/fleet_rollout.hpp"
#include "skills/registry.hpp"
#include "skills/skill_host.hpp"
#include "skills/slot.hpp"
#include "store/pg_client.hpp"

namespace passepartout {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kComponent = "fleet";
constexpr std::chrono::milliseconds kWait{10000};

// bytea as PostgreSQL prints it by default ("\x" and hex digits).
std::optional<std::string> from_bytea(std::string_view text) {
  if (!text.starts_with("\\x") || text.size() % 2 != 0) return std::nullopt;
  std::string bytes;
  bytes.reserve((text.size() - 2) / 2);
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 2; i < text.size(); i += 2) {
    const int high = digit(text[i]);
    const int low = digit(text[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes += static_cast<char>(high * 16 + low);
  }
  return bytes;
}

enum class Role { none, shadow, live };

// What this node has done in a skill's latest rollout.
struct Local {
  std::int64_t rollout = 0;
  std::optional<SkillManifest> candidate;  // the release, checked and kept, ready to load
  std::optional<ReleaseRefusal> refused;
  Role role = Role::none;
  std::optional<SkillManifest> previous;  // the version live before the release was put live here
  bool rolled_back = false;
  ShadowCounts shadow_base;  // the skill's shadow counts when the release began to be shadowed
};

struct Rollout {
  std::int64_t id = 0;
  std::string name;
  std::string version;
  std::string state;
  RolloutFigures figures;
};

}  // namespace

struct RolloutAgent::State {
  State(PgClient& c, SkillHost& h, Options o) : client(c), host(h), options(std::move(o)) {}

  PgClient& client;
  SkillHost& host;
  Options options;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wake;
  bool woken = false;
  bool stopping = false;
  std::map<std::string, Local> locals;  // by skill name; the agent's thread alone

  std::string requester(std::int64_t id) const { return "fleet rollout #" + std::to_string(id); }

  PgOutcome ask(std::vector<PgStatement> statements) { return pg_wait(client, std::move(statements), kWait); }

  // The release `rollout` names, checked, written to the releases folder
  // and parsed: the manifest to load, or why this node refuses it.
  std::variant<SkillManifest, ReleaseRefusal> materialize(const Rollout& rollout) {
    PgOutcome asked =
        ask({{"SELECT manifest, library, manifest_sha256, library_sha256, signature FROM "
              "passepartout_releases WHERE name = $1 AND version = $2",
              {rollout.name, rollout.version}}});
    if (!asked.ok()) return ReleaseRefusal{"fetch", asked.error->message};
    const PgRows& rows = asked.results[0];
    if (rows.rows.empty()) return ReleaseRefusal{"fetch", "no such release"};
    FleetRelease release;
    release.name = rollout.name;
    release.version = rollout.version;
    release.manifest = std::string(rows.at(0, "manifest").value_or(""));
    auto library = from_bytea(rows.at(0, "library").value_or(""));
    if (!library) return ReleaseRefusal{"fetch", "the library's bytes came back malformed"};
    release.library = std::move(*library);
    release.manifest_sha256 = std::string(rows.at(0, "manifest_sha256").value_or(""));
    release.library_sha256 = std::string(rows.at(0, "library_sha256").value_or(""));
    release.signature = std::string(rows.at(0, "signature").value_or(""));
    if (auto refusal = check_release(release, options.trusted_key)) return *refusal;

    // The manifest first: its name and version (which it checks: a name is
    // letters, digits and '-') are what the folder is named by, never the
    // row's text, which could name a path anywhere.
    const std::string key = release.library_sha256.substr(0, 12);
    auto manifest = SkillManifest::parse(release.manifest, fs::path("release") / rollout.name / "manifest.yaml");
    if (!manifest) return ReleaseRefusal{"manifest", manifest.error().message};
    const std::string version = manifest->version.to_string();
    if (manifest->name != rollout.name || version != rollout.version) {
      return ReleaseRefusal{"manifest", "the manifest is " + manifest->name + " " + version + ", not the release's " +
                                            rollout.name + " " + rollout.version};
    }
    const fs::path dir = options.releases_dir / manifest->name / (version + "-" + key);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return ReleaseRefusal{"store", "cannot create " + dir.string() + ": " + ec.message()};
    ::chmod(options.releases_dir.c_str(), 0700);
    manifest->path = dir / "manifest.yaml";
    if (auto written = write_file_durably(dir / "manifest.yaml", release.manifest, 0600); !written) {
      return ReleaseRefusal{"store", written.error().message};
    }
    if (auto written = write_file_durably(dir / manifest->library, release.library, 0600); !written) {
      return ReleaseRefusal{"store", written.error().message};
    }
    // The loader checks the bytes against the published digest once more,
    // in its private copy: what runs is what was published.
    manifest->library_dir = dir;
    manifest->sha256 = release.library_sha256;
    return std::move(*manifest);
  }

  // Makes this node what `want` says for the rollout's skill.
  void apply(const Rollout& rollout, Local& local, Role want) {
    const std::string who = requester(rollout.id);
    const auto failed = [&](const ChangeResult& change) {
      local.refused = ReleaseRefusal{change.change.step.empty() ? "load" : change.change.step, change.change.error};
      log_message(LogLevel::warn, kComponent, "rollout #{}: {} {} not applied here: {}", rollout.id, rollout.name,
                  rollout.version, change.change.error);
    };
    if (want == local.role) return;
    if (local.role == Role::shadow) {
      host.shadow_stop(rollout.name, who);
      local.role = Role::none;
    }
    if (want == Role::shadow && local.role == Role::none) {
      local.shadow_base = host.shadow_counts()[rollout.name];
      const ChangeResult started = host.shadow(*local.candidate, who);
      if (started.ok()) {
        local.role = Role::shadow;
      } else {
        failed(started);
      }
      return;
    }
    if (want == Role::live && local.role == Role::none) {
      const std::shared_ptr<const Snapshot> snapshot = host.snapshot();
      const Slot* live = snapshot->find(rollout.name);
      if (live != nullptr && live->version_text() == rollout.version &&
          live->library_sha256() == local.candidate->sha256.value_or("")) {
        local.role = Role::live;  // it runs these very bytes already
        return;
      }
      if (live != nullptr) local.previous = live->manifest();
      const ChangeResult put = live != nullptr ? host.swap(*local.candidate, who) : host.add(*local.candidate, who);
      if (put.ok()) {
        local.role = Role::live;
      } else {
        local.previous.reset();
        failed(put);
      }
      return;
    }
    if (want == Role::none && local.role == Role::live) {
      // Rolled back: the version live before, or none when there was none.
      if (local.previous) {
        const ChangeResult back = host.swap(*local.previous, who);
        if (!back.ok()) {
          log_message(LogLevel::error, kComponent, "rollout #{}: {} could not be rolled back to {}: {}", rollout.id,
                      rollout.name, local.previous->version.to_string(), back.change.error);
          return;
        }
      } else {
        host.remove(rollout.name, RemoveMode::refuse_if_needed, who);
      }
      local.role = Role::none;
      local.rolled_back = true;
    }
  }

  // This node's row for the rollout: what it did and the stage's figures.
  void report(const Rollout& rollout, const Local& local) {
    std::string state = "kept";
    std::string step;
    std::string error;
    std::uint64_t verifications = 0;
    std::uint64_t disagreements = 0;
    std::uint64_t failures = 0;
    std::uint64_t blocks = 0;
    if (local.refused) {
      state = "refused";
      step = local.refused->step;
      error = local.refused->error;
    } else if (local.role == Role::shadow) {
      state = "shadowing";
      const ShadowCounts now = host.shadow_counts()[rollout.name];
      verifications = now.seen - local.shadow_base.seen;
      disagreements = now.disagreements() - local.shadow_base.disagreements();
    } else if (local.role == Role::live) {
      state = "live";
      const std::shared_ptr<const Snapshot> snapshot = host.snapshot();
      if (const Slot* live = snapshot->find(rollout.name); live != nullptr) {
        const GateCounts counts = live->counters().read();
        verifications = counts.calls();
        failures = counts.failures;
        blocks = counts.blocks;
      }
    } else if (local.rolled_back) {
      state = "rolled-back";
    }
    const auto n = [](std::uint64_t v) { return std::to_string(v); };
    ask(
        {{"INSERT INTO passepartout_rollout_reports (rollout, node, stage, state, step, error, verifications, "
          "disagreements, failures, blocks) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (rollout, "
          "node) DO UPDATE SET stage = EXCLUDED.stage, state = EXCLUDED.state, step = EXCLUDED.step, error = "
          "EXCLUDED.error, verifications = EXCLUDED.verifications, disagreements = EXCLUDED.disagreements, failures = "
          "EXCLUDED.failures, blocks = EXCLUDED.blocks, updated_at = now()",
          {std::to_string(rollout.id), options.node, std::to_string(rollout.figures.stage), state, step, error,
           n(verifications), n(disagreements), n(failures), n(blocks)}}});
  }

  // Every node's reports of the stage, judged; the verdict written by a
  // conditional update (the first node to get there), with its event.
  void judge(const Rollout& rollout, const std::vector<std::string>& alive) {
    PgOutcome asked =
        ask({{"SELECT node, state, step, error, verifications, disagreements, failures, blocks FROM "
              "passepartout_rollout_reports WHERE rollout = $1 AND (stage = $2 OR state = 'refused')",
              {std::to_string(rollout.id), std::to_string(rollout.figures.stage)}}});
    if (!asked.ok()) return;
    const PgRows& rows = asked.results[0];
    std::vector<RolloutReport> reports;
    for (std::size_t i = 0; i < rows.rows.size(); ++i) {
      RolloutReport r;
      r.node = std::string(rows.at(i, "node").value_or(""));
      r.state = std::string(rows.at(i, "state").value_or(""));
      r.step = std::string(rows.at(i, "step").value_or(""));
      r.error = std::string(rows.at(i, "error").value_or(""));
      r.verifications = static_cast<std::uint64_t>(rows.integer(i, "verifications"));
      r.disagreements = static_cast<std::uint64_t>(rows.integer(i, "disagreements"));
      r.failures = static_cast<std::uint64_t>(rows.integer(i, "failures"));
      r.blocks = static_cast<std::uint64_t>(rows.integer(i, "blocks"));
      reports.push_back(std::move(r));
    }
    const RolloutVerdict verdict = judge_rollout(rollout.figures, alive, reports);
    std::string change;
    std::string event;
    switch (verdict.kind) {
      case RolloutVerdict::Kind::hold:
        return;
      case RolloutVerdict::Kind::advance:
        change = "stage = stage + 1, stage_started_at = clock_timestamp()";
        event = "advance";
        break;
      case RolloutVerdict::Kind::done:
        change = "state = 'done', finished_at = clock_timestamp(), reason = $4";
        event = "done";
        break;
      case RolloutVerdict::Kind::halt:
        change = "state = 'halted', finished_at = clock_timestamp(), reason = $4";
        event = "halt";
        break;
    }
    PgOutcome written =
        ask({{"WITH moved AS (UPDATE passepartout_rollouts SET " + change +
                  " WHERE id = $1 AND stage = $2 AND state = 'running' RETURNING id), logged AS (INSERT INTO "
                  "passepartout_rollout_events (rollout, node, event, detail) SELECT id, $3, '" +
                  event + "', $4 FROM moved RETURNING rollout) SELECT pg_notify('" + std::string(kRolloutChannel) +
                  "', rollout::text) FROM logged",
              {std::to_string(rollout.id), std::to_string(rollout.figures.stage), options.node, verdict.why}}});
    if (written.ok() && !written.results[0].rows.empty()) {
      log_message(verdict.kind == RolloutVerdict::Kind::halt ? LogLevel::warn : LogLevel::info, kComponent,
                  "rollout #{} of {} {}: {} ({})", rollout.id, rollout.name, rollout.version, event, verdict.why);
    }
  }

  // Row `i` of a rollouts query; nullopt when its stages do not parse
  // (written by something other than `fleet rollout`: left alone).
  static std::optional<Rollout> rollout_of(const PgRows& rows, std::size_t i) {
    Rollout rollout;
    rollout.id = rows.integer(i, "id");
    rollout.name = std::string(rows.at(i, "name").value_or(""));
    rollout.version = std::string(rows.at(i, "version").value_or(""));
    rollout.state = std::string(rows.at(i, "state").value_or(""));
    auto stages = parse_rollout_stages(rows.at(i, "stages").value_or(""));
    if (!stages) return std::nullopt;
    rollout.figures.stages = std::move(*stages);
    rollout.figures.stage = static_cast<std::size_t>(rows.integer(i, "stage"));
    rollout.figures.stage_ms = rows.integer(i, "stage_ms");
    rollout.figures.dwell_ms = rows.integer(i, "dwell_ms");
    rollout.figures.min_verifications = static_cast<std::uint64_t>(rows.integer(i, "min_verifications"));
    const auto real = [&](const char* column) { return std::stod(std::string(rows.at(i, column).value_or("0"))); };
    rollout.figures.max_disagreements = real("max_disagreements");
    rollout.figures.max_failures = real("max_failures");
    rollout.figures.max_blocks = real("max_blocks");
    return rollout;
  }

  void tick() {
    static constexpr std::string_view kColumns =
        "id, name, version, stages, stage, state, dwell_ms, min_verifications, max_disagreements, max_failures, "
        "max_blocks, (extract(epoch FROM clock_timestamp() - stage_started_at) * 1000)::bigint AS stage_ms";
    PgOutcome asked = ask(
        {{"SELECT DISTINCT ON (name) " + std::string(kColumns) + " FROM passepartout_rollouts ORDER BY name, id DESC",
          {}},
         {"SELECT DISTINCT ON (name) " + std::string(kColumns) +
              " FROM passepartout_rollouts WHERE state = 'done' ORDER BY name, id DESC",
          {}},
         {"SELECT node FROM passepartout_nodes WHERE seen_at > clock_timestamp() - $1::bigint * interval '1 "
          "millisecond' ORDER BY node",
          {std::to_string(options.lease.count())}}});
    if (!asked.ok()) return;  // the database is away: nothing changes here meanwhile
    std::vector<std::string> alive;
    for (std::size_t i = 0; i < asked.results[2].rows.size(); ++i) {
      alive.emplace_back(asked.results[2].at(i, "node").value_or(""));
    }
    if (std::find(alive.begin(), alive.end(), options.node) == alive.end()) alive.push_back(options.node);
    std::map<std::string, Rollout> done;
    for (std::size_t i = 0; i < asked.results[1].rows.size(); ++i) {
      if (auto rollout = rollout_of(asked.results[1], i)) done.emplace(rollout->name, std::move(*rollout));
    }
    const PgRows& rows = asked.results[0];
    for (std::size_t i = 0; i < rows.rows.size(); ++i) {
      auto rollout = rollout_of(rows, i);
      if (!rollout) continue;
      // A halted rollout this node took no part in (it started since, say)
      // leaves the skill as the last finished one made it.
      if (rollout->state == "halted" && locals[rollout->name].rollout != rollout->id) {
        if (auto last = done.find(rollout->name); last != done.end()) step(last->second, alive);
        continue;
      }
      step(*rollout, alive);
    }
    // Which versions this node runs, for fleet status.
    std::string skills;
    for (const auto& slot : host.snapshot()->slots()) {
      if (!skills.empty()) skills += ',';
      skills += slot->name() + "@" + slot->version_text();
    }
    ask({{"UPDATE passepartout_nodes SET skills = $2 WHERE node = $1", {options.node, skills}}});
  }

  void step(const Rollout& rollout, const std::vector<std::string>& alive) {
    Local& local = locals[rollout.name];
    const bool fresh = local.rollout != rollout.id;
    if (fresh) {
      if (rollout.state == "halted") return;  // nothing of it was ever here
      local = Local{};
      local.rollout = rollout.id;
    }
    Role want = Role::none;
    if (rollout.state == "done") {
      want = Role::live;
    } else if (rollout.state == "running" && rollout.figures.stage < rollout.figures.stages.size()) {
      const RolloutStage& stage = rollout.figures.stages[rollout.figures.stage];
      if (stage.shadow) {
        want = Role::shadow;
      } else {
        const auto canaries = canary_nodes(alive, rollout.name + "@" + rollout.version, stage.percent);
        // A canary stays one for the rest of the rollout: a node that misses
        // a heartbeat changes who is alive, and with it the chosen set, and
        // a release must not come and go with that.
        if (local.role == Role::live || std::find(canaries.begin(), canaries.end(), options.node) != canaries.end()) {
          want = Role::live;
        }
      }
    }
    if (want != Role::none && !local.candidate && !local.refused) {
      auto made = materialize(rollout);
      if (auto* refusal = std::get_if<ReleaseRefusal>(&made)) {
        log_message(LogLevel::warn, kComponent, "rollout #{}: {} {} refused here at its {}: {}", rollout.id,
                    rollout.name, rollout.version, refusal->step, refusal->error);
        local.refused = *refusal;
      } else {
        local.candidate = std::move(std::get<SkillManifest>(made));
      }
    }
    const Role before = local.role;
    apply(rollout, local, local.refused ? Role::none : want);
    if (rollout.state == "running" || local.role != before || fresh) report(rollout, local);
    if (rollout.state == "running") judge(rollout, alive);
  }

  void run() {
    for (;;) {
      {
        std::unique_lock lock(mutex);
        wake.wait_for(lock, options.poll, [&] { return woken || stopping; });
        woken = false;
        if (stopping) return;
      }
      tick();
    }
  }

  void nudge() {
    {
      const std::lock_guard guard(mutex);
      woken = true;
    }
    wake.notify_one();
  }
};

RolloutAgent::RolloutAgent(PgClient& client, SkillHost& host, Options options)
    : state_(std::make_shared<State>(client, host, std::move(options))) {}

RolloutAgent::~RolloutAgent() { stop(); }

void RolloutAgent::start() {
  if (state_->thread.joinable()) return;
  std::weak_ptr<State> weak = state_;
  state_->client.listen(kRolloutChannel, [weak](std::string_view) {
    if (auto state = weak.lock()) state->nudge();
  });
  state_->client.on_connected([weak] {
    if (auto state = weak.lock()) state->nudge();
  });
  state_->nudge();
  state_->thread = std::thread([state = state_] { state->run(); });
}

void RolloutAgent::stop() {
  {
    const std::lock_guard guard(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

}  // namespace passepartout

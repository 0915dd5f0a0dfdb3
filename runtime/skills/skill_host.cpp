// SkillHost: the swap, add, remove, reload and rescan procedures, each a
// sequence of named steps that either all succeed and publish, or leave the
// published snapshot untouched and say which step failed.
#include "skills/skill_host.hpp"

#include <array>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

#include "base/ascii.hpp"
#include "base/duration_text.hpp"
#include "base/log.hpp"
#include "base/log_fields.hpp"
#include "skills/dependency_graph.hpp"
#include "skills/elf_inspector.hpp"
#include "skills/skill_fingerprint.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMemoryLogLimit = 1000;

std::int64_t micros_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

SkillChange begin_change(std::string_view action, std::string_view skill, std::string_view requester) {
  SkillChange change;
  change.at_unix_ms = unix_ms_now();
  change.action = std::string(action);
  change.skill = std::string(skill);
  change.requester = std::string(requester);
  return change;
}

// "refused": a check said no (dependencies, ABI, pins, permissions);
// "failed": the skill's own code did (create, self-test, state hand-over).
ChangeResult finish(SkillChange change, std::string_view step, const Error& error, Clock::time_point start) {
  change.outcome = error.code == ErrorCode::failed ? "failed" : "refused";
  change.step = std::string(step);
  change.error = error.message;
  change.duration_us = micros_since(start);
  return ChangeResult{std::move(change), -1};
}

std::vector<std::shared_ptr<const Slot>> current_slots(const Snapshot& snapshot) {
  return {snapshot.slots().begin(), snapshot.slots().end()};
}

// The new skill's own dependencies and guards, against what is loaded (minus `replacing`).
Result<void> check_dependencies(const SkillManifest& manifest, const Snapshot& snapshot) {
  for (const Dependency* dep : manifest.requirements()) {
    const Slot* provider = snapshot.find(dep->name);
    if (provider == nullptr || provider->name() == manifest.name) {
      return fail(ErrorCode::refused, "skill '" + manifest.name + "' " + dep->verb() + " '" + dep->name +
                                          "', which is not loaded; load it first");
    }
    if (!dep->constraint.matches(provider->manifest().version)) {
      return fail(ErrorCode::refused, "skill '" + manifest.name + "' requires '" + dep->text + "', but " + dep->name +
                                          " " + provider->version_text() + " is loaded");
    }
  }
  return {};
}

// Loaded skills whose declared constraint on `manifest.name` the new version would violate.
Result<void> check_dependents(const SkillManifest& manifest, const Snapshot& snapshot) {
  for (const auto& slot : snapshot.slots()) {
    for (const Dependency* dep : slot->manifest().requirements()) {
      if (dep->name == manifest.name && !dep->constraint.matches(manifest.version)) {
        return fail(ErrorCode::refused, "swapping '" + manifest.name + "' to " + manifest.version.to_string() +
                                            " would break '" + slot->name() + "', which requires '" + dep->text +
                                            "'; update " + slot->name() + " first");
      }
    }
  }
  return {};
}

// A guard's new version must still be a gate: the skills it guards would
// otherwise be left without it.
Result<void> check_still_guards(const Slot& next, const Snapshot& snapshot) {
  if (next.has_gate()) return {};
  for (const auto& slot : snapshot.slots()) {
    for (const Dependency& guard : slot->manifest().guarded_by) {
      if (guard.name == next.name()) {
        return fail(ErrorCode::refused, "skill '" + next.name() + "' " + next.version_text() +
                                            " has no gate, and it guards '" + slot->name() + "' (" +
                                            slot->offers_text() + "); keep a gate in it");
      }
    }
  }
  return {};
}

// The model calls a tool and an actuator alike by name (the actuator's in
// lower case): a name that is both, in one skill or across two, could not be
// told apart, so the skill that would bring the second one is refused. The
// loaded version of the same skill (a swap) does not count.
Result<void> check_function_names(const Slot& next, const Snapshot& snapshot) {
  auto clash = [](const Slot& tools_of, const Slot& actuators_of) -> std::optional<std::string> {
    for (const SkillTool& tool : tools_of.tools()) {
      for (const std::string& actuator : actuators_of.actuators()) {
        if (ascii_lower(actuator) != tool.name) continue;
        return "the tool '" + tool.name + "' of skill '" + tools_of.name() +
               "' has the name of the actuator :" + actuator + " of skill '" + actuators_of.name() +
               "', and a model calls both by it; rename one";
      }
    }
    return std::nullopt;
  };
  if (auto found = clash(next, next)) return fail(ErrorCode::refused, *found);
  for (const auto& slot : snapshot.slots()) {
    if (slot->name() == next.name()) continue;
    if (auto found = clash(next, *slot)) return fail(ErrorCode::refused, *found);
    if (auto found = clash(*slot, next)) return fail(ErrorCode::refused, *found);
  }
  return {};
}

// Hands the old instance's state to the new one when both take part; what
// happened, for the audit log: "<n> bytes" (the state's printed size), or
// why nothing was handed over ("skipped: no export hook").
Result<void> hand_over_state(const Slot& from, Slot& to, std::string& described) {
  if (!from.exports_state()) {
    described = to.imports_state() ? "skipped: no export hook" : "skipped: no export or import hook";
    return {};
  }
  if (!to.imports_state()) {
    described = "skipped: no import hook";
    return {};
  }
  Result<Value> exported = from.export_state();
  if (!exported) {
    described = "export refused: " + exported.error().message;
    return fail(ErrorCode::failed, "skill '" + from.name() + "' " + from.version_text() +
                                       " could not export its state: " + exported.error().message);
  }
  if (auto imported = to.import_state(*exported); !imported) {
    described = "import refused: " + imported.error().message;
    return fail(ErrorCode::failed, "skill '" + to.name() + "' " + to.version_text() +
                                       " could not import the state of " + from.version_text() + ": " +
                                       imported.error().message);
  }
  described = std::to_string(to_sexp(*exported).size()) + " bytes";
  return {};
}

// Whether `loaded` still matches what the manifest folder says (the library
// bytes are compared by hash by the caller).
bool same_settings(const SkillManifest& a, const SkillManifest& b) {
  auto deps = [](const SkillManifest& m) {
    std::vector<std::string> texts;
    for (const auto& d : m.depends_on) texts.push_back(d.text);
    texts.emplace_back("|");  // depends_on and guarded_by are different lists
    for (const auto& g : m.guarded_by) texts.push_back(g.text);
    return texts;
  };
  return a.version == b.version && a.library == b.library && a.priority == b.priority && a.abi.major == b.abi.major &&
         a.abi.minor == b.abi.minor && deps(a) == deps(b) && a.trigger.sensors == b.trigger.sensors &&
         a.trigger.always == b.trigger.always && a.config == b.config && a.sha256 == b.sha256 &&
         a.never_unload == b.never_unload && a.gate_timeout == b.gate_timeout;
}

}  // namespace

Result<std::unique_ptr<SkillHost>> SkillHost::create(SkillHostOptions options) {
  std::unique_ptr<AuditLog> audit;
  if (!options.audit_file.empty()) {
    auto opened = AuditLog::open(options.audit_file);
    if (!opened) return fail(opened.error().code, opened.error().message);
    audit = std::move(*opened);
  }
  LoaderOptions loader_options;
  loader_options.plugin_dir = options.plugin_dir;
  loader_options.check_permissions = options.check_permissions;
  loader_options.workspace = options.workspace;
  loader_options.worker_executable = options.worker_executable;
  loader_options.call_budget = options.call_budget;
  loader_options.gate_timeout_max = options.gate_timeout_max;
  auto loader = SkillLoader::create(std::move(loader_options));
  if (!loader) return fail(loader.error().code, loader.error().message);
  return std::unique_ptr<SkillHost>(new SkillHost(std::move(options), std::move(*loader), std::move(audit)));
}

SkillHost::SkillHost(SkillHostOptions options, SkillLoader loader, std::unique_ptr<AuditLog> audit)
    : options_(std::move(options)), loader_(std::move(loader)), audit_(std::move(audit)) {
  loader_.set_retire_queue(control_.queue());
  // A skill whose worker process died too often is recorded as every change
  // is, on the control thread (the report comes from whichever thread saw the death).
  loader_.set_on_quarantine([this, queue = control_.queue()](const std::string& skill, const std::string& reason) {
    queue->post([this, skill, reason] {
      SkillChange change;
      change.requester = "worker";
      change.action = "quarantine";
      change.skill = skill;
      change.outcome = "failed";
      change.step = "quarantine";
      change.error = reason;
      record(change);
    });
  });
}

SkillHost::~SkillHost() {
  // Retire every slot on the control thread while it still runs.
  control_.run([this] { registry_.publish({}); });
}

ChangeResult SkillHost::refuse(SkillChange change, std::string_view step, const Error& error, TimePoint start) {
  ChangeResult result = finish(std::move(change), step, error, start);
  record(result.change);
  return result;
}

// The steps a new slot goes through before anything is published: load
// (private copy and checks), create, self-test. Returns the slot and the time
// the skill's own code took (create and self-test), or the failing step.
Result<SkillHost::NewSlot> SkillHost::prepare(const SkillManifest& manifest, SkillChange& change, std::string& step) {
  step = "load";
  auto opened = loader_.open(manifest);
  if (!opened) {
    if (auto hash = sha256_file(loader_.library_path(manifest))) change.to_sha256 = *hash;
    return fail(opened.error().code, opened.error().message);
  }
  std::shared_ptr<Slot> slot = std::move(*opened);
  change.to_sha256 = slot->library_sha256();
  change.to_fingerprint = skill_fingerprint(slot->manifest(), slot->config());
  const auto skill_start = Clock::now();  // the skill's own time, not the host's
  step = "create";
  if (auto ok = slot->create_instance(); !ok) return fail(ok.error().code, ok.error().message);
  step = "self-test";
  if (auto ok = slot->self_test(); !ok) return fail(ok.error().code, ok.error().message);
  return NewSlot{std::move(slot), micros_since(skill_start)};
}

namespace {
constexpr std::array<std::string_view, 10> kChangeKindNames{
    "load", "swap", "add", "remove", "force-remove", "shadow", "shadow-stop", "promote", "quarantine", "other"};
constexpr std::array<std::string_view, 4> kChangeOutcomeNames{"ok", "refused", "failed", "other"};

template <std::size_t N>
std::size_t index_in(const std::array<std::string_view, N>& names, std::string_view value) {
  for (std::size_t i = 0; i + 1 < N; ++i) {
    if (names[i] == value) return i;
  }
  return N - 1;
}
}  // namespace

std::span<const std::string_view> SkillHost::change_kinds() noexcept { return kChangeKindNames; }
std::span<const std::string_view> SkillHost::change_outcomes() noexcept { return kChangeOutcomeNames; }

std::uint64_t SkillHost::change_count(std::size_t kind, std::size_t outcome) const noexcept {
  if (kind >= kChangeKinds || outcome >= kChangeOutcomes) return 0;
  return change_counts_[kind * kChangeOutcomes + outcome].load(std::memory_order_relaxed);
}

void SkillHost::record(SkillChange& change) { record_all(std::span<SkillChange>(&change, 1)); }

void SkillHost::record_external(SkillChange change) {
  control_.post([this, change = std::move(change)]() mutable { record(change); });
}

void SkillHost::record_all(std::span<SkillChange> changes) {
  if (changes.empty()) return;
  static_assert(kChangeKindNames.size() == kChangeKinds && kChangeOutcomeNames.size() == kChangeOutcomes);
  for (const SkillChange& change : changes) {
    const std::size_t cell =
        index_in(kChangeKindNames, change.action) * kChangeOutcomes + index_in(kChangeOutcomeNames, change.outcome);
    change_counts_[cell].fetch_add(1, std::memory_order_relaxed);
  }
  if (audit_) {
    // One transaction, so one sync, however many changes happened at once.
    auto ids = audit_->record_all(changes);
    if (ids) {
      for (std::size_t i = 0; i < changes.size(); ++i) changes[i].id = (*ids)[i];
    } else {
      log_message(LogLevel::error, "skills", "could not record a skill change: {}", ids.error().message);
    }
  } else {
    for (SkillChange& change : changes) {
      change.id = memory_log_.empty() ? 1 : memory_log_.front().id + 1;
      memory_log_.push_front(change);
      if (memory_log_.size() > kMemoryLogLimit) memory_log_.pop_back();
    }
  }
  for (const SkillChange& change : changes) {
    const bool ok = change.outcome == "ok";
    std::string line = change.action + " '" + change.skill + "'";
    if (!change.from_version.empty() || !change.to_version.empty()) {
      line += " " + (change.from_version.empty() ? std::string("-") : change.from_version) + " -> " +
              (change.to_version.empty() ? std::string("-") : change.to_version);
    }
    line += ": " + change.outcome + (ok ? "" : " at " + change.step + ": " + change.error) + " (" + change.requester +
            ", " + std::to_string(change.duration_us) + " us)";
    if (!change.details.empty()) line += "; changed: " + change.details;
    if (!change.state_handover.empty()) line += "; state: " + change.state_handover;
    const std::string& version = change.to_version.empty() ? change.from_version : change.to_version;
    const LogField fields[] = {{"skill", change.skill},
                               {"version", version},
                               {"action", change.action},
                               {"outcome", change.outcome},
                               {"change_id", change.id}};
    log_message(ok ? LogLevel::info : LogLevel::warn, "skills", fields, line);
  }
}

BootResult SkillHost::boot(std::string_view requester, const CrashRecord* crashed) {
  return control_.run([&] {
    auto start = Clock::now();
    auto set = load_manifest_dir(options_.manifest_dir);
    if (!set) {
      BootResult empty;
      empty.manifest_errors.push_back(set.error());
      return empty;
    }
    // The skills held back after a crash (the previous run's, and those held
    // before), while their libraries have the bytes that crashed.
    std::vector<CrashRecord> records;
    if (!options_.held_file.empty()) records = read_held_skills(options_.held_file);
    if (crashed != nullptr) {
      std::erase_if(records, [&](const CrashRecord& r) { return r.skill == crashed->skill; });
      records.push_back(*crashed);
    }
    std::map<std::string, std::string> held;
    std::map<std::string, CrashRecord> kept;
    for (const CrashRecord& record : records) {
      auto found = std::find_if(set->manifests.begin(), set->manifests.end(),
                                [&](const SkillManifest& m) { return m.name == record.skill; });
      if (found == set->manifests.end()) {
        // Its manifest was removed: an operator's decision; a manifest put back is loaded as usual.
        log_message(LogLevel::info, "skills", "skill '{}' {} {}; no manifest names it now: no longer held back",
                    record.skill, record.version, record.what());
      } else if (auto hash = sha256_file(loader_.library_path(*found)); hash && *hash == record.sha256) {
        held.emplace(record.skill, record.hold_reason());
        kept.emplace(record.skill, record);
      } else {
        log_message(LogLevel::warn, "skills",
                    "skill '{}' {} {}; its library changed since (sha256 {} now, {} then): loading it", record.skill,
                    record.version, record.what(), hash ? hash->substr(0, 12) : std::string("unreadable"),
                    record.sha256.substr(0, 12));
      }
    }
    {
      std::lock_guard lock(held_mutex_);
      held_back_ = kept;
      save_held_locked();
    }
    BootResult booted = boot_skills(std::move(set->manifests), loader_, held);
    booted.manifest_errors = std::move(set->errors);
    for (const auto& manifest : booted.manifests) manifest_paths_[manifest.name] = manifest.path;
    registry_.publish(booted.slots);
    std::vector<SkillChange> changes;
    changes.reserve(booted.slots.size() + booted.disabled.size());
    for (const auto& slot : booted.slots) {
      SkillChange& change = changes.emplace_back(begin_change("load", slot->name(), requester));
      change.to_version = slot->version_text();
      change.to_sha256 = slot->library_sha256();
      change.outcome = "ok";
      change.duration_us = micros_since(start);
    }
    for (const auto& disabled : booted.disabled) {
      SkillChange& change = changes.emplace_back(begin_change("load", disabled.name, requester));
      change.outcome = "refused";
      change.step = held.count(disabled.name) != 0 ? "crash" : "load";
      change.error = disabled.reason;
      change.duration_us = micros_since(start);
      if (auto record = kept.find(disabled.name); record != kept.end() && held.count(disabled.name) != 0) {
        change.to_version = record->second.version;
        change.to_sha256 = record->second.sha256;
      }
    }
    record_all(changes);
    return booted;
  });
}

std::vector<std::string> SkillHost::held_back() const {
  std::lock_guard lock(held_mutex_);
  std::vector<std::string> names;
  for (const auto& [name, record] : held_back_) names.push_back(name);
  return names;
}

void SkillHost::save_held_locked() {
  if (options_.held_file.empty()) return;
  std::vector<CrashRecord> records;
  for (const auto& [name, record] : held_back_) records.push_back(record);
  if (auto saved = write_held_skills(options_.held_file, records); !saved) {
    log_message(LogLevel::error, "skills", "the skills held back after a crash are not kept for the next start: {}",
                saved.error().message);
  }
}

// NOLINTNEXTLINE(bugprone-exception-escape): a hot swap, not std::swap; it may throw
ChangeResult SkillHost::swap(const SkillManifest& next, std::string_view requester) {
  const auto requested = Clock::now();
  return control_.run([&] { return swap_now(next, requester, requested); });
}

ChangeResult SkillHost::add(const SkillManifest& manifest, std::string_view requester) {
  const auto requested = Clock::now();
  return control_.run([&] { return add_now(manifest, requester, requested); });
}

std::vector<ChangeResult> SkillHost::remove(std::string_view name, RemoveMode mode, std::string_view requester) {
  return control_.run([&] { return remove_now(name, mode, requester); });
}

RescanResult SkillHost::rescan(std::string_view requester) {
  return control_.run([&] { return rescan_now(requester); });
}

ChangeResult SkillHost::reload(std::string_view name, std::string_view requester) {
  return control_.run([&]() -> ChangeResult {
    auto start = Clock::now();
    SkillChange change = begin_change("swap", name, requester);
    auto known = manifest_paths_.find(std::string(name));
    fs::path path =
        known != manifest_paths_.end() ? known->second : options_.manifest_dir / (std::string(name) + ".yaml");
    auto manifest = SkillManifest::load(path);
    if (!manifest) {
      return refuse(std::move(change), "manifest", manifest.error(), start);
    }
    if (manifest->name != name) {
      return refuse(std::move(change), "manifest",
                    Error{ErrorCode::refused,
                          path.string() + " now names skill '" + manifest->name + "', not '" + std::string(name) + "'"},
                    start);
    }
    manifest_paths_[manifest->name] = manifest->path;
    return registry_.snapshot()->find(name) != nullptr ? swap_now(*manifest, requester, start)
                                                       : add_now(*manifest, requester, start);
  });
}

ChangeResult SkillHost::swap_now(const SkillManifest& next, std::string_view requester, TimePoint start,
                                 const Promotion* promotion) {
  SkillChange change = begin_change(promotion != nullptr ? "promote" : "swap", next.name, requester);
  if (promotion != nullptr) change.detail = promotion->detail;
  change.to_version = next.version.to_string();
  auto snapshot = registry_.snapshot();

  const Slot* old = snapshot->find(next.name);
  if (old == nullptr) {
    return refuse(std::move(change), "manifest",
                  Error{ErrorCode::refused, "skill '" + next.name + "' is not loaded; add it instead"}, start);
  }
  change.from_version = old->version_text();
  change.from_sha256 = old->library_sha256();
  change.from_fingerprint = skill_fingerprint(old->manifest(), old->config());

  if (auto ok = check_dependencies(next, *snapshot); !ok) {
    return refuse(std::move(change), "dependencies", ok.error(), start);
  }
  if (auto ok = check_dependents(next, *snapshot); !ok) {
    return refuse(std::move(change), "dependencies", ok.error(), start);
  }

  std::string step;
  auto prepared = prepare(next, change, step);
  if (!prepared) return refuse(std::move(change), step, prepared.error(), start);
  std::shared_ptr<Slot> slot = std::move(prepared->slot);
  const auto skill_us = prepared->skill_us;
  if (promotion != nullptr && slot->library_sha256() != promotion->sha256) {
    return refuse(std::move(change), "load",
                  Error{ErrorCode::refused, "the library of skill '" + next.name + "' changed since its candidate " +
                                                "was shadowed (sha256 " + promotion->sha256 + ", now " +
                                                slot->library_sha256() + "); shadow it again"},
                  start);
  }
  if (auto ok = check_still_guards(*slot, *snapshot); !ok) {
    return refuse(std::move(change), "guards", ok.error(), start);
  }
  if (auto ok = check_function_names(*slot, *snapshot); !ok) {
    return refuse(std::move(change), "names", ok.error(), start);
  }

  change.details = describe_settings_change(old->manifest(), old->config(), slot->manifest(), slot->config());
  if (auto ok = hand_over_state(*old, *slot, change.state_handover); !ok) {
    return refuse(std::move(change), "state", ok.error(), start);
  }

  auto slots = current_slots(*snapshot);
  std::replace_if(
      slots.begin(), slots.end(), [&](const std::shared_ptr<const Slot>& s) { return s.get() == old; }, slot);
  publish_slots(std::move(slots), requester);
  const auto publish_us = micros_since(start) - skill_us;
  // The old version's decisions count towards the skill's totals (signals
  // still holding it add to its own counters, not to the totals).
  retire_counts(*old);

  snapshot.reset();  // the old slot retires once the last signal holding it is done
  change.outcome = "ok";
  change.duration_us = micros_since(start);
  record(change);
  return ChangeResult{std::move(change), publish_us};
}

ChangeResult SkillHost::add_now(const SkillManifest& manifest, std::string_view requester, TimePoint start) {
  {
    // Asked for by name (a rescan never adds a held-back skill): no longer held back.
    std::lock_guard lock(held_mutex_);
    if (held_back_.erase(manifest.name) != 0) save_held_locked();
  }
  SkillChange change = begin_change("add", manifest.name, requester);
  change.to_version = manifest.version.to_string();
  auto snapshot = registry_.snapshot();

  if (const Slot* existing = snapshot->find(manifest.name); existing != nullptr) {
    return refuse(std::move(change), "manifest",
                  Error{ErrorCode::refused, "skill '" + manifest.name + "' is already loaded (" +
                                                existing->version_text() + "); reload or swap it instead"},
                  start);
  }
  if (auto ok = check_dependencies(manifest, *snapshot); !ok) {
    return refuse(std::move(change), "dependencies", ok.error(), start);
  }
  std::string step;
  auto prepared = prepare(manifest, change, step);
  if (!prepared) return refuse(std::move(change), step, prepared.error(), start);
  std::shared_ptr<Slot> slot = std::move(prepared->slot);
  const auto skill_us = prepared->skill_us;
  if (auto ok = check_function_names(*slot, *snapshot); !ok) {
    return refuse(std::move(change), "names", ok.error(), start);
  }

  auto slots = current_slots(*snapshot);
  slots.push_back(std::move(slot));
  publish_slots(std::move(slots), requester);
  const auto publish_us = micros_since(start) - skill_us;
  manifest_paths_[manifest.name] = manifest.path;

  change.outcome = "ok";
  change.duration_us = micros_since(start);
  record(change);
  return ChangeResult{std::move(change), publish_us};
}

namespace {

// The loaded skills that need `name`, directly or not, through the
// requirements `follows` accepts (depends_on, guarded_by, or both).
template <class Follows>
std::set<std::string> needing(const Snapshot& snapshot, std::string_view name, Follows follows) {
  std::set<std::string> doomed{std::string(name)};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& slot : snapshot.slots()) {
      if (doomed.count(slot->name()) != 0) continue;
      for (const Dependency* dep : slot->manifest().requirements()) {
        if (follows(*dep) && doomed.count(dep->name) != 0) {
          doomed.insert(slot->name());
          grew = true;
          break;
        }
      }
    }
  }
  return doomed;
}

// "'a', 'b'": every name of `names` but `but`.
std::string quoted_names(const std::set<std::string>& names, std::string_view but) {
  std::string text;
  for (const auto& n : names) {
    if (n != but) text += (text.empty() ? "'" : ", '") + n + "'";
  }
  return text;
}

}  // namespace

std::vector<ChangeResult> SkillHost::remove_now(std::string_view name, RemoveMode mode, std::string_view requester) {
  const auto start = Clock::now();
  auto snapshot = registry_.snapshot();
  std::vector<ChangeResult> results;

  const Slot* target = snapshot->find(name);
  if (target == nullptr) {
    SkillChange change = begin_change("remove", name, requester);
    results.push_back(finish(std::move(change), "manifest",
                             Error{ErrorCode::refused, "skill '" + std::string(name) + "' is not loaded"}, start));
    record(results.back().change);
    return results;
  }

  // Everything that depends on `name` or is guarded by it, directly or not.
  std::set<std::string> doomed = needing(*snapshot, name, [](const Dependency&) { return true; });
  const bool forced = mode == RemoveMode::force && doomed.size() > 1;
  if (forced) {
    // A forced removal takes the guard alone: what it guards stays loaded
    // and fails closed. What merely depends on it still needs a cascade.
    doomed = needing(*snapshot, name, [](const Dependency& dep) { return !dep.guard; });
  }
  if (doomed.size() > 1 && mode != RemoveMode::cascade) {
    SkillChange change = begin_change("remove", name, requester);
    change.from_version = target->version_text();
    change.from_sha256 = target->library_sha256();
    results.push_back(finish(std::move(change), "dependencies",
                             Error{ErrorCode::refused, removal_refusal(*snapshot, name, doomed)}, start));
    record(results.back().change);
    return results;
  }

  // Dependents first: reverse load order.
  std::vector<std::shared_ptr<const Slot>> kept;
  std::vector<const Slot*> removed;
  for (const auto& slot : snapshot->slots()) {
    if (doomed.count(slot->name()) != 0) {
      removed.push_back(slot.get());
    } else {
      kept.push_back(slot);
    }
  }
  std::reverse(removed.begin(), removed.end());
  publish_slots(std::move(kept), requester);
  const auto publish_us = micros_since(start);
  for (const Slot* slot : removed) {
    SkillChange change = begin_change(forced ? "force-remove" : "remove", slot->name(), requester);
    change.from_version = slot->version_text();
    change.from_sha256 = slot->library_sha256();
    change.from_fingerprint = skill_fingerprint(slot->manifest(), slot->config());
    retire_counts(*slot);
    change.outcome = "ok";
    change.duration_us = micros_since(start);
    manifest_paths_.erase(slot->name());
    results.push_back(ChangeResult{change, publish_us});
    record(results.back().change);
  }
  if (forced) {
    for (const auto& slot : registry_.snapshot()->slots()) {
      for (const Dependency& guard : slot->manifest().guarded_by) {
        if (guard.name != name) continue;
        log_message(LogLevel::warn, "skills",
                    "skill '{0}' was removed with --force: {1} of '{2}' cannot act until '{0}' is loaded again", name,
                    slot->offers_text(), slot->name());
      }
    }
  }
  return results;
}

std::string SkillHost::removal_refusal(const Snapshot& snapshot, std::string_view name,
                                       const std::set<std::string>& doomed) {
  // Guarded skills are named with what they offer, so the operator sees what would act unguarded.
  std::string guarded;
  for (const auto& slot : snapshot.slots()) {
    if (doomed.count(slot->name()) == 0 || slot->name() == name) continue;
    const auto& guards = slot->manifest().guarded_by;
    if (std::any_of(guards.begin(), guards.end(), [&](const Dependency& g) { return g.name == name; })) {
      guarded += (guarded.empty() ? "" : "; ") + slot->offers_text() + " of '" + slot->name() + "'";
    }
  }
  if (guarded.empty()) {
    return "skill '" + std::string(name) + "' is needed by " + quoted_names(doomed, name) +
           "; remove those first or ask to cascade";
  }
  return "skill '" + std::string(name) + "' guards " + guarded + "; unloading it would leave them unguarded. Add " +
         "--cascade to unload " + quoted_names(doomed, name) + " too, or --force to unload it alone (they then " +
         "refuse to act until a guard is loaded)";
}

RescanResult SkillHost::rescan_now(std::string_view requester) {
  RescanResult result;
  auto set = load_manifest_dir(options_.manifest_dir);
  if (!set) {
    result.manifest_errors.push_back(set.error());
    return result;
  }
  result.manifest_errors = std::move(set->errors);

  // Skills whose manifest file failed to parse are left exactly as they are
  // (every manifest error starts with "<file>:").
  auto unreadable = [&](const fs::path& file) {
    std::string prefix = file.string() + ":";
    return std::any_of(result.manifest_errors.begin(), result.manifest_errors.end(),
                       [&](const Error& e) { return e.message.rfind(prefix, 0) == 0; });
  };

  auto snapshot = registry_.snapshot();
  std::set<std::string> in_folder;
  std::vector<SkillManifest> added;
  for (SkillManifest& manifest : set->manifests) {
    in_folder.insert(manifest.name);
    const Slot* loaded = snapshot->find(manifest.name);
    if (loaded == nullptr) {
      std::unique_lock lock(held_mutex_);
      if (held_back_.count(manifest.name) != 0) {
        lock.unlock();
        result.kept.push_back(manifest.name + ": held back since it crashed the daemon; load it explicitly " +
                              "(skills load, or skills reload " + manifest.name + ")");
        continue;
      }
      lock.unlock();
      added.push_back(std::move(manifest));
      continue;
    }
    if (!in_manifest_dir(loaded->manifest().path)) {
      // An operator loaded it from elsewhere: theirs to change, not the folder's.
      result.kept.push_back(manifest.name + ": loaded from " + loaded->manifest().path.string() +
                            ", not from the folder; left as it is");
      continue;
    }
    // Changed? Settings first (cheap), then the library's bytes.
    fs::path library = loader_.library_path(manifest);
    auto report = inspect_elf(library);
    if (report && !report->complete) {
      result.deferred.push_back(manifest.name + ": " + report->problem);
      continue;  // half-written: wait for the writer to finish
    }
    auto hash = sha256_file(library);
    bool changed = !same_settings(loaded->manifest(), manifest) || !hash || *hash != loaded->library_sha256();
    if (changed) {
      manifest_paths_[manifest.name] = manifest.path;
      result.changes.push_back(swap_now(manifest, requester, Clock::now()));
      snapshot = registry_.snapshot();
    }
  }

  // New skills, dependencies first (against what is loaded now).
  std::map<std::string, SemVer> available;
  for (const auto& slot : snapshot->slots()) available.emplace(slot->name(), slot->manifest().version);
  LoadPlan plan = DependencyGraph::plan(added, available);
  for (const SkillManifest* manifest : plan.order) {
    auto report = inspect_elf(loader_.library_path(*manifest));
    if (report && !report->complete) {
      result.deferred.push_back(manifest->name + ": " + report->problem);
      continue;
    }
    result.changes.push_back(add_now(*manifest, requester, Clock::now()));
  }
  for (const Disabled& disabled : plan.disabled) {
    SkillChange change = begin_change("add", disabled.name, requester);
    change.outcome = "refused";
    change.step = "dependencies";
    change.error = disabled.reason;
    record(change);
    result.changes.push_back(ChangeResult{std::move(change), -1});
  }

  // Skills whose manifest is gone (and did not just fail to parse).
  snapshot = registry_.snapshot();
  std::vector<std::string> gone;
  for (const auto& slot : snapshot->slots()) {
    if (in_folder.count(slot->name()) == 0 && in_manifest_dir(slot->manifest().path) &&
        !unreadable(slot->manifest().path)) {
      gone.push_back(slot->name());
    }
  }
  // Dependents before what they depend on: reverse load order.
  std::reverse(gone.begin(), gone.end());
  for (const std::string& name : gone) {
    for (auto& r : remove_now(name, RemoveMode::refuse_if_needed, requester)) result.changes.push_back(std::move(r));
  }
  return result;
}

bool SkillHost::in_manifest_dir(const fs::path& manifest) const {
  std::error_code ec;
  const fs::path folder = fs::weakly_canonical(options_.manifest_dir, ec);
  if (ec) return false;
  const fs::path parent = fs::weakly_canonical(manifest.parent_path(), ec);
  return !ec && parent == folder;
}

ChangeResult SkillHost::forget_disabled(std::string_view name, std::string_view version, std::string_view reason,
                                        std::string_view requester) {
  return control_.run([&]() -> ChangeResult {
    const auto start = Clock::now();
    SkillChange change = begin_change("remove", name, requester);
    if (registry_.snapshot()->find(name) != nullptr) {
      return refuse(std::move(change), "manifest",
                    Error{ErrorCode::refused, "skill '" + std::string(name) + "' is loaded; unload it instead"}, start);
    }
    change.from_version = std::string(version);
    change.details = "cleared the disabled entry: " + std::string(reason);
    change.outcome = "ok";
    change.duration_us = micros_since(start);
    record(change);
    return ChangeResult{std::move(change), -1};
  });
}

void SkillHost::publish_slots(std::vector<std::shared_ptr<const Slot>> slots, std::string_view requester) {
  const auto before = registry_.snapshot()->candidates();
  const auto after = registry_.publish(std::move(slots));
  if (before.empty()) return;
  std::vector<SkillChange> dropped;
  const auto kept = after->candidates();
  for (const ShadowCandidate& candidate : before) {
    if (std::any_of(kept.begin(), kept.end(), [&](const ShadowCandidate& c) { return c.stats == candidate.stats; })) {
      continue;
    }
    retire_shadow(candidate);
    if (candidate.slot->name() == promoting_) continue;  // the promote records itself
    SkillChange& change = dropped.emplace_back(begin_change("shadow-stop", candidate.slot->name(), requester));
    change.from_version = candidate.slot->version_text();
    change.from_sha256 = candidate.slot->library_sha256();
    change.details = "dropped: the live version of '" + candidate.slot->name() + "' was swapped or unloaded";
    change.detail = shadow_counts_json(candidate.stats->read());
    change.outcome = "ok";
  }
  record_all(dropped);
}

void SkillHost::retire_shadow(const ShadowCandidate& candidate) {
  const ShadowCounts counts = candidate.stats->read();
  std::lock_guard lock(retired_mutex_);
  ShadowCounts& total = retired_shadow_counts_[candidate.slot->name()];
  total.seen += counts.seen;
  for (std::size_t i = 0; i < kShadowKinds; ++i) total.by_kind[i] += counts.by_kind[i];
}

ChangeResult SkillHost::shadow(const SkillManifest& candidate, std::string_view requester) {
  return control_.run([&]() -> ChangeResult {
    const auto start = Clock::now();
    SkillChange change = begin_change("shadow", candidate.name, requester);
    change.to_version = candidate.version.to_string();
    auto snapshot = registry_.snapshot();
    const Slot* live = snapshot->find(candidate.name);
    if (live == nullptr) {
      return refuse(std::move(change), "manifest",
                    Error{ErrorCode::refused, "skill '" + candidate.name +
                                                  "' is not loaded; a candidate is tried beside the loaded version "
                                                  "of the same name (load it first)"},
                    start);
    }
    change.from_version = live->version_text();
    change.from_sha256 = live->library_sha256();
    change.from_fingerprint = skill_fingerprint(live->manifest(), live->config());
    if (!live->has_gate()) {
      return refuse(std::move(change), "manifest",
                    Error{ErrorCode::refused, "skill '" + candidate.name + "' " + live->version_text() +
                                                  " has no gate; only a gate can be shadowed"},
                    start);
    }
    for (const Snapshot::Shadow& s : snapshot->shadows()) {
      if (s.candidate.slot->name() != candidate.name) continue;
      return refuse(std::move(change), "manifest",
                    Error{ErrorCode::refused, "skill '" + candidate.name + "' is already shadowed by " +
                                                  s.candidate.slot->version_text() + " (" +
                                                  s.candidate.slot->manifest().path.string() +
                                                  "); stop it first (skills shadow stop " + candidate.name + ")"},
                    start);
    }
    if (auto ok = check_dependencies(candidate, *snapshot); !ok) {
      return refuse(std::move(change), "dependencies", ok.error(), start);
    }
    std::string step;
    auto prepared = prepare(candidate, change, step);
    if (!prepared) return refuse(std::move(change), step, prepared.error(), start);
    if (!prepared->slot->has_gate()) {
      return refuse(std::move(change), "gate",
                    Error{ErrorCode::refused, "the candidate " + candidate.version.to_string() + " of skill '" +
                                                  candidate.name + "' has no gate; there is nothing to compare"},
                    start);
    }
    ShadowCandidate added;
    added.slot = std::move(prepared->slot);
    added.live = live;
    added.stats = std::make_shared<ShadowStats>();
    added.since_unix_ms = unix_ms_now();
    added.requester = std::string(requester);
    auto candidates = snapshot->candidates();
    candidates.push_back(std::move(added));
    registry_.publish(current_slots(*snapshot), std::move(candidates));
    const auto publish_us = micros_since(start) - prepared->skill_us;
    change.outcome = "ok";
    change.duration_us = micros_since(start);
    record(change);
    return ChangeResult{std::move(change), publish_us};
  });
}

ChangeResult SkillHost::shadow_stop(std::string_view name, std::string_view requester) {
  return control_.run([&]() -> ChangeResult {
    const auto start = Clock::now();
    SkillChange change = begin_change("shadow-stop", name, requester);
    auto snapshot = registry_.snapshot();
    auto candidates = snapshot->candidates();
    auto found = std::find_if(candidates.begin(), candidates.end(),
                              [&](const ShadowCandidate& c) { return c.slot->name() == name; });
    if (found == candidates.end()) {
      return refuse(std::move(change), "manifest",
                    Error{ErrorCode::refused, "skill '" + std::string(name) + "' has no shadow candidate"}, start);
    }
    const ShadowCandidate stopped = *found;
    candidates.erase(found);
    registry_.publish(current_slots(*snapshot), std::move(candidates));
    retire_shadow(stopped);
    change.from_version = stopped.slot->version_text();
    change.from_sha256 = stopped.slot->library_sha256();
    change.detail = shadow_counts_json(stopped.stats->read());
    change.outcome = "ok";
    change.duration_us = micros_since(start);
    record(change);
    return ChangeResult{std::move(change), micros_since(start)};
  });
}

ChangeResult SkillHost::promote(std::string_view name, std::string_view requester) {
  const auto requested = Clock::now();
  return control_.run([&]() -> ChangeResult {
    auto snapshot = registry_.snapshot();
    const Snapshot::Shadow* shadowed = nullptr;
    for (const Snapshot::Shadow& s : snapshot->shadows()) {
      if (s.candidate.slot->name() == name) shadowed = &s;
    }
    if (shadowed == nullptr) {
      return refuse(begin_change("promote", name, requester), "manifest",
                    Error{ErrorCode::refused, "skill '" + std::string(name) +
                                                  "' has no shadow candidate; start one with skills shadow MANIFEST"},
                    requested);
    }
    const SkillManifest manifest = shadowed->candidate.slot->manifest();
    const Promotion promotion{shadowed->candidate.slot->library_sha256(),
                              shadow_counts_json(shadowed->candidate.stats->read())};
    snapshot.reset();
    promoting_ = std::string(name);
    ChangeResult result = swap_now(manifest, requester, requested, &promotion);
    promoting_.clear();
    if (result.ok()) manifest_paths_[manifest.name] = manifest.path;
    return result;
  });
}

std::vector<SkillHost::ShadowStatus> SkillHost::shadow_status() const {
  std::vector<ShadowStatus> out;
  auto snapshot = registry_.snapshot();
  for (const Snapshot::Shadow& s : snapshot->shadows()) {
    ShadowStatus& status = out.emplace_back();
    const Slot& candidate = *s.candidate.slot;
    status.skill = candidate.name();
    status.live_version = snapshot->gates()[s.live_gate].slot->version_text();
    status.candidate_version = candidate.version_text();
    status.candidate_sha256 = candidate.library_sha256();
    status.manifest = candidate.manifest().path;
    status.since_unix_ms = s.candidate.since_unix_ms;
    status.requester = s.candidate.requester;
    status.counts = s.candidate.stats->read();
    status.latest = s.candidate.stats->latest();
  }
  return out;
}

std::map<std::string, ShadowCounts> SkillHost::shadow_counts() const {
  std::map<std::string, ShadowCounts> totals;
  {
    std::lock_guard lock(retired_mutex_);
    totals = retired_shadow_counts_;
  }
  auto snapshot = registry_.snapshot();
  for (const Snapshot::Shadow& s : snapshot->shadows()) {
    const ShadowCounts counts = s.candidate.stats->read();
    ShadowCounts& total = totals[s.candidate.slot->name()];
    total.seen += counts.seen;
    for (std::size_t i = 0; i < kShadowKinds; ++i) total.by_kind[i] += counts.by_kind[i];
  }
  return totals;
}

void SkillHost::retire_counts(const Slot& slot) {
  const GateCounts counts = slot.counters().read();
  std::lock_guard lock(retired_mutex_);
  GateCounts& total = retired_counts_[slot.name()];
  total.passes += counts.passes;
  total.rewrites += counts.rewrites;
  total.blocks += counts.blocks;
  total.approvals += counts.approvals;
  total.failures += counts.failures;
  total.timed_calls += counts.timed_calls;
  total.timed_ns += counts.timed_ns;
}

std::map<std::string, GateCounts> SkillHost::retired_counts() const {
  std::lock_guard lock(retired_mutex_);
  return retired_counts_;
}

Result<std::vector<SkillChange>> SkillHost::history(std::size_t limit) const {
  // A change publishes, then records: waiting for the control thread keeps a
  // reader from seeing the new version without its row.
  return control_.run([&]() -> Result<std::vector<SkillChange>> {
    if (audit_) return audit_->list(limit);
    auto end = memory_log_.begin() + static_cast<std::ptrdiff_t>(std::min(limit, memory_log_.size()));
    return std::vector<SkillChange>(memory_log_.begin(), end);
  });
}

}  // namespace passepartout

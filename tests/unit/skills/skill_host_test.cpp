// SkillHost: live swap, add, remove, reload and rescan — consistency under
// load, every failing step leaving the old version serving, dependents,
// audit, unloading on the control thread, and the folder watcher.
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <set>
#include <thread>

#include "base/log.hpp"
#include "pipeline/verifier.hpp"
#include "skills/skill_host.hpp"
#include "skills/skill_watcher.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const Value& signal() {
  static const Value s = *read_sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hi\"))");
  return s;
}
const Value& action() {
  static const Value a = *read_sexp("(:TYPE :REQUEST :PAYLOAD (:ACTION :MESSAGE :TEXT \"hello\"))");
  return a;
}

std::string manifest_yaml(std::string_view name, std::string_view version, std::string_view library,
                          std::string_view extra = "") {
  return "name: " + std::string(name) + "\nversion: " + std::string(version) + "\nlibrary: " + std::string(library) +
         "\nabi: 1\n" + (extra.find("isolation:") == std::string_view::npos ? "isolation: in-process\n" : "") +
         std::string(extra);
}

// A manifest folder, a plugin folder holding every echo fixture, an audit log, and a host.
struct World {
  TempDir root;
  fs::path manifests = root.path() / "manifests";
  fs::path plugins = root.path() / "plugins";
  std::unique_ptr<SkillHost> host;

  explicit World(std::string_view boot_manifest = manifest_yaml("echo", "1.0.0", "libecho-v1.so")) {
    fs::create_directories(manifests);
    fs::create_directories(plugins);
    fs::permissions(plugins, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
    for (auto lib : {"echo-v1", "echo-v2", "echo-v2-selftest", "echo-v2-badabi", "echo-v2-throws",
                     "echo-v2-import-fails", "echo-v3", "echo-v1-pinned", "depends-on-echo"}) {
      install(std::string("lib") + lib + ".so", std::string("lib") + lib + ".so");
    }
    install("libecho-v1.so", "libecho.so");  // the file the watcher tests rewrite
    if (!boot_manifest.empty()) write("echo.yaml", boot_manifest);
    auto created = SkillHost::create(SkillHostOptions{
        manifests, plugins, root.path() / "state" / "audit.sqlite3", true, root.path() / "workspace", {}});
    INFO((created ? std::string() : created.error().message));
    REQUIRE(created.has_value());
    host = std::move(*created);
    auto boot = host->boot("test");
    for (const auto& d : boot.disabled) FAIL(d.name << ": " << d.reason);
  }

  void install(const std::string& fixture_file, const std::string& as) {
    fs::copy_file(fs::path(PP_FIXTURE_DIR) / fixture_file, plugins / as, fs::copy_options::overwrite_existing);
    fs::permissions(plugins / as,
                    fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  }
  void write(const std::string& file, std::string_view text) {
    fs::path tmp = manifests / ("." + file + ".tmp");
    std::ofstream(tmp) << text;
    fs::rename(tmp, manifests / file);  // atomically, as an operator's tooling would
  }
  SkillManifest manifest(std::string_view yaml) {
    auto m = SkillManifest::parse(yaml, manifests / "echo.yaml");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m.has_value());
    return *m;
  }
  Value verify() { return Verifier::verify(*host->snapshot(), action(), signal()).to_value(); }
  std::vector<std::string> stamps() {
    std::vector<std::string> out;
    const Value result = verify();  // the range below must not outlive it
    for (const Value& s : result.at("STAMPS").items()) out.emplace_back(s.text());
    return out;
  }
  // Distinct private copies of libraries still mapped into this process.
  std::size_t mapped_copies() {
    std::ifstream maps("/proc/self/maps");
    std::set<std::string> paths;
    std::string line;
    std::string dir = host->library_copy_dir().string();
    while (std::getline(maps, line)) {
      auto at = line.find(dir);
      if (at != std::string::npos) paths.insert(line.substr(at));
    }
    return paths.size();
  }
  // Waits until everything posted to the control thread so far (slot retirements) has run.
  void settle() {
    host->control().run([] {});
  }
};

}  // namespace

TEST_CASE("a swap publishes the new version and hands the state over", "[skills][swap]") {
  World w;
  CHECK(w.stamps() == std::vector<std::string>{"echo 1.0.0"});
  CHECK(w.verify().at("ECHO-GENERATION").as_integer() == 1);

  ChangeResult r = w.host->swap(w.manifest(manifest_yaml("echo", "2.0.0", "libecho-v2.so")), "test");
  INFO(r.change.error);
  REQUIRE(r.ok());
  CHECK(r.publish_us >= 0);
  CHECK(w.stamps() == std::vector<std::string>{"echo 2.0.0"});
  CHECK(w.verify().at("ECHO-GENERATION").as_integer() == 2);  // imported 1, plus one

  auto history = w.host->history(10);
  REQUIRE(history.has_value());
  const SkillChange& c = history->front();
  CHECK(c.action == "swap");
  CHECK(c.skill == "echo");
  CHECK(c.requester == "test");
  CHECK(c.from_version == "1.0.0");
  CHECK(c.to_version == "2.0.0");
  CHECK(c.from_sha256.size() == 64);
  CHECK(c.to_sha256.size() == 64);
  CHECK(c.from_sha256 != c.to_sha256);
  CHECK(c.outcome == "ok");
  CHECK(c.step.empty());
  CHECK(c.from_fingerprint.size() == 12);
  CHECK(c.to_fingerprint.size() == 12);
  CHECK(c.details == "version: 1.0.0 -> 2.0.0; library: libecho-v1.so -> libecho-v2.so");
  CHECK(c.state_handover.ends_with(" bytes"));
  CHECK(c.state_handover != "0 bytes");
}

TEST_CASE("a swap moves a skill into a worker process and back, handing its state over each time", "[skills][swap]") {
  World w;  // echo 1.0.0, in process (a manifest that does not say)
  CHECK(w.host->snapshot()->find("echo")->isolation_status().tier == Isolation::in_process);
  CHECK(w.verify().at("ECHO-GENERATION").as_integer() == 1);

  ChangeResult to_process =
      w.host->swap(w.manifest(manifest_yaml("echo", "2.0.0", "libecho-v2.so", "isolation: process\n")), "test");
  INFO(to_process.change.error);
  REQUIRE(to_process.ok());
  const IsolationStatus worker = w.host->snapshot()->find("echo")->isolation_status();
  CHECK(worker.tier == Isolation::process);
  CHECK(worker.pid > 0);
  CHECK(w.stamps() == std::vector<std::string>{"echo 2.0.0"});
  CHECK(w.verify().at("ECHO-GENERATION").as_integer() == 2);  // imported 1 in the worker, plus one

  // A version whose self-test fails in its worker leaves the one in process serving.
  ChangeResult refused = w.host->swap(
      w.manifest(manifest_yaml("echo", "2.0.0", "libecho-v2-selftest.so", "isolation: process\n")), "test");
  CHECK_FALSE(refused.ok());
  CHECK(refused.change.step == "self-test");
  CHECK(w.stamps() == std::vector<std::string>{"echo 2.0.0"});

  ChangeResult back =
      w.host->swap(w.manifest(manifest_yaml("echo", "3.0.0", "libecho-v3.so", "isolation: in-process\n")), "test");
  INFO(back.change.error);
  REQUIRE(back.ok());
  CHECK(w.host->snapshot()->find("echo")->isolation_status().tier == Isolation::in_process);
  CHECK(w.stamps() == std::vector<std::string>{"echo 3.0.0"});
  CHECK(w.verify().at("ECHO-GENERATION").as_integer() == 3);
  w.settle();
  // The old worker is stopped once the last snapshot holding it is released.
  CHECK(::kill(worker.pid, 0) != 0);
}

TEST_CASE("a swap of the same library with other settings is told apart by its fingerprint and details",
          "[skills][swap][audit]") {
  World w;
  ChangeResult r = w.host->swap(
      w.manifest(manifest_yaml("echo", "1.0.0", "libecho-v1.so", "priority: 60\nconfig: {api_key: hunter2}\n")),
      "test");
  INFO(r.change.error);
  REQUIRE(r.ok());
  CHECK(r.change.from_sha256 == r.change.to_sha256);
  CHECK(r.change.from_version == r.change.to_version);
  CHECK(r.change.from_fingerprint != r.change.to_fingerprint);
  CHECK(r.change.details == "priority: 10 -> 60; config: api_key added");
  auto history = w.host->history(1);
  REQUIRE(history.has_value());
  CHECK(history->front().details == r.change.details);
  CHECK(history->front().to_fingerprint == r.change.to_fingerprint);
}

TEST_CASE("a skill's decisions are counted across its versions", "[skills][swap]") {
  World w;
  for (int i = 0; i < 3; ++i) w.verify();
  CHECK(w.host->snapshot()->find("echo")->counters().read().calls() == 3);
  REQUIRE(w.host->swap(w.manifest(manifest_yaml("echo", "2.0.0", "libecho-v2.so")), "test").ok());
  w.verify();
  // The new version counts from zero; the skill's earlier versions are kept aside.
  CHECK(w.host->snapshot()->find("echo")->counters().read().calls() == 1);
  const auto retired = w.host->retired_counts();
  REQUIRE(retired.count("echo") == 1);
  CHECK(retired.at("echo").calls() == 3);
}

TEST_CASE("clearing a skill that is not loaded is audited, and refused for a loaded one", "[skills][audit]") {
  World w;
  ChangeResult cleared = w.host->forget_disabled("broken", "1.2.0", "load: no such library", "test");
  CHECK(cleared.ok());
  CHECK(cleared.change.action == "remove");
  CHECK(cleared.change.from_version == "1.2.0");
  CHECK(cleared.change.details == "cleared the disabled entry: load: no such library");
  auto history = w.host->history(1);
  REQUIRE(history.has_value());
  CHECK(history->front().skill == "broken");
  ChangeResult refused = w.host->forget_disabled("echo", "1.0.0", "", "test");
  CHECK_FALSE(refused.ok());
  CHECK(w.host->snapshot()->find("echo") != nullptr);
}

TEST_CASE("a failing new version leaves the old one serving and names the step", "[skills][swap]") {
  struct Case {
    const char* library;
    const char* step;
    const char* outcome;
    const char* error;
  };
  auto c =
      GENERATE(Case{"libecho-v2-selftest.so", "self-test", "failed",
                    "skill 'echo': self-test failed: echo 2.0.0 self-test: stamp table is empty"},
               Case{"libecho-v2-badabi.so", "load", "refused",
                    "skill 'echo': built for ABI 2.0, this host supports 1.x; rebuild it against the installed SDK"},
               Case{"libecho-v2-throws.so", "create", "failed",
                    "skill 'echo': create failed: echo 2.0.0 cannot start: missing stamp file"},
               Case{"libecho-v2-import-fails.so", "state", "failed",
                    "skill 'echo' 2.0.0 could not import the state of 1.0.0: echo 2.0.0 cannot read state from 1.0.0"});
  World w;
  ChangeResult r = w.host->swap(w.manifest(manifest_yaml("echo", "2.0.0", c.library)), "test");
  CHECK_FALSE(r.ok());
  CHECK(r.change.step == c.step);
  CHECK(r.change.outcome == c.outcome);
  CHECK(r.change.error == c.error);
  CHECK(r.publish_us == -1);
  if (std::string_view(c.step) == "state")
    CHECK(r.change.state_handover == "import refused: echo 2.0.0 cannot read state from 1.0.0");
  CHECK(w.stamps() == std::vector<std::string>{"echo 1.0.0"});
  w.settle();
  CHECK(w.mapped_copies() == 1);  // the refused copy is unmapped again
  auto history = w.host->history(1);
  REQUIRE(history.has_value());
  CHECK(history->front().error == c.error);
}

TEST_CASE("a swap that would break a dependent's constraint is refused", "[skills][swap]") {
  World w;
  REQUIRE(w.host
              ->add(w.manifest(manifest_yaml("depends-on-echo", "1.0.0", "libdepends-on-echo.so",
                                             "depends_on: [echo >=1.0 <3]\n")),
                    "test")
              .ok());
  ChangeResult r = w.host->swap(w.manifest(manifest_yaml("echo", "3.0.0", "libecho-v3.so")), "test");
  CHECK_FALSE(r.ok());
  CHECK(r.change.step == "dependencies");
  CHECK(r.change.error ==
        "swapping 'echo' to 3.0.0 would break 'depends-on-echo', which requires 'echo >=1.0 <3'; update "
        "depends-on-echo first");
  CHECK(w.stamps() == std::vector<std::string>{"echo 1.0.0"});
  CHECK(w.host->swap(w.manifest(manifest_yaml("echo", "2.0.0", "libecho-v2.so")), "test").ok());
}

TEST_CASE("unloading a skill others depend on is refused unless asked to cascade", "[skills][swap]") {
  World w;
  REQUIRE(
      w.host
          ->add(w.manifest(manifest_yaml("depends-on-echo", "1.0.0", "libdepends-on-echo.so", "depends_on: [echo]\n")),
                "test")
          .ok());
  auto refused = w.host->remove("echo", RemoveMode::refuse_if_needed, "test");
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].change.outcome == "refused");
  CHECK(refused[0].change.error == "skill 'echo' is needed by 'depends-on-echo'; remove those first or ask to cascade");
  CHECK(w.host->snapshot()->find("echo") != nullptr);

  auto removed = w.host->remove("echo", RemoveMode::cascade, "test");
  REQUIRE(removed.size() == 2);
  CHECK(removed[0].change.skill == "depends-on-echo");  // dependents first
  CHECK(removed[1].change.skill == "echo");
  CHECK(removed[1].ok());
  CHECK(w.host->snapshot()->slots().empty());
  w.settle();
  CHECK(w.mapped_copies() == 0);
}

TEST_CASE("adding a skill needs its dependencies loaded and a free name", "[skills][swap]") {
  World w;
  auto missing = w.host->add(
      w.manifest(manifest_yaml("depends-on-echo", "1.0.0", "libdepends-on-echo.so", "depends_on: [ghost]\n")), "test");
  CHECK(missing.change.step == "dependencies");
  CHECK(missing.change.error == "skill 'depends-on-echo' depends on 'ghost', which is not loaded; load it first");
  auto duplicate = w.host->add(w.manifest(manifest_yaml("echo", "2.0.0", "libecho-v2.so")), "test");
  CHECK(duplicate.change.error == "skill 'echo' is already loaded (1.0.0); reload or swap it instead");
  CHECK(w.stamps() == std::vector<std::string>{"echo 1.0.0"});
}

TEST_CASE("a held snapshot keeps the old version until it is let go, then it is unloaded", "[skills][swap]") {
  World w;
  auto held = w.host->snapshot();
  REQUIRE(w.host->swap(w.manifest(manifest_yaml("echo", "2.0.0", "libecho-v2.so")), "test").ok());
  w.settle();
  CHECK(w.mapped_copies() == 2);
  auto old = Verifier::verify(*held, action(), signal()).to_value();
  CHECK(old.at("STAMPS").items()[0].text() == "echo 1.0.0");  // a signal in flight never sees half a swap
  auto leaked = leaked_library_count();
  held.reset();
  w.settle();
  CHECK(w.mapped_copies() == 1);
  CHECK(leaked_library_count() == leaked);
}

TEST_CASE("reload re-reads the manifest from the folder", "[skills][swap]") {
  World w;
  w.write("echo.yaml", manifest_yaml("echo", "2.0.0", "libecho-v2.so"));
  ChangeResult r = w.host->reload("echo", "cli");
  INFO(r.change.error);
  CHECK(r.ok());
  CHECK(w.stamps() == std::vector<std::string>{"echo 2.0.0"});
}

TEST_CASE("rescan applies what changed in the folder and nothing else", "[skills][swap]") {
  World w;
  CHECK(w.host->rescan("test").changes.empty());

  w.write("other.yaml", manifest_yaml("depends-on-echo", "1.0.0", "libdepends-on-echo.so", "depends_on: [echo]\n"));
  auto added = w.host->rescan("test");
  REQUIRE(added.changes.size() == 1);
  CHECK(added.changes[0].change.action == "add");
  CHECK(added.changes[0].ok());

  w.install("libecho-v2.so", "libecho-v1.so");  // same file name, new bytes (and version)
  w.write("echo.yaml", manifest_yaml("echo", "2.0.0", "libecho-v1.so"));
  auto swapped = w.host->rescan("test");
  REQUIRE(swapped.changes.size() == 1);
  CHECK(swapped.changes[0].change.action == "swap");
  CHECK(swapped.changes[0].ok());
  CHECK(w.stamps() == std::vector<std::string>{"echo 2.0.0"});

  w.write("echo.yaml", "name: echo\nversion: [broken\n");
  auto broken = w.host->rescan("test");
  CHECK(broken.changes.empty());  // a manifest that does not parse changes nothing
  REQUIRE(broken.manifest_errors.size() == 1);
  CHECK(w.stamps() == std::vector<std::string>{"echo 2.0.0"});

  fs::remove(w.manifests / "other.yaml");
  w.write("echo.yaml", manifest_yaml("echo", "2.0.0", "libecho-v1.so"));
  auto removed = w.host->rescan("test");
  REQUIRE(removed.changes.size() == 1);
  CHECK(removed.changes[0].change.action == "remove");
  CHECK(removed.changes[0].change.skill == "depends-on-echo");
}

TEST_CASE("never_unload keeps the old copy mapped and counts it", "[skills][swap]") {
  World w(manifest_yaml("echo", "1.0.0", "libecho-v1.so", "never_unload: true\n"));
  auto pinned = pinned_library_count();
  REQUIRE(w.host->swap(w.manifest(manifest_yaml("echo", "2.0.0", "libecho-v2.so")), "test").ok());
  w.settle();
  CHECK(pinned_library_count() == pinned + 1);
  CHECK(w.mapped_copies() == 2);
}

TEST_CASE("a copy pinned by a thread_local is counted as leaked, not crashed into", "[skills][swap]") {
  World w(manifest_yaml("echo", "1.0.1", "libecho-v1-pinned.so"));
  std::atomic<int> stage{0};
  // A long-lived thread touches the skill's thread_local: glibc now pins the library.
  std::thread worker([&] {
    Verifier::verify(*w.host->snapshot(), action(), signal());
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
  });
  while (stage.load() != 1) std::this_thread::yield();
  auto leaked = leaked_library_count();
  REQUIRE(w.host->swap(w.manifest(manifest_yaml("echo", "2.0.0", "libecho-v2.so")), "test").ok());
  w.settle();
  CHECK(leaked_library_count() == leaked + 1);
  CHECK(w.stamps() == std::vector<std::string>{"echo 2.0.0"});
  stage = 2;
  worker.join();  // its thread_local is destroyed in the still-mapped copy: no crash
}

TEST_CASE("1000 alternating swaps under load lose no signal and mix no versions", "[skills][swap][concurrency]") {
  World w;
  const SkillManifest v1 = w.manifest(manifest_yaml("echo", "1.0.0", "libecho-v1.so"));
  const SkillManifest v2 = w.manifest(manifest_yaml("echo", "2.0.0", "libecho-v2.so"));
  std::atomic<bool> stop{false};
  std::atomic<long> verified{0};
  std::atomic<long> wrong{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&] {
      Verification v;
      while (!stop.load(std::memory_order_relaxed)) {
        auto snapshot = w.host->snapshot();
        Verifier::verify(*snapshot, action(), signal(), v);
        auto stamps = v.action.at("STAMPS").items();
        bool one_version = stamps.size() == 1 && (stamps[0].text() == "echo 1.0.0" || stamps[0].text() == "echo 2.0.0");
        if (v.outcome != VerifyOutcome::passed || !one_version) wrong.fetch_add(1);
        verified.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  int failed_swaps = 0;
  for (int i = 0; i < 1000; ++i) {
    if (!w.host->swap(i % 2 == 0 ? v2 : v1, "test").ok()) ++failed_swaps;
  }
  stop = true;
  for (auto& t : workers) t.join();
  w.settle();
  CHECK(failed_swaps == 0);
  CHECK(wrong.load() == 0);
  CHECK(verified.load() > 0);
  CHECK(w.stamps() == std::vector<std::string>{"echo 1.0.0"});  // 1000 swaps: the last one was back to v1
  CHECK(w.mapped_copies() == 1);
}

namespace {

std::string read_bytes(const fs::path& file) {
  std::string bytes(static_cast<std::size_t>(fs::file_size(file)), '\0');
  std::ifstream(file, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

// Polls until `done` (an asynchronous effect) or the deadline; true when done.
TEST_CASE("the boot's loads are in the audit log, one row per skill", "[skills][audit]") {
  World w;
  auto history = w.host->history(10);
  REQUIRE(history.has_value());
  REQUIRE(history->size() == 1);
  const SkillChange& c = history->front();
  CHECK(c.action == "load");
  CHECK(c.skill == "echo");
  CHECK(c.requester == "test");
  CHECK(c.to_version == "1.0.0");
  CHECK(c.to_sha256.size() == 64);
  CHECK(c.outcome == "ok");
  CHECK(c.id > 0);

  // Two skills and one refused at boot: three rows, newest first, ids increasing.
  World two("");
  two.write("a.yaml", manifest_yaml("echo", "1.0.0", "libecho-v1.so"));
  two.write("b.yaml", manifest_yaml("depends-on-echo", "1.0.0", "libdepends-on-echo.so"));
  two.write("c.yaml", manifest_yaml("gamma", "1.0.0", "libecho-v2-badabi.so"));
  auto created = SkillHost::create(SkillHostOptions{two.manifests,
                                                    two.plugins,
                                                    two.root.path() / "state" / "boot-audit.sqlite3",
                                                    true,
                                                    two.root.path() / "workspace",
                                                    {}});
  REQUIRE(created.has_value());
  static_cast<void>((*created)->boot("boot"));
  auto rows = (*created)->history(10);
  REQUIRE(rows.has_value());
  REQUIRE(rows->size() == 3);
  CHECK(rows->at(0).id > rows->at(1).id);
  CHECK(rows->at(1).id > rows->at(2).id);
  std::set<std::string> outcomes;
  std::string errors;
  for (const SkillChange& row : *rows) {
    outcomes.insert(row.skill + ":" + row.outcome);
    errors += row.skill + ": " + row.error + "\n";
  }
  INFO(errors);
  CHECK(outcomes == std::set<std::string>{"echo:ok", "depends-on-echo:ok", "gamma:refused"});
}

template <class Pred>
bool eventually(Pred done, std::chrono::milliseconds deadline = std::chrono::milliseconds(10000)) {
  auto until = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::size_t count_changes(SkillHost& host, std::string_view action, std::string_view outcome) {
  auto history = host.history(100);
  REQUIRE(history.has_value());
  return static_cast<std::size_t>(std::count_if(history->begin(), history->end(), [&](const SkillChange& c) {
    return c.action == action && (outcome.empty() || c.outcome == outcome);
  }));
}

}  // namespace

TEST_CASE("the watcher loads a library rewritten in place slowly once, complete", "[skills][watcher]") {
  World w(manifest_yaml("echo", "1.0.0", "libecho.so"));
  auto watcher = SkillWatcher::start(*w.host, std::chrono::milliseconds(100));
  REQUIRE(watcher.has_value());

  std::string bytes = read_bytes(fs::path(PP_FIXTURE_DIR) / "libecho-v2.so");
  std::size_t half = bytes.size() / 2;
  {
    std::ofstream out(w.plugins / "libecho.so", std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(half));
    out.flush();
    // The writer stalls longer than the quiet period: the watcher rescans and
    // must find the half-written library incomplete, not load it.
    REQUIRE(eventually([&] { return (*watcher)->rescans() >= 1; }));
    w.write("echo.yaml", manifest_yaml("echo", "2.0.0", "libecho.so"));
    REQUIRE(eventually([&] { return (*watcher)->rescans() >= 2; }));
    CHECK(w.stamps() == std::vector<std::string>{"echo 1.0.0"});
    out.write(bytes.data() + half, static_cast<std::streamsize>(bytes.size() - half));
  }
  REQUIRE(eventually([&] { return w.stamps() == std::vector<std::string>{"echo 2.0.0"}; }));
  CHECK(count_changes(*w.host, "swap", "ok") == 1);
  CHECK(count_changes(*w.host, "swap", "") == 1);  // no refused or failed attempt on the way
}

TEST_CASE("the watcher loads a library renamed over the old path as the new version", "[skills][watcher]") {
  World w(manifest_yaml("echo", "1.0.0", "libecho.so"));
  CHECK(w.stamps() == std::vector<std::string>{"echo 1.0.0"});
  auto watcher = SkillWatcher::start(*w.host, std::chrono::milliseconds(100));
  REQUIRE(watcher.has_value());

  w.install("libecho-v2.so", ".libecho.so.new");  // a hidden name the watcher ignores
  fs::rename(w.plugins / ".libecho.so.new", w.plugins / "libecho.so");
  w.write("echo.yaml", manifest_yaml("echo", "2.0.0", "libecho.so"));
  // Same path, new bytes: dlopen's cache by path must not hand back 1.0.0.
  REQUIRE(eventually([&] { return w.stamps() == std::vector<std::string>{"echo 2.0.0"}; }));
  CHECK(count_changes(*w.host, "swap", "ok") == 1);
}

// `skills install` and `skills uninstall` against the real daemon: a built
// skill installed into the daemon's folders is loaded at once, kept across a
// rescan and a restart, a load the daemon refuses leaves the folders as
// they were, installed with no daemon running it loads at the next start,
// an uninstall refused while something depends on it removes nothing, and
// an uninstall takes exactly its files away.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "integration/daemon_process.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::DaemonProcess;

constexpr std::string_view kScript = R"(rules:
  - match: 'hello'
    reply: "Hello!"
)";

// A daemon's own manifest and plugin folders (empty at first), a source
// folder per skill as a build leaves it, and the daemons started on them.
class InstallSetup {
 public:
  InstallSetup() {
    fs::create_directories(manifests());
    fs::create_directories(plugins());
  }
  fs::path manifests() const { return root_.path() / "manifests"; }
  fs::path plugins() const { return root_.path() / "plugins"; }

  // <root>/src/<name>/<name>.yaml and build/lib<name>.so from the fixture of that name.
  fs::path built(const std::string& name, const std::string& extra = "") const {
    const fs::path dir = root_.path() / "src" / name;
    fs::create_directories(dir / "build");
    const std::string library = "lib" + name + ".so";
    fs::copy_file(fs::path(PP_FIXTURE_DIR) / library, dir / "build" / library);
    std::ofstream(dir / (name + ".yaml"))
        << "name: " << name << "\nversion: 1.0.0\nlibrary: " << library << "\nabi: 1\npriority: 20\n"
        << extra;
    return dir / (name + ".yaml");
  }

  DaemonProcess::Options options() const {
    return DaemonProcess::Options{
        std::string(kScript), {"--plugins", plugins().string(), "--manifests", manifests().string()}, {}, false, {}};
  }

 private:
  testing::TempDir root_;
};

testing::ProcessRun cli(const DaemonProcess& daemon, std::vector<std::string> args) {
  args.emplace_back("--socket");
  args.push_back(daemon.socket_path().string());
  return testing::run_passepartout(args, testing::hermetic_env(daemon.dir()));
}

// name -> state of each skill the daemon lists.
std::map<std::string, std::string> skills_of(const DaemonProcess& daemon) {
  const auto run = cli(daemon, {"skills", "list", "--json"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_status == 0);
  std::map<std::string, std::string> states;
  const json document = json::parse(run.out);
  for (const auto& skill : document["skills"]) {
    states[skill["name"].get<std::string>()] = skill["state"].get<std::string>();
  }
  return states;
}

std::vector<std::string> files_in(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("skills install loads a skill that stays across a rescan and a restart, and uninstall takes it away",
          "[integration][install]") {
  InstallSetup setup;
  const fs::path first = setup.built("pass-gate-3");
  const fs::path dependent = setup.built("pass-gate-4", "depends_on: [pass-gate-3]\n");
  std::vector<std::string> folder_args{"--manifests", setup.manifests().string(), "--plugins",
                                       setup.plugins().string()};

  {
    DaemonProcess daemon(setup.options());
    const auto installed = cli(daemon, {"skills", "install", first.string(), "--json"});
    INFO(installed.out << installed.err);
    REQUIRE(installed.exit_status == 0);
    const json result = json::parse(installed.out);
    CHECK(result["ok"] == true);
    CHECK(result["loaded"] == true);
    CHECK(result["upgrade"] == false);
    CHECK(result["manifest"] == (setup.manifests() / "pass-gate-3.yaml").string());
    CHECK(result["library"] == (setup.plugins() / "libpass-gate-3.so").string());
    CHECK(skills_of(daemon)["pass-gate-3"] == "loaded");

    const auto rescanned = cli(daemon, {"skills", "rescan"});
    INFO(rescanned.out << rescanned.err);
    CHECK(rescanned.exit_status == 0);
    CHECK(skills_of(daemon)["pass-gate-3"] == "loaded");

    // Installing it again is an upgrade, swapped in by the daemon.
    const auto again = cli(daemon, {"skills", "install", first.string()});
    INFO(again.out << again.err);
    CHECK(again.exit_status == 0);
    CHECK(again.out.find("Upgraded pass-gate-3 1.0.0:") != std::string::npos);
    CHECK(again.out.find("swapped in the new version") != std::string::npos);

    // The check passes (what it depends on is in the folder) but the daemon, where that is not
    // loaded, refuses: the folders are put back as they were.
    REQUIRE(cli(daemon, {"skills", "unload", "pass-gate-3"}).exit_status == 0);
    const auto refused = cli(daemon, {"skills", "install", dependent.string()});
    INFO(refused.out << refused.err);
    CHECK(refused.exit_status == 1);
    CHECK(refused.err.find("the daemon refused pass-gate-4 1.0.0: ") != std::string::npos);
    CHECK(refused.err.find("the folders were put back as they were") != std::string::npos);
    CHECK(files_in(setup.manifests()) == std::vector<std::string>{"pass-gate-3.yaml"});
    CHECK(files_in(setup.plugins()) == std::vector<std::string>{"libpass-gate-3.so"});

    daemon.signal(SIGTERM);
    REQUIRE(daemon.wait_exit() == 0);
  }

  // No daemon: the folders given; the skill (checked against what it depends on) loads at the next start.
  {
    const auto offline = testing::run_passepartout(
        {"skills", "install", dependent.string(), "--socket", (setup.manifests().parent_path() / "none.sock").string(),
         folder_args[0], folder_args[1], folder_args[2], folder_args[3]},
        testing::hermetic_env(setup.manifests().parent_path()));
    INFO(offline.out << offline.err);
    CHECK(offline.exit_status == 0);
    CHECK(offline.out.find("pass-gate-4 loads when the daemon starts") != std::string::npos);

    // And out again with no daemon: its two files, nothing else.
    const fs::path passing = setup.built("pass-gate-5");
    auto offline_run = [&](std::vector<std::string> args) {
      args.insert(args.end(), {"--socket", (setup.manifests().parent_path() / "none.sock").string()});
      args.insert(args.end(), folder_args.begin(), folder_args.end());
      return testing::run_passepartout(args, testing::hermetic_env(setup.manifests().parent_path()));
    };
    REQUIRE(offline_run({"skills", "install", passing.string()}).exit_status == 0);
    CHECK(files_in(setup.plugins()) ==
          std::vector<std::string>{"libpass-gate-3.so", "libpass-gate-4.so", "libpass-gate-5.so"});
    const auto removed = offline_run({"skills", "uninstall", "pass-gate-5"});
    INFO(removed.out << removed.err);
    CHECK(removed.exit_status == 0);
    CHECK(removed.out.find("No daemon answered at ") != std::string::npos);
    CHECK(removed.out.find("Removed pass-gate-5 1.0.0:") != std::string::npos);
    CHECK(files_in(setup.manifests()) == std::vector<std::string>{"pass-gate-3.yaml", "pass-gate-4.yaml"});
    CHECK(files_in(setup.plugins()) == std::vector<std::string>{"libpass-gate-3.so", "libpass-gate-4.so"});
  }

  DaemonProcess restarted(setup.options());
  auto states = skills_of(restarted);
  CHECK(states["pass-gate-3"] == "loaded");
  CHECK(states["pass-gate-4"] == "loaded");

  // Something depends on it: the daemon refuses, nothing is removed.
  const auto refused = cli(restarted, {"skills", "uninstall", "pass-gate-3"});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_status == 1);
  CHECK(refused.err.find("pass-gate-4") != std::string::npos);
  CHECK(refused.err.find("nothing was removed") != std::string::npos);
  CHECK(files_in(setup.manifests()) == std::vector<std::string>{"pass-gate-3.yaml", "pass-gate-4.yaml"});
  CHECK(files_in(setup.plugins()) == std::vector<std::string>{"libpass-gate-3.so", "libpass-gate-4.so"});

  for (const std::string& name : std::vector<std::string>{"pass-gate-4", "pass-gate-3"}) {
    const auto removed = cli(restarted, {"skills", "uninstall", name, "--json"});
    INFO(removed.out << removed.err);
    REQUIRE(removed.exit_status == 0);
    const json result = json::parse(removed.out);
    CHECK(result["unloaded"] == true);
    CHECK(result["removed"] == json::array({(setup.manifests() / (name + ".yaml")).string(),
                                            (setup.plugins() / ("lib" + name + ".so")).string()}));
  }
  CHECK(skills_of(restarted).empty());
  CHECK(files_in(setup.manifests()).empty());
  CHECK(files_in(setup.plugins()).empty());
  // A rescan brings nothing back.
  CHECK(cli(restarted, {"skills", "rescan"}).exit_status == 0);
  CHECK(skills_of(restarted).empty());

  const auto gone = cli(restarted, {"skills", "uninstall", "pass-gate-3"});
  CHECK(gone.exit_status == 1);
  CHECK(gone.err.find("no manifest in") != std::string::npos);
}

}  // namespace passepartout

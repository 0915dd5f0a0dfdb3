// Tests of the shell actuator's sandbox, loaded through the host with a
// private workspace: the user commands run as, where they may write, the
// resource limits, the network filter, and the line the load logs. Commands
// aim at uniquely named files and remove them, so a broken sandbox breaks nothing.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "configured_skills.hpp"
#include "shell_support.hpp"
#include "support/skill_fixtures.hpp"
#include "value/value.hpp"

namespace {

using passepartout::Value;
using passepartout::testing::ConfiguredSkills;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

using namespace passepartout::testing::shell;

// The line the load logged that contains `needle`; else every line logged,
// so that a failed check shows what was logged instead.
std::string logged(const ConfiguredSkills& skills, std::string_view needle) {
  std::string all;
  for (const std::string& line : skills.logs()) {
    if (line.find(needle) != std::string::npos) return line;
    all += line + "\n";
  }
  return all;
}

bool is_root() { return ::geteuid() == 0; }

// Whether this kernel offers Landlock at all (then the sandbox must use it).
bool kernel_has_landlock() { return ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1U) >= 0; }

// A file name no other run uses.
std::string unique_name() {
  std::random_device random;
  return "passepartout-sandbox-test-" + std::to_string(random()) + "-" + std::to_string(::getpid());
}

// Whether `path` exists; removes it if it does, so a failed check leaves nothing behind.
bool exists_then_remove(const fs::path& path) {
  std::error_code error;
  const bool found = fs::exists(path, error);
  if (found) fs::remove(path, error);
  return found;
}

std::string root_home() {
  const passwd* root = ::getpwuid(0);
  return root != nullptr && root->pw_dir != nullptr ? root->pw_dir : "/root";
}

// Checks that the load logged Landlock in force, or (only on a kernel without
// it) the fallback: a sandbox that silently fell back fails here.
void check_landlock_logged(const ConfiguredSkills& skills) {
  if (kernel_has_landlock()) {
    CHECK_THAT(logged(skills, "sandbox: "), Catch::Contains("writes confined by Landlock (ABI "));
  } else {
    WARN("this kernel has no Landlock: only the fallback is checked");
    CHECK_THAT(logged(skills, "sandbox: "), Catch::Contains("Landlock unavailable ("));
  }
}

// A TCP listener on 127.0.0.1 and a free port, closed when destroyed.
class Listener {
 public:
  Listener() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    socklen_t size = sizeof address;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) == 0);
    port_ = ntohs(address.sin_port);
  }
  ~Listener() { ::close(fd_); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

}  // namespace

TEST_CASE("shell runs commands as nobody, writing only in its workspace and /tmp", "[plugins][sandbox]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
  if (!is_root()) {
    WARN("not root: commands run as the test's own user, so only the log line is checked");
    CHECK_THAT(logged(skills, "sandbox: "), Catch::Contains("sandbox: commands run as the daemon's own user "));
    check_landlock_logged(skills);
    return;
  }
  CHECK_THAT(logged(skills, "sandbox: "),
             Catch::Contains("sandbox: commands run as nobody (uid 65534) in " + dir.path().string() + "; "));
  check_landlock_logged(skills);

  CHECK(run(skills, "id -u") == "65534\n");
  CHECK(run(skills, "id -G") == "65534\n");  // its primary group only
  CHECK(run(skills, "echo kept > note && cat note") == "kept\n");
  CHECK(fs::exists(dir.path() / "note"));
  const std::string temporary = "/tmp/" + unique_name();
  CHECK(run(skills, "echo scratch > " + temporary + " && cat " + temporary) == "scratch\n");
  CHECK(exists_then_remove(temporary));
  CHECK(run(skills, "echo quiet > /dev/null && echo done") == "done\n");
  CHECK(run(skills, "echo out > /dev/stdout; echo err > /dev/stderr; exit 1") == "ERROR [1]: err\n");
  CHECK(run(skills, "mkdir -p sub/deeper && mv note sub/deeper/ && ln -s sub link && rm -r sub link && ls") == "");

  for (const std::string& forbidden : {"/etc/" + unique_name(), root_home() + "/" + unique_name()}) {
    CHECK_THAT(run(skills, "echo x > " + forbidden), Catch::StartsWith("ERROR [1]: "));
    CHECK_FALSE(exists_then_remove(forbidden));
  }
}

TEST_CASE("shell refuses user root unless allow_root is set, and warns when it is", "[plugins][sandbox]") {
  TempDir dir;
  ConfiguredSkills refused({"shell"}, "shell", config(dir.path(), "user: root"));
  CHECK_THAT(refused.load_errors(),
             Catch::Contains("config user: 'root' would run commands as root; set allow_root: true in the shell "
                             "manifest to allow it, or name an unprivileged user"));
  ConfiguredSkills by_number({"shell"}, "shell", config(dir.path(), "user: 0"));
  CHECK_THAT(by_number.load_errors(), Catch::Contains("config user: '0' would run commands as root"));

  if (!is_root()) {
    WARN("not root: allow_root changes nothing to check");
    return;
  }
  ConfiguredSkills allowed({"shell"}, "shell", config(dir.path(), "user: root, allow_root: true"));
  CHECK_THAT(logged(allowed, "commands run as root"), Catch::Contains("commands run as root (allow_root: true)"));
  CHECK(run(allowed, "id -u") == "0\n");
  // Root may write anywhere: only Landlock keeps it out of /etc.
  check_landlock_logged(allowed);
  if (kernel_has_landlock()) {
    const std::string forbidden = "/etc/" + unique_name();
    CHECK_THAT(run(allowed, "echo x > " + forbidden), Catch::StartsWith("ERROR [1]: "));
    CHECK_FALSE(exists_then_remove(forbidden));
  }
}

TEST_CASE("shell without Landlock says so and still runs commands as nobody", "[plugins][sandbox]") {
  if (!is_root()) {
    WARN("not root: commands run as the test's own user, so there is no user to check");
    return;
  }
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path(), "disable_landlock_for_test: true"));
  CHECK_THAT(logged(skills, "sandbox: "),
             Catch::Contains("; Landlock unavailable (disabled by disable_landlock_for_test): writes limited by the "
                             "user's permissions only; "));
  CHECK(run(skills, "id -u") == "65534\n");
  const std::string forbidden = "/etc/" + unique_name();
  CHECK_THAT(run(skills, "echo x > " + forbidden), Catch::StartsWith("ERROR [1]: "));
  CHECK_FALSE(exists_then_remove(forbidden));
}

TEST_CASE("shell hands an empty workspace over to the command's user, and refuses one it should not take",
          "[plugins][sandbox]") {
  if (!is_root()) {
    WARN("not root: commands run as the test's own user, who owns the workspace");
    return;
  }
  TempDir dir;
  SECTION("an empty folder of the daemon's is handed over") {
    ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
    struct stat st {};
    REQUIRE(::stat(dir.path().c_str(), &st) == 0);
    CHECK(st.st_uid == 65534U);
    CHECK_THAT(logged(skills, "handed over"),
               Catch::Contains("workdir " + dir.path().string() + " handed over to nobody (uid 65534)"));
  }
  SECTION("a folder of the daemon's that holds files is not") {
    std::ofstream(dir.path() / "precious") << "keep";
    ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
    CHECK_THAT(skills.load_errors(),
               Catch::Contains("config workdir: '" + dir.path().string() +
                               "' belongs to root (uid 0), not to nobody (uid 65534) who runs the commands, and is "
                               "not empty, so it is not handed over; run 'chown nobody: " +
                               dir.path().string() + "' or set user: to its owner"));
    struct stat st {};
    REQUIRE(::stat(dir.path().c_str(), &st) == 0);
    CHECK(st.st_uid == 0U);
  }
  SECTION("a folder of another user's is not") {
    REQUIRE(::chown(dir.path().c_str(), 54321, 54321) == 0);
    ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
    CHECK_THAT(skills.load_errors(), Catch::Contains("' belongs to uid 54321, not to nobody (uid 65534)"));
  }
  SECTION("a workdir under a folder closed to the user (a 0700 state folder) still works from inside") {
    const fs::path inner = dir.path() / "workspace";  // dir stays root's, mode 0700
    fs::create_directory(inner);
    ConfiguredSkills skills({"shell"}, "shell", config(inner));
    REQUIRE(skills.load_errors().empty());
    CHECK(run(skills, "echo kept > note && cat note && id -u") == "kept\n65534\n");
    CHECK_THAT(run(skills, "ls .."), Catch::StartsWith("ERROR ["));  // the folder above stays closed
  }
}

TEST_CASE("shell applies its resource limits to every command", "[plugins][sandbox]") {
  TempDir dir;
  SECTION("the defaults") {
    ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
    CHECK_THAT(logged(skills, "sandbox: "),
               Catch::EndsWith("; limits: cpu 60 s, memory 2048 MiB, 256 processes, files 1024 MiB, 256 open files"));
    CHECK(run(skills, "ulimit -t; ulimit -v; ulimit -u; ulimit -f; ulimit -n") ==
          "60\n2097152\n256\n1048576\n256\n");  // bash counts KiB for -v and -f
  }
  SECTION("a busy loop ends at the CPU limit, long before its timeout") {
    ConfiguredSkills skills({"shell"}, "shell", config(dir.path(), "limits: {cpu_seconds: 1}"));
    const auto started = std::chrono::steady_clock::now();
    CHECK(run(skills, "while :; do :; done", ":TIMEOUT 20") == "ERROR [152]: ");  // 128 + SIGXCPU
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
  }
  SECTION("a command fails at the memory limit") {
    ConfiguredSkills skills({"shell"}, "shell", config(dir.path(), "limits: {memory_mb: 64}"));
    CHECK_THAT(run(skills, "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}"), Catch::StartsWith("ERROR ["));
    CHECK(run(skills, "echo small") == "small\n");
  }
  SECTION("a file stops growing at the file size limit") {
    ConfiguredSkills skills({"shell"}, "shell", config(dir.path(), "limits: {file_size_mb: 1}"));
    CHECK_THAT(run(skills, "head -c 2000000 /dev/zero > big"), Catch::StartsWith("ERROR ["));
    CHECK(fs::file_size(dir.path() / "big") <= 1024U * 1024U);
  }
}

TEST_CASE("shell refuses bad sandbox config, saying which key and why", "[plugins][sandbox]") {
  const fs::path dir = "/tmp";
  using Case = std::pair<std::string, std::string>;  // config, expected message
  const Case bad = GENERATE_COPY(
      Case{config(dir, "limits: {cpu_seconds: 0}"), "config limits.cpu_seconds: expected a positive integer, got 0"},
      Case{config(dir, "limits: {memory_mb: lots}"),
           "config limits.memory_mb: expected a positive integer, got \"lots\""},
      Case{config(dir, "limits: {open_files: 1.5}"), "config limits.open_files: expected a positive integer, got 1.5"},
      Case{config(dir, "limits: {cpu_second: 5}"),
           "config limits: unknown key 'cpu_second'; did you mean 'cpu_seconds'?"},
      Case{config(dir, "limits: {proceses: 5}"), "config limits: unknown key 'proceses'; did you mean 'processes'?"},
      Case{config(dir, "limits: 5"), "config limits: expected a map such as {cpu_seconds: 60}, got 5"},
      Case{config(dir, "user: no-such-user-passepartout"),
           "config user: no user 'no-such-user-passepartout' on this system"},
      Case{config(dir, "user: [nobody]"), "config user: expected a user name or a numeric uid, got (\"nobody\")"},
      Case{config(dir, "network: maybe"), "config network: expected true or false, got \"maybe\""});
  CAPTURE(bad.first);
  ConfiguredSkills skills({"shell"}, "shell", bad.first);
  CHECK_THAT(skills.load_errors(), Catch::Contains("skill 'shell'") && Catch::Contains(bad.second));
}

TEST_CASE("shell denies commands the network unless network is true", "[plugins][sandbox]") {
  TempDir dir;
  Listener listener;
  const std::string connect = "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(listener.port()) + " && echo connected";
  SECTION("network: false (the default)") {
    ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
    CHECK_THAT(logged(skills, "sandbox: "), Catch::Contains("; network denied (seccomp); "));
    CHECK_THAT(run(skills, connect), Catch::StartsWith("ERROR [1]: ") && Catch::Contains("Permission denied"));
  }
  SECTION("network: true") {
    ConfiguredSkills skills({"shell"}, "shell", config(dir.path(), "network: true"));
    CHECK_THAT(logged(skills, "sandbox: "), Catch::Contains("; network allowed; "));
    CHECK(run(skills, connect) == "connected\n");
  }
}

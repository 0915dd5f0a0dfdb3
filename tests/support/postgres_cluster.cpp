#include "support/postgres_cluster.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace passepartout::testing {
namespace {

namespace fs = std::filesystem;
constexpr auto kStepLimit = std::chrono::seconds(60);
constexpr std::string_view kRole = "passepartout";

// The uid and gid the server runs as: ours, or postgres's when we are root.
struct RunAs {
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  bool change = false;
};

// A step that failed: thrown, so that a test fails with the message (and a
// benchmark, which has no test framework, stops with it).
[[noreturn]] void setup_failed(const std::string& why) { throw std::runtime_error("PostgreSQL cluster: " + why); }

RunAs run_as() {
  RunAs who;
  if (::geteuid() != 0) return who;
  const passwd* entry = ::getpwnam("postgres");
  if (entry == nullptr)
    setup_failed("running as root, and there is no postgres user to run PostgreSQL as (install postgresql-15)");
  who.uid = entry->pw_uid;
  who.gid = entry->pw_gid;
  who.change = true;
  return who;
}

void give_to(const fs::path& path, const RunAs& who) {
  if (!who.change) return;
  if (::chown(path.c_str(), who.uid, who.gid) != 0) setup_failed("chown " + path.string() + " failed");
}

}  // namespace

fs::path PostgresCluster::bin_dir() {
  if (const char* configured = std::getenv("PASSEPARTOUT_PG_BIN"); configured != nullptr && *configured != '\0') {
    return configured;
  }
  const fs::path debian = "/usr/lib/postgresql/15/bin";
  return fs::exists(debian / "initdb") ? debian : fs::path();
}

// Runs `args` (the first a program in bin_dir()) as the server's user, its
// output appended to <dir>/commands.log: its exit status, or -1 when it
// could not be started or outlived kStepLimit (then it is killed). Uses no
// Catch macro: the destructor calls it, at the end of the process too.
int PostgresCluster::spawn(const std::vector<std::string>& args) const {
  const RunAs who = run_as();
  const fs::path log = dir_ / "commands.log";
  std::vector<std::string> argv = args;
  argv[0] = (bin_dir() / argv[0]).string();
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out >= 0) {
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
    }
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in >= 0) ::dup2(in, STDIN_FILENO);
    if (who.change && (::setgroups(0, nullptr) != 0 || ::setgid(who.gid) != 0 || ::setuid(who.uid) != 0)) _exit(126);
    std::vector<char*> raw;
    raw.reserve(argv.size() + 1);
    for (std::string& arg : argv) raw.push_back(arg.data());
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + kStepLimit;
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a child's exit, not hiding a race
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void PostgresCluster::run(const std::vector<std::string>& args) const {
  const int status = spawn(args);
  if (status != 0)
    setup_failed(args[0] + " failed or took longer than " + std::to_string(kStepLimit.count()) + " s (status " +
                 std::to_string(status) + "):\n" + log());
}

PostgresCluster::PostgresCluster() {
  if (bin_dir().empty())
    setup_failed("PostgreSQL 15 is not installed (apt-get install postgresql-15; scripts/setup does)");
  std::random_device random;
  const RunAs who = run_as();
  // The postgres user must reach the folder: /tmp when the tests run as
  // root (whose TMPDIR may be a folder only root can enter).
  const fs::path base = who.change ? fs::path("/tmp") : fs::temp_directory_path();
  dir_ = base / ("passepartout-pg-" + std::to_string(random()));
  fs::create_directories(dir_);
  give_to(dir_, who);
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  run({"initdb", "-D", (dir_ / "data").string(), "-U", std::string(kRole), "--auth=trust", "--no-sync", "-E", "UTF8",
       "--locale=C"});
  start();
}

PostgresCluster::~PostgresCluster() {
  if (running_) spawn({"pg_ctl", "-D", (dir_ / "data").string(), "-m", "immediate", "-w", "-t", "60", "stop"});
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void PostgresCluster::start() {
  const std::string options = "-c listen_addresses='' -k " + dir_.string() +
                              " -p 5432 -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
                              " -c max_connections=200";
  run({"pg_ctl", "-D", (dir_ / "data").string(), "-l", (dir_ / "server.log").string(), "-o", options, "-w", "-t", "60",
       "start"});
  running_ = true;
}

void PostgresCluster::stop() {
  run({"pg_ctl", "-D", (dir_ / "data").string(), "-m", "fast", "-w", "-t", "60", "stop"});
  running_ = false;
}

std::string PostgresCluster::conninfo(std::string_view database) const {
  return "host=" + dir_.string() + " port=5432 user=" + std::string(kRole) + " dbname=" + std::string(database);
}

std::string PostgresCluster::create_database() {
  const std::string name = "t" + std::to_string(++databases_);
  run({"createdb", "-h", dir_.string(), "-p", "5432", "-U", std::string(kRole), name});
  return name;
}

std::string PostgresCluster::log() const {
  std::string text;
  for (const char* file : {"commands.log", "server.log"}) {
    std::ifstream in(dir_ / file);
    std::stringstream content;
    content << in.rdbuf();
    text += std::string("--- ") + file + "\n" + content.str();
  }
  return text;
}

PostgresCluster& shared_postgres() {
  static std::unique_ptr<PostgresCluster> cluster;
  if (!cluster) cluster = std::make_unique<PostgresCluster>();
  return *cluster;
}

}  // namespace passepartout::testing

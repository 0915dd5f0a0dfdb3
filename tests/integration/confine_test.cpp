// `passepartout confine`, the sandbox a stdio MCP server runs in, tried with
// harmless shell commands in temporary folders: writes land only beneath the
// --writable folders, the network is closed with --no-network, the user is
// switched (when the test runs as root), the limits hold, the program dies
// with its parent, and a program that cannot run is reported precisely.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/daemon_process.hpp"
#include "isolation/confine.hpp"
#include "skills/sandbox_spec.hpp"
#include "support/skill_fixtures.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using testing::hermetic_env;
using testing::ProcessRun;
using testing::run_passepartout;
using testing::TempDir;

// `passepartout confine <options> -- /bin/sh -c <script>`.
ProcessRun confined_shell(const TempDir& home, std::vector<std::string> options, const std::string& script,
                          const std::string& shell = "/bin/sh") {
  std::vector<std::string> args{"confine"};
  args.insert(args.end(), options.begin(), options.end());
  args.insert(args.end(), {"--", shell, "-c", script});
  return run_passepartout(args, hermetic_env(home.path()));
}

// A folder anyone may enter and write, as the switched user must.
fs::path open_folder(const TempDir& dir, const std::string& name) {
  const fs::path folder = dir.path() / name;
  fs::create_directories(folder);
  fs::permissions(folder, fs::perms::all);
  fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  return folder;
}

// A loopback TCP listener on a port the kernel chose; closed at the end.
class Listener {
 public:
  Listener() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
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

TEST_CASE("confine's options survive the trip through its arguments", "[integration][confine]") {
  Confinement c;
  c.switch_user = true;
  c.uid = 65534;
  c.gid = 65533;
  c.writable = {"/srv/notes", "/tmp/x y"};
  c.network = false;
  c.open_files = 77;
  c.memory_bytes = std::uint64_t{2} << 30;
  c.cpu_seconds = 9;
  c.parent = 4242;
  const std::vector<std::string> args = confine_arguments(c);
  REQUIRE(args.front() == "confine");
  REQUIRE(args.back() == "--");
  std::vector<std::string> rest(args.begin() + 1, args.end());
  rest.emplace_back("/bin/true");
  std::size_t program = 0;
  const auto parsed = parse_confine_arguments(rest, &program);
  REQUIRE(parsed.has_value());
  CHECK(rest[program] == "/bin/true");
  CHECK(parsed->switch_user);
  CHECK(parsed->uid == 65534);
  CHECK(parsed->gid == 65533);
  CHECK(parsed->writable == c.writable);
  CHECK_FALSE(parsed->network);
  CHECK(parsed->open_files == 77);
  CHECK(parsed->memory_bytes == c.memory_bytes);
  CHECK(parsed->cpu_seconds == 9);
  CHECK(parsed->parent == 4242);

  const std::vector<std::string> relative{"--writable", "notes", "--", "x"};
  const auto refused = parse_confine_arguments(relative, &program);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().message.find("--writable: 'notes' is not valid") != std::string::npos);
  const std::vector<std::string> no_program{"--no-network", "--"};
  CHECK_FALSE(parse_confine_arguments(no_program, &program).has_value());
}

TEST_CASE("a confined program writes beneath its writable folders and nowhere else", "[integration][confine]") {
  if (sandbox_capabilities().landlock_abi == 0) {
    WARN("Landlock is unavailable here (" << sandbox_capabilities().landlock_reason << "): not checked");
    return;
  }
  TempDir dir;
  const fs::path inside = open_folder(dir, "inside");
  const fs::path outside = open_folder(dir, "outside");
  const ProcessRun run = confined_shell(
      dir, {"--writable", inside.string()},
      "echo a > " + inside.string() + "/a && mkdir " + inside.string() + "/sub && echo in-ok; echo b > " +
          outside.string() + "/b || echo out-denied; mkdir " + outside.string() + "/sub || echo mkdir-denied");
  INFO(run.err);
  CHECK(run.exit_status == 0);
  CHECK(run.out == "in-ok\nout-denied\nmkdir-denied\n");
  CHECK(fs::exists(inside / "a"));
  CHECK_FALSE(fs::exists(outside / "b"));
  CHECK_FALSE(fs::exists(outside / "sub"));
}

TEST_CASE("a confined program without the network cannot open an internet socket", "[integration][confine]") {
  TempDir dir;
  const Listener listener;
  const std::string connect =
      "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(listener.port()) + " && echo connected || echo refused";
  const ProcessRun open = confined_shell(dir, {}, connect, "/bin/bash");
  INFO(open.err);
  CHECK(open.out == "connected\n");
  const ProcessRun closed = confined_shell(dir, {"--no-network"}, connect, "/bin/bash");
  INFO(closed.err);
  CHECK(closed.out == "refused\n");
  CHECK(closed.err.find("socket: Permission denied") != std::string::npos);
}

TEST_CASE("a confined program runs with its limits, no core dumps and no new privileges", "[integration][confine]") {
  TempDir dir;
  const ProcessRun run = confined_shell(dir, {"--open-files", "99", "--cpu-seconds", "30"},
                                        "ulimit -n; ulimit -c; ulimit -t; grep NoNewPrivs: /proc/self/status");
  INFO(run.err);
  CHECK(run.out == "99\n0\n30\nNoNewPrivs:\t1\n");
}

TEST_CASE("a confined program runs as the given user when the daemon is root", "[integration][confine]") {
  if (::geteuid() != 0) {
    WARN("not root: the user switch is not checked");
    return;
  }
  TempDir dir;
  const fs::path inside = open_folder(dir, "inside");
  const ProcessRun run = confined_shell(dir, {"--user", "65534:65534", "--writable", inside.string()},
                                        "id -u; id -g; id -G; touch " + inside.string() + "/mine");
  INFO(run.err);
  CHECK(run.out == "65534\n65534\n65534\n");
  struct stat info {};
  REQUIRE(::stat((inside / "mine").c_str(), &info) == 0);
  CHECK(info.st_uid == 65534);
}

TEST_CASE("a confined program dies with the process that started it", "[integration][confine]") {
  TempDir dir;
  const fs::path pid_file = dir.path() / "pid";
  const fs::path fifo = dir.path() / "fifo";
  // The shell starts a confined shell in the background, whose parent it
  // is; once that one is confined it says its pid through the fifo and
  // becomes a sleep; the first one writes the pid down and exits.
  const std::string script = "mkfifo " + fifo.string() + "; \"$0\" confine --parent $$ --writable " +
                             dir.path().string() + " -- /bin/sh -c 'echo $$ > " + fifo.string() +
                             "; exec /bin/sleep 60' >/dev/null 2>&1 & read pid < " + fifo.string() + "; echo $pid > " +
                             pid_file.string();
  const ProcessRun run = run_passepartout(
      {"confine", "--writable", dir.path().string(), "--", "/bin/sh", "-c", script, PP_PASSEPARTOUT_EXE},
      hermetic_env(dir.path()));
  INFO(run.err);
  REQUIRE(run.exit_status == 0);
  const std::string pid = testing::read_text_file(pid_file);
  REQUIRE_FALSE(pid.empty());
  const fs::path stat_file = "/proc/" + pid.substr(0, pid.find('\n')) + "/stat";
  const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
  bool gone = false;
  while (!gone && std::chrono::steady_clock::now() < deadline) {
    const std::string stat = testing::read_text_file(stat_file);
    const std::size_t close = stat.rfind(')');
    gone = stat.empty() || (close != std::string::npos && stat.compare(close + 2, 1, "Z") == 0);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gone);
}

TEST_CASE("confine reports a program it cannot run, and bad options", "[integration][confine]") {
  TempDir dir;
  const ProcessRun missing = run_passepartout({"confine", "--", "no-such-program-here"}, hermetic_env(dir.path()));
  CHECK(missing.exit_status == 127);
  CHECK(missing.err == "confine: cannot run 'no-such-program-here': No such file or directory\n");
  const ProcessRun bad = run_passepartout({"confine", "--open-files", "many", "--", "true"}, hermetic_env(dir.path()));
  CHECK(bad.exit_status == 2);
  CHECK(bad.err.find("--open-files: 'many' is not valid") != std::string::npos);
  // A parent gone before the death signal was armed: the program does not start.
  const ProcessRun orphan = run_passepartout({"confine", "--parent", "1", "--", "true"}, hermetic_env(dir.path()));
  CHECK(orphan.exit_status == 126);
  CHECK(orphan.err == "confine: the daemon (pid 1) is gone\n");
  const ProcessRun help = run_passepartout({"confine", "--help"}, hermetic_env(dir.path()));
  CHECK(help.exit_status == 0);
  CHECK(help.out.find("usage: passepartout confine") != std::string::npos);
}

}  // namespace
}  // namespace passepartout

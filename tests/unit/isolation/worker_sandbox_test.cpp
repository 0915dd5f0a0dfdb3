// Tests of the skill process's sandbox: each runs apply_worker_sandbox in a
// forked child, which tries things and reports "key=value" lines over a pipe
// before it _exits; the assertions run here, in the test's process.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "isolation/worker_sandbox.hpp"
#include "support/skill_fixtures.hpp"

using passepartout::apply_worker_sandbox;
using passepartout::drain_sandbox_denials;
using passepartout::SandboxSpec;
using passepartout::syscall_name;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// What a child reports: key -> value.
using Facts = std::map<std::string, std::string>;

// "openat,socket": the names of what was denied since the last drain, sorted.
std::string drained_names() {
  std::vector<std::string> names;
  for (const int number : drain_sandbox_denials()) names.push_back(syscall_name(number));
  std::sort(names.begin(), names.end());
  std::string joined;
  for (const auto& name : names) joined += (joined.empty() ? "" : ",") + name;
  return joined;
}

// The errno of a call that returned -1, or "ok".
std::string outcome(long result) { return result < 0 ? std::to_string(errno) : "ok"; }

// Forks; the child applies `spec`, runs `body` and reports. Waits at most 30 s.
Facts run_sandboxed(const SandboxSpec& spec, const std::function<void(Facts&)>& body) {
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    Facts facts;
    auto applied = apply_worker_sandbox(spec);
    if (applied) {
      facts["report"] = applied->description;
      body(facts);
    } else {
      facts["apply_error"] = applied.error().message;
    }
    std::string text;
    for (const auto& [key, value] : facts) text += key + "=" + value + "\n";
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(pipe_fds[1], text.data() + done, text.size() - done);
      if (n <= 0) ::_exit(2);
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE_FALSE(timed_out);
  INFO(text);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);

  Facts facts;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t equals = line.find('=');
    if (equals != std::string::npos) facts[line.substr(0, equals)] = line.substr(equals + 1);
  }
  INFO("apply_error: " << facts["apply_error"]);
  REQUIRE(facts.count("report") == 1);
  return facts;
}

// The address space this process uses now (VmSize), in bytes.
std::uint64_t address_space_in_use() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  }
  return 0;
}

// A spec whose memory limit leaves `headroom` above what the test process maps already.
SandboxSpec spec_with_headroom(std::uint64_t headroom = std::uint64_t{256} << 20) {
  SandboxSpec spec;
  spec.memory_bytes = std::max(spec.memory_bytes, address_space_in_use() + headroom);
  return spec;
}

bool has_seccomp() { return passepartout::sandbox_capabilities().seccomp; }

constexpr bool kSanitizerBuild =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    true;
#else
    false;
#endif

}  // namespace

TEST_CASE("the worker sandbox denies opening files, sockets, fork, execve and ptrace with EPERM and records each",
          "[isolation]") {
  if (!has_seccomp()) {
    WARN("seccomp unavailable here (" << passepartout::sandbox_capabilities().seccomp_reason << "): not tested");
    return;
  }
  Facts facts = run_sandboxed(spec_with_headroom(), [](Facts& out) {
    drain_sandbox_denials();
    out["open"] = outcome(::open("/etc/passwd", O_RDONLY | O_CLOEXEC));
    out["socket"] = outcome(::socket(AF_UNIX, SOCK_STREAM, 0));
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    out["fork"] = outcome(child);
    // posix_spawn blocks every signal around its clone: refused, not killed.
    out["system"] = std::to_string(std::system("exit 0"));
    char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    out["execve"] = outcome(::execve("/bin/true", argv, nullptr));
    out["ptrace"] = outcome(::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr));
    out["clone3"] = outcome(::syscall(SYS_clone3, nullptr, 0));
    struct sigaction replace {};
    replace.sa_handler = SIG_DFL;
    out["sigaction_sigsys"] = outcome(::sigaction(SIGSYS, &replace, nullptr));
    out["denied"] = drained_names();
    out["denied_again"] = drained_names();
  });
  INFO(facts["report"]);
  const std::string eperm = std::to_string(EPERM);
  CHECK(facts["open"] == eperm);
  CHECK(facts["socket"] == eperm);
  CHECK(facts["fork"] == eperm);
  CHECK(facts["system"] != "0");  // the child was never started, and this process survived to say so
  CHECK(facts["execve"] == eperm);
  CHECK(facts["ptrace"] == eperm);
  CHECK(facts["clone3"] == std::to_string(ENOSYS));  // glibc then falls back to clone
  CHECK(facts["sigaction_sigsys"] == eperm);
#if defined(__x86_64__) || defined(__aarch64__)
  CHECK(facts["denied"] == "execve,openat,ptrace,rt_sigaction,socket");  // fork is refused without the trap
  CHECK(facts["denied_again"].empty());
#endif
}

TEST_CASE("inside the worker sandbox a thread starts and joins and a socketpair made before carries data",
          "[isolation]") {
  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
  Facts facts = run_sandboxed(spec_with_headroom(), [&](Facts& out) {
    bool ran = false;
    try {
      std::thread worker([&] { ran = true; });
      worker.join();
      out["thread"] = ran ? "joined" : "did not run";
    } catch (const std::exception& e) {
      out["thread"] = std::string("failed: ") + e.what();
    }
    const char message[] = "ping";
    out["write"] = outcome(::write(pair[0], message, sizeof message));
    char got[sizeof message] = {};
    const ssize_t n = ::read(pair[1], got, sizeof got);
    out["read"] = n == static_cast<ssize_t>(sizeof message) ? std::string(got) : outcome(n);
    msghdr header{};
    iovec part{const_cast<char*>(message), sizeof message};
    header.msg_iov = &part;
    header.msg_iovlen = 1;
    out["sendmsg"] = outcome(::sendmsg(pair[1], &header, 0));
    pollfd p{pair[0], POLLIN, 0};
    out["poll"] = std::to_string(::poll(&p, 1, 1000));
    out["denied"] = drained_names();
  });
  ::close(pair[0]);
  ::close(pair[1]);
  INFO(facts["report"]);
  CHECK(facts["thread"] == "joined");
  CHECK(facts["write"] == "ok");
  CHECK(facts["read"] == "ping");
  CHECK(facts["sendmsg"] == "ok");
  CHECK(facts["poll"] == "1");
  CHECK(facts["denied"].empty());
}

TEST_CASE("the worker sandbox limits the address space so a 1 GiB allocation fails", "[isolation]") {
  if (kSanitizerBuild) {
    WARN("a sanitizer build: RLIMIT_AS is not set (its shadow memory needs the address space), so not tested");
    return;
  }
  Facts facts = run_sandboxed(spec_with_headroom(), [](Facts& out) {
    void* big = std::malloc(std::size_t{1} << 30);
    out["malloc"] = big == nullptr ? "null" : "allocated";
    std::free(big);
    void* small = std::malloc(std::size_t{1} << 20);
    out["small"] = small == nullptr ? "null" : "allocated";
    std::free(small);
  });
  INFO(facts["report"]);
  CHECK(facts["malloc"] == "null");
  CHECK(facts["small"] == "allocated");
  CHECK(facts["report"].find("memory ") != std::string::npos);
}

TEST_CASE("sandbox files allows reading beneath the listed folder only and never writing", "[isolation]") {
  if (!has_seccomp()) {
    WARN("seccomp unavailable here: not tested");
    return;
  }
  TempDir allowed;
  TempDir other;
  // Readable by anyone: as root, the sandboxed child is nobody.
  for (const fs::path& dir : {allowed.path(), other.path()}) {
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                             fs::perms::others_exec);
    std::ofstream(dir / "data.txt") << "inside";
    fs::permissions(dir / "data.txt",
                    fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  }
  SandboxSpec spec = spec_with_headroom();
  spec.files = {allowed.path()};
  const std::string inside = (allowed.path() / "data.txt").string();
  const std::string outside = (other.path() / "data.txt").string();
  Facts facts = run_sandboxed(spec, [&](Facts& out) {
    drain_sandbox_denials();
    const int fd = ::open(inside.c_str(), O_RDONLY | O_CLOEXEC);
    out["inside"] = outcome(fd);
    if (fd >= 0) {
      char text[16] = {};
      out["inside_text"] = ::read(fd, text, sizeof text - 1) > 0 ? text : "unread";
      ::close(fd);
    }
    out["outside"] = outcome(::open(outside.c_str(), O_RDONLY | O_CLOEXEC));
    out["write_inside"] = outcome(::open(inside.c_str(), O_WRONLY | O_CLOEXEC));
    out["create_inside"] = outcome(::open((allowed.path() / "new.txt").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    out["denied"] = drained_names();
  });
  INFO(facts["report"]);
  CHECK(facts["inside"] == "ok");
  CHECK(facts["inside_text"] == "inside");
  CHECK(facts["write_inside"] == std::to_string(EPERM));
  CHECK(facts["create_inside"] == std::to_string(EPERM));
  CHECK_FALSE(fs::exists(allowed.path() / "new.txt"));
  if (passepartout::sandbox_capabilities().landlock_abi > 0) {
    CHECK(facts["outside"] == std::to_string(EACCES));  // Landlock
  } else {
    WARN("Landlock unavailable (" << passepartout::sandbox_capabilities().landlock_reason
                                  << "): a read outside the listed folder is not refused here");
  }
}

TEST_CASE("sandbox network true allows creating sockets", "[isolation]") {
  SandboxSpec spec = spec_with_headroom();
  spec.network = true;
  Facts facts = run_sandboxed(spec, [](Facts& out) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    out["socket"] = outcome(fd);
    if (fd >= 0) ::close(fd);
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    out["fork"] = outcome(child);
  });
  INFO(facts["report"]);
  CHECK(facts["socket"] == "ok");
  if (has_seccomp()) CHECK(facts["fork"] == std::to_string(EPERM));
}

TEST_CASE("sandbox processes true allows fork and running a program", "[isolation]") {
  SandboxSpec spec = spec_with_headroom();
  spec.processes = true;
  Facts facts = run_sandboxed(spec, [](Facts& out) {
    const pid_t child = ::fork();
    if (child == 0) {
      char* const argv[] = {const_cast<char*>("/bin/sh"), const_cast<char*>("-c"), const_cast<char*>("exit 7"),
                            nullptr};
      ::execve("/bin/sh", argv, nullptr);
      ::_exit(100 + errno % 100);
    }
    out["fork"] = outcome(child);
    int status = 0;
    if (child > 0 && ::waitpid(child, &status, 0) == child) {
      out["status"] = WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "signalled";
    }
    out["socket"] = outcome(::socket(AF_INET, SOCK_STREAM, 0));
  });
  INFO(facts["report"]);
  CHECK(facts["fork"] == "ok");
  CHECK(facts["status"] == "7");
  if (has_seccomp()) CHECK(facts["socket"] == std::to_string(EPERM));
}

TEST_CASE("the worker sandbox refuses to apply while other threads run and changes nothing", "[isolation]") {
  if (passepartout::sandbox_capabilities().landlock_abi == 0) {
    WARN("Landlock unavailable: a sandbox with threads running is allowed here, so not tested");
    return;
  }
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // A second thread, blocked until the process ends.
    int hold[2];
    if (::pipe(hold) != 0) ::_exit(2);
    std::thread waiting([&] {
      char byte = 0;
      [[maybe_unused]] const ssize_t got = ::read(hold[0], &byte, 1);
    });
    const uid_t before = ::geteuid();
    auto applied = apply_worker_sandbox(SandboxSpec{});
    const bool unchanged = ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 0 && ::geteuid() == before;
    const std::string text =
        (applied ? std::string("applied") : applied.error().message) + "\n" + (unchanged ? "unchanged" : "changed");
    [[maybe_unused]] const ssize_t n = ::write(pipe_fds[1], text.data(), text.size());
    ::_exit(0);  // ends the waiting thread too
  }
  ::close(pipe_fds[1]);
  std::string text;
  char buffer[512];
  ssize_t n = 0;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO(text);
  CHECK(text.find("sandbox: the process runs 2 threads; apply the sandbox before starting any") != std::string::npos);
  CHECK(text.find("unchanged") != std::string::npos);
}

TEST_CASE("syscall names come from the architecture's table", "[isolation]") {
  CHECK(syscall_name(SYS_openat) == "openat");
  CHECK(syscall_name(SYS_socket) == "socket");
  CHECK(syscall_name(99999) == "syscall 99999");
}

// `passepartout confine`: the options, their description, and the process
// that applies them and becomes the program (see confine.hpp for the order).
#include "isolation/confine.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/errno_text.hpp"
#include "isolation/landlock.hpp"

namespace passepartout {

namespace {

namespace fs = std::filesystem;

// The exit statuses of a shell that cannot run a command.
constexpr int kCannotRun = 126;
constexpr int kNotFound = 127;

// Devices a program writes to without meaning to change anything.
constexpr const char* kDevices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"};

template <typename Number>
bool parse_number(std::string_view text, Number& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

std::string account_text(uid_t uid) {
  std::string name = std::to_string(uid);
  if (const passwd* entry = ::getpwuid(uid); entry != nullptr) name = entry->pw_name;  // NOLINT(concurrency-mt-unsafe)
  return name + " (uid " + std::to_string(uid) + ")";
}

// --- the steps, in the confined process ---------------------------------------------

[[noreturn]] void give_up(const std::string& step, int error, int status = kCannotRun) {
  std::fprintf(stderr, "confine: %s: %s\n", step.c_str(), errno_text(error).c_str());
  std::fflush(stderr);
  ::_exit(status);
}

void lower_limit(int resource, const char* name, rlim_t soft, rlim_t hard) {
  rlimit current{};
  if (::getrlimit(resource, &current) != 0) give_up(std::string("getrlimit(") + name + ")", errno);
  const rlimit wanted{std::min(soft, current.rlim_max), std::min(hard, current.rlim_max)};
  if (::setrlimit(resource, &wanted) != 0) give_up(std::string("setrlimit(") + name + ")", errno);
}

void set_limits(const Confinement& c) {
  lower_limit(RLIMIT_CORE, "RLIMIT_CORE", 0, 0);  // a dump would hold what it was given (tokens)
  lower_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", c.open_files, c.open_files);
  if (c.memory_bytes != 0) lower_limit(RLIMIT_AS, "RLIMIT_AS", c.memory_bytes, c.memory_bytes);
  // At the soft limit SIGXCPU, a second later SIGKILL.
  if (c.cpu_seconds != 0) lower_limit(RLIMIT_CPU, "RLIMIT_CPU", c.cpu_seconds, c.cpu_seconds + 1);
}

void switch_user(const Confinement& c) {
  if (!c.switch_user) return;
  if (::setgroups(0, nullptr) != 0) give_up("setgroups({})", errno);
  if (::setresgid(c.gid, c.gid, c.gid) != 0) give_up("setresgid(" + std::to_string(c.gid) + ")", errno);
  if (::setresuid(c.uid, c.uid, c.uid) != 0) give_up("setresuid(" + std::to_string(c.uid) + ")", errno);
}

// Dies with the daemon's thread that started it. A credential change clears
// the signal, hence after switch_user; a daemon gone before this line left
// no parent to signal it, hence the check.
void die_with_parent(const Confinement& c) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L) != 0) give_up("prctl(PR_SET_PDEATHSIG)", errno);
  if (c.parent != 0 && ::getppid() != c.parent) {
    std::fprintf(stderr, "confine: the daemon (pid %d) is gone\n", static_cast<int>(c.parent));
    ::_exit(kCannotRun);
  }
}

void allow_writes_beneath(int ruleset, const char* path, std::uint64_t access, bool must_exist) {
  const int target = ::open(path, O_PATH | O_CLOEXEC);
  if (target < 0) {
    if (!must_exist && (errno == ENOENT || errno == ENXIO || errno == ENODEV)) return;
    give_up(std::string("cannot open ") + path + " for Landlock", errno);
  }
  landlock_path_beneath_attr rule{};
  rule.allowed_access = access;
  rule.parent_fd = target;
  const long added = ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0U);
  const int error = errno;
  ::close(target);
  if (added != 0) give_up(std::string("Landlock refused a rule for ") + path, error);
}

void apply_landlock(const Confinement& c, int abi) {
  if (abi <= 0) return;
  const std::uint64_t writes = landlock::write_accesses(abi);
  const int ruleset = landlock::create_ruleset(abi, writes, c.network);
  if (ruleset < 0) give_up("landlock_create_ruleset", errno);
  for (const fs::path& folder : c.writable) allow_writes_beneath(ruleset, folder.c_str(), writes, true);
  // `> /dev/null` opens with O_TRUNC, which ABI 3 counts as truncating.
  const std::uint64_t device_writes = LANDLOCK_ACCESS_FS_WRITE_FILE | (writes & LANDLOCK_ACCESS_FS_TRUNCATE);
  for (const char* device : kDevices) allow_writes_beneath(ruleset, device, device_writes, false);
  if (::syscall(SYS_landlock_restrict_self, ruleset, 0U) != 0) give_up("landlock_restrict_self", errno);
  ::close(ruleset);
}

void deny_network() {
  const std::unique_ptr<void, void (*)(scmp_filter_ctx)> context(::seccomp_init(SCMP_ACT_ALLOW), ::seccomp_release);
  if (!context) give_up("seccomp_init", ENOMEM);
  auto check = [](int result, const char* what) {
    if (result < 0) give_up(std::string("seccomp ") + what, -result);
  };
  // socket() takes an int: compare only the low 32 bits of the register.
  for (const int domain : {AF_INET, AF_INET6, AF_PACKET}) {
    const scmp_arg_cmp first_argument{0, SCMP_CMP_MASKED_EQ, 0xFFFFFFFFU, static_cast<scmp_datum_t>(domain)};
    check(::seccomp_rule_add_array(context.get(), SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, &first_argument),
          "rule for socket()");
  }
  // io_uring creates sockets without the socket() system call.
  check(::seccomp_rule_add(context.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(io_uring_setup), 0), "rule for io_uring");
  check(::seccomp_load(context.get()), "seccomp_load");
}

}  // namespace

std::vector<std::string> confine_arguments(const Confinement& c) {
  std::vector<std::string> out{"confine"};
  if (c.switch_user) out.insert(out.end(), {"--user", std::to_string(c.uid) + ":" + std::to_string(c.gid)});
  for (const fs::path& folder : c.writable) out.insert(out.end(), {"--writable", folder.string()});
  if (!c.network) out.emplace_back("--no-network");
  out.insert(out.end(), {"--open-files", std::to_string(c.open_files)});
  if (c.memory_bytes != 0) out.insert(out.end(), {"--memory", std::to_string(c.memory_bytes)});
  if (c.cpu_seconds != 0) out.insert(out.end(), {"--cpu-seconds", std::to_string(c.cpu_seconds)});
  if (c.parent != 0) out.insert(out.end(), {"--parent", std::to_string(c.parent)});
  out.emplace_back("--");
  return out;
}

Result<Confinement> parse_confine_arguments(std::span<const std::string> arguments, std::size_t* program) {
  Confinement c;
  const auto bad = [](const std::string& what) {
    return fail(ErrorCode::invalid_input, "confine: " + what + " (usage: confine [OPTIONS] -- PROGRAM ARGS...)");
  };
  std::size_t i = 0;
  for (; i < arguments.size() && arguments[i] != "--"; ++i) {
    const std::string& option = arguments[i];
    const bool has_value = option != "--no-network";
    if (has_value && i + 1 >= arguments.size()) return bad(option + " needs a value");
    const std::string_view value = has_value ? std::string_view(arguments[i + 1]) : std::string_view();
    bool ok = true;
    if (option == "--user") {
      const std::size_t colon = value.find(':');
      ok = colon != std::string_view::npos && parse_number(value.substr(0, colon), c.uid) &&
           parse_number(value.substr(colon + 1), c.gid);
      c.switch_user = true;
    } else if (option == "--writable") {
      ok = !value.empty() && value.front() == '/';
      c.writable.emplace_back(value);
    } else if (option == "--no-network") {
      c.network = false;
    } else if (option == "--open-files") {
      ok = parse_number(value, c.open_files) && c.open_files > 0;
    } else if (option == "--memory") {
      ok = parse_number(value, c.memory_bytes) && c.memory_bytes > 0;
    } else if (option == "--cpu-seconds") {
      ok = parse_number(value, c.cpu_seconds) && c.cpu_seconds > 0;
    } else if (option == "--parent") {
      ok = parse_number(value, c.parent) && c.parent > 0;
    } else {
      return bad("unknown option '" + option + "'");
    }
    if (!ok) return bad(option + ": '" + std::string(value) + "' is not valid");
    if (has_value) ++i;
  }
  if (i + 1 >= arguments.size()) return bad("no program after '--'");
  *program = i + 1;
  return c;
}

std::string describe(const Confinement& c, const SandboxCapabilities& capabilities) {
  std::string text = "runs as " + account_text(c.switch_user ? c.uid : ::geteuid());
  if (capabilities.landlock_abi > 0) {
    text += "; writes confined by Landlock (ABI " + std::to_string(capabilities.landlock_abi) + ") to ";
    if (c.writable.empty()) text += "no folder";
    for (std::size_t i = 0; i < c.writable.size(); ++i) text += (i == 0 ? "" : ", ") + c.writable[i].string();
  } else {
    text += "; writes NOT confined (" + capabilities.landlock_reason + ")";
  }
  text += c.network ? "; network allowed" : "; network denied";
  text += "; open files " + std::to_string(c.open_files);
  if (c.memory_bytes != 0) text += "; memory " + size_text(c.memory_bytes);
  if (c.cpu_seconds != 0) text += "; cpu " + std::to_string(c.cpu_seconds) + " s";
  return text;
}

int run_confine(int argc, char** argv) {
  const std::vector<std::string> arguments(argv + 2, argv + argc);
  if (arguments.empty() || arguments.front() == "--help" || arguments.front() == "-h") {
    std::fputs(
        "usage: passepartout confine [--user UID:GID] [--writable DIR]... [--no-network]\n"
        "                            [--open-files N] [--memory BYTES] [--cpu-seconds N] [--parent PID]\n"
        "                            -- PROGRAM ARGS...\n"
        "Runs PROGRAM as the daemon runs an MCP server over stdio: no core dumps and the given limits,\n"
        "the given user (when root), killed when its parent dies, writes confined by Landlock to the\n"
        "--writable folders, and with --no-network no TCP, UDP or raw sockets.\n",
        arguments.empty() ? stderr : stdout);
    return arguments.empty() ? 2 : 0;
  }
  std::size_t program = 0;
  auto confinement = parse_confine_arguments(arguments, &program);
  if (!confinement) {
    std::fprintf(stderr, "%s\n", confinement.error().message.c_str());
    return 2;
  }
  const Confinement& c = *confinement;
  const SandboxCapabilities capabilities = probe_sandbox();
  if (!c.network && !capabilities.seccomp) {
    std::fprintf(stderr, "confine: the network cannot be denied: %s\n", capabilities.seccomp_reason.c_str());
    return kCannotRun;
  }
  set_limits(c);
  switch_user(c);
  die_with_parent(c);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0) give_up("prctl(PR_SET_NO_NEW_PRIVS)", errno);
  apply_landlock(c, capabilities.landlock_abi);
  if (!c.network) deny_network();

  // argv + 2 + program: the program and its arguments, NULL-terminated as main's are.
  char** const command = argv + 2 + program;
  ::execvp(command[0], command);
  give_up(std::string("cannot run '") + command[0] + "'", errno, errno == ENOENT ? kNotFound : kCannotRun);
}

}  // namespace passepartout

// The shell actuator's sandbox: config, the protections prepared at create
// (user, limits, Landlock ruleset, seccomp program) and the forked child that applies them.
#include "sandbox.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <pwd.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "skill_config.hpp"
#include "skill_text.hpp"

// Debian 12's kernel headers stop at Landlock ABI 2; the values are the kernel's stable ABI.
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace passepartout::shell {

// What the child reports on its error pipe when a step before execve fails.
struct ChildFailure {
  int step;
  int detail;
  int error;  // errno
};

namespace {

using bundled::boolean;
using bundled::decimal;
using bundled::error_text;
using bundled::Fd;

constexpr const char* kDevices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"};
constexpr std::int64_t kMiB = std::int64_t{1024} * 1024;

// The write-type accesses Landlock ABI 1 knows; reading and executing stay allowed.
constexpr std::uint64_t kWritesAbi1 = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                                      LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                                      LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                                      LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                                      LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;

// struct landlock_ruleset_attr as of ABI 6 (Debian 12's header has only the first member).
struct RulesetAttributes {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;
  std::uint64_t scoped;
};

// --- config --------------------------------------------------------------------------

struct LimitSpec {
  const char* name;  // under `limits:`
  int resource;
  std::int64_t fallback;
  std::int64_t unit;  // bytes per configured unit
};

constexpr LimitSpec kLimits[] = {
    {"cpu_seconds", RLIMIT_CPU, 60, 1},    {"memory_mb", RLIMIT_AS, 2048, kMiB},
    {"processes", RLIMIT_NPROC, 256, 1},   {"file_size_mb", RLIMIT_FSIZE, 1024, kMiB},
    {"open_files", RLIMIT_NOFILE, 256, 1},
};

const char* resource_name(int resource) {
  switch (resource) {
    case RLIMIT_CPU:
      return "RLIMIT_CPU";
    case RLIMIT_AS:
      return "RLIMIT_AS";
    case RLIMIT_NPROC:
      return "RLIMIT_NPROC";
    case RLIMIT_FSIZE:
      return "RLIMIT_FSIZE";
    case RLIMIT_NOFILE:
      return "RLIMIT_NOFILE";
    default:
      return "a resource limit";
  }
}

// Edits (insert, delete, substitute) that turn `a` into `b`.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// --- users ---------------------------------------------------------------------------

struct Account {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;  // empty for a uid without a passwd entry
};

// The passwd entry of `name`, or of `uid` when `name` is empty; false when there is none.
bool find_account(const std::string& name, uid_t uid, Account& out) {
  std::vector<char> buffer(16384);
  for (;;) {
    passwd entry{};
    passwd* found = nullptr;
    const int error = name.empty() ? ::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found)
                                   : ::getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
    if (error == ERANGE && buffer.size() < (1U << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    if (error != 0 || found == nullptr) return false;
    out = Account{found->pw_uid, found->pw_gid, found->pw_name};
    return true;
  }
}

// "nobody (uid 65534)", or "uid 1234" for a uid without a name.
std::string account_text(uid_t uid) {
  Account account;
  if (find_account("", uid, account)) return account.name + " (uid " + decimal(uid) + ")";
  return "uid " + decimal(uid);
}

bool is_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// --- the child -------------------------------------------------------------------------

// What the child reports on its error pipe when a step before execve fails.
enum Step : int {
  step_signals,
  step_process_group,
  step_stdio,
  step_close_range,
  step_limit,  // detail: index into the limits
  step_setgroups,
  step_setresgid,
  step_setresuid,
  step_death_signal,
  step_chdir,
  step_no_new_privs,
  step_landlock,
  step_seccomp,
  step_execve,
};

// Everything the child reads, prepared by the parent: between fork and
// execve the child allocates nothing and calls only async-signal-safe
// functions and raw system calls (another thread of the daemon may have held
// the allocator's lock at the fork).
struct ChildPlan {
  const Launch* launch;
  const char* workdir;
  int null_fd;
  int error_fd;
  pid_t parent;
  bool switches_user;
  uid_t uid;
  gid_t gid;
  const rlimit64* limits;  // resources in limit_ids (prlimit64's layout)
  const int* limit_ids;
  std::size_t limit_count;
  int ruleset_fd;            // -1: no Landlock
  const sock_fprog* filter;  // nullptr: no seccomp
};

[[noreturn]] void fail(int error_fd, Step step, int detail = 0) {
  const ChildFailure failure{step, detail, errno};
  [[maybe_unused]] const ssize_t written = ::write(error_fd, &failure, sizeof failure);
  ::_exit(127);
}

// The child between fork and execve. Order matters: chdir before the
// identity changes (the workdir's parents may be closed to the command's
// user), identity before the death signal (a credential change clears it),
// no_new_privs before Landlock and seccomp (both require it when unprivileged).
[[noreturn]] void run_child(const ChildPlan& plan) {
  // The error pipe above 2, so that setting up stdio cannot overwrite it.
  const int error_fd = ::fcntl(plan.error_fd, F_DUPFD_CLOEXEC, 3);
  if (error_fd < 0) ::_exit(127);

  // The parent blocked every signal around fork so that none of its handlers
  // runs here; back to defaults (an ignored SIGPIPE would survive execve),
  // then unblocked.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &default_action, nullptr);  // glibc-internal ones refuse
  }
  sigset_t none;
  ::sigemptyset(&none);
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the forked child has one thread
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) fail(error_fd, step_signals);

  if (::setpgid(0, 0) != 0) fail(error_fd, step_process_group);

  // Each descriptor above 2 first, so that none is overwritten by another's dup2.
  const int in = ::fcntl(plan.null_fd, F_DUPFD, 3);
  const int out = ::fcntl(plan.launch->stdout_fd, F_DUPFD, 3);
  const int err = ::fcntl(plan.launch->stderr_fd, F_DUPFD, 3);
  if (in < 0 || out < 0 || err < 0) fail(error_fd, step_stdio);
  if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) fail(error_fd, step_stdio);
  // Every other descriptor closes at execve: marked, not closed, because the
  // error pipe and the Landlock ruleset are still needed until then.
  if (::syscall(SYS_close_range, 3L, long{~0U}, long{CLOSE_RANGE_CLOEXEC}) != 0) fail(error_fd, step_close_range);

  for (std::size_t i = 0; i < plan.limit_count; ++i) {
    if (::syscall(SYS_prlimit64, 0L, long{plan.limit_ids[i]}, &plan.limits[i], nullptr) != 0) {
      fail(error_fd, step_limit, static_cast<int>(i));
    }
  }

  // Into the workdir while still the daemon's user: the folders above it may
  // be closed to the command's (a state folder is 0700), and a process that
  // starts inside needs no search permission on them.
  if (::chdir(plan.workdir) != 0) fail(error_fd, step_chdir);

  // Raw system calls: glibc's wrappers would signal every thread of the
  // process to change their credentials too, from a child that has one.
  if (plan.switches_user) {
    if (::syscall(SYS_setgroups, 0L, nullptr) != 0) fail(error_fd, step_setgroups);
    if (::syscall(SYS_setresgid, long{plan.gid}, long{plan.gid}, long{plan.gid}) != 0) fail(error_fd, step_setresgid);
    if (::syscall(SYS_setresuid, long{plan.uid}, long{plan.uid}, long{plan.uid}) != 0) fail(error_fd, step_setresuid);
  }

  // The command dies with the thread that started it; if the daemon died
  // before this line, the signal was never armed, hence the check after it.
  if (::syscall(SYS_prctl, long{PR_SET_PDEATHSIG}, long{SIGKILL}, 0L, 0L, 0L) != 0) fail(error_fd, step_death_signal);
  if (::getppid() != plan.parent) ::_exit(127);

  if (::syscall(SYS_prctl, long{PR_SET_NO_NEW_PRIVS}, 1L, 0L, 0L, 0L) != 0) fail(error_fd, step_no_new_privs);
  if (plan.ruleset_fd >= 0 && ::syscall(SYS_landlock_restrict_self, long{plan.ruleset_fd}, 0L) != 0) {
    fail(error_fd, step_landlock);
  }
  if (plan.filter != nullptr && ::syscall(SYS_seccomp, long{SECCOMP_SET_MODE_FILTER}, 0L, plan.filter) != 0) {
    fail(error_fd, step_seccomp);
  }
  ::execve(plan.launch->path, plan.launch->argv, plan.launch->envp);
  fail(error_fd, step_execve);
}

// Adds a Landlock rule allowing `access` beneath `path`; false when `path` does not exist.
bool allow_beneath(int ruleset_fd, const char* path, std::uint64_t access) {
  Fd target(::open(path, O_PATH | O_CLOEXEC));
  if (!target.is_open()) {
    if (errno == ENOENT) return false;
    throw std::runtime_error("sandbox: cannot open '" + std::string(path) + "' for Landlock: " + error_text(errno));
  }
  landlock_path_beneath_attr rule{};
  rule.allowed_access = access;
  rule.parent_fd = target.get();
  if (::syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0U) != 0) {
    throw std::runtime_error("sandbox: Landlock refused a rule for '" + std::string(path) + "': " + error_text(errno));
  }
  return true;
}

}  // namespace

Sandbox::Sandbox(const ValueRef& config, std::string workdir) : workdir_(std::move(workdir)) {
  // Every key is read before anything changes: the workdir is handed over
  // last, and only when the rest of the config is good.
  read_limits(config);
  network_ = boolean(config, "NETWORK", "network", false);
  const bool landlock_disabled = boolean(config, "DISABLE_LANDLOCK_FOR_TEST", "disable_landlock_for_test", false);
  choose_user(config);
  build_landlock(landlock_disabled);
  if (!network_) build_seccomp();
  if (switches_user_) hand_over_workdir();

  description_ = "sandbox: commands run as " + user_text_ + " in " + workdir_ + "; " + landlock_text_ + "; " +
                 (network_ ? "network allowed" : "network denied (seccomp)") + "; limits: " + limits_text_;
}

void Sandbox::read_limits(const ValueRef& config) {
  std::int64_t values[std::size(kLimits)];
  for (std::size_t i = 0; i < std::size(kLimits); ++i) values[i] = kLimits[i].fallback;

  const ValueRef limits = config.get("LIMITS");
  if (!limits.is_nil()) {
    if (!limits.is_list() || limits.size() % 2 != 0) {
      throw std::invalid_argument("config limits: expected a map such as {cpu_seconds: 60}, got " + limits.print());
    }
    for (std::size_t k = 0; k < limits.size(); k += 2) {
      const std::string key = bundled::lower(limits[k].text());
      const ValueRef value = limits[k + 1];
      std::size_t index = std::size(kLimits);
      std::size_t nearest = 0;
      for (std::size_t i = 0; i < std::size(kLimits); ++i) {
        if (key == kLimits[i].name) index = i;
        if (edit_distance(key, kLimits[i].name) < edit_distance(key, kLimits[nearest].name)) nearest = i;
      }
      if (index == std::size(kLimits)) {
        throw std::invalid_argument("config limits: unknown key '" + key + "'; did you mean '" + kLimits[nearest].name +
                                    "'?");
      }
      const std::int64_t most = std::numeric_limits<std::int64_t>::max() / kLimits[index].unit - 1;
      if (!value.is_integer() || value.as_integer() <= 0 || value.as_integer() > most) {
        throw std::invalid_argument("config limits." + key + ": expected a positive integer, got " + value.print());
      }
      values[index] = value.as_integer();
    }
  }

  for (std::size_t i = 0; i < std::size(kLimits); ++i) {
    const auto amount = static_cast<rlim_t>(values[i] * kLimits[i].unit);
    // At the CPU limit SIGXCPU (which a command may catch), a second later SIGKILL.
    limits_.push_back({kLimits[i].resource, amount, kLimits[i].resource == RLIMIT_CPU ? amount + 1 : amount});
  }
  limits_text_ = "cpu " + decimal(values[0]) + " s, memory " + decimal(values[1]) + " MiB, " + decimal(values[2]) +
                 " processes, files " + decimal(values[3]) + " MiB, " + decimal(values[4]) + " open files";
}

void Sandbox::choose_user(const ValueRef& config) {
  const bool allow_root = boolean(config, "ALLOW_ROOT", "allow_root", false);

  // The configured user, resolved even when it is not used, so that a
  // mistake shows on any machine.
  const ValueRef user = config.get("USER");
  std::string spelled = "nobody";
  if (user.is_string() && !user.text().empty()) {
    spelled = std::string(user.text());
  } else if (user.is_integer() && user.as_integer() >= 0 && user.as_integer() < 0xFFFFFFFF) {
    spelled = decimal(user.as_integer());
  } else if (!user.is_nil()) {
    throw std::invalid_argument("config user: expected a user name or a numeric uid, got " + user.print());
  }
  Account account;
  if (is_digits(spelled)) {
    if (spelled.size() > 10 || std::stoull(spelled) >= 0xFFFFFFFFULL) {
      throw std::invalid_argument("config user: uid " + spelled + " is out of range");
    }
    const auto uid = static_cast<uid_t>(std::stoul(spelled));
    // A uid without a passwd entry runs with the group of the same number.
    if (!find_account("", uid, account)) account = Account{uid, static_cast<gid_t>(uid), ""};
  } else if (!find_account(spelled, 0, account)) {
    throw std::invalid_argument("config user: no user '" + spelled + "' on this system");
  }
  if (account.uid == 0 && !allow_root) {
    throw std::invalid_argument("config user: '" + spelled +
                                "' would run commands as root; set allow_root: true in the shell manifest to "
                                "allow it, or name an unprivileged user");
  }

  const uid_t self = ::geteuid();
  if (self == 0 && !allow_root) {
    switches_user_ = true;
    uid_ = account.uid;
    gid_ = account.gid;
    user_name_ = account.name.empty() ? decimal(account.uid) : account.name;
    user_text_ = account.name.empty() ? "uid " + decimal(uid_) : account.name + " (uid " + decimal(uid_) + ")";
    return;
  }
  uid_ = self;
  gid_ = ::getegid();
  Account own;
  user_name_ = find_account("", self, own) ? own.name : decimal(self);
  if (self == 0) {
    user_text_ = "root (uid 0)";
    notices_.push_back({true,
                        "commands run as root (allow_root: true): a command a gate wrongly lets through "
                        "can do whatever root can beyond the sandbox's limits; set allow_root: false to run "
                        "them as config user"});
  } else {
    user_text_ = "the daemon's own user " + account_text(self);  // not root: it cannot switch users
  }
}

void Sandbox::hand_over_workdir() {
  Fd folder(::open(workdir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (!folder.is_open() || ::fstat(folder.get(), &st) != 0) {
    throw std::invalid_argument("config workdir: cannot open '" + workdir_ + "': " + error_text(errno));
  }
  if (st.st_uid == uid_) return;

  bool is_empty = false;  // unless listed as such
  const int listed_fd = ::fcntl(folder.get(), F_DUPFD_CLOEXEC, 0);
  if (DIR* listing = listed_fd >= 0 ? ::fdopendir(listed_fd) : nullptr) {  // owns listed_fd from here
    is_empty = true;
    while (const dirent* entry = ::readdir(listing)) {
      const std::string_view name = entry->d_name;
      if (name != "." && name != "..") {
        is_empty = false;
        break;
      }
    }
    ::closedir(listing);
  } else if (listed_fd >= 0) {
    ::close(listed_fd);
  }

  Account named;
  const std::string chown_hint = find_account("", uid_, named) ? named.name + ": " + workdir_
                                                               : decimal(uid_) + ":" + decimal(gid_) + " " + workdir_;
  // The host creates the workspace empty and as the daemon: that one is handed over.
  if (st.st_uid == ::geteuid() && is_empty) {
    if (::fchown(folder.get(), uid_, gid_) != 0) {
      throw std::invalid_argument("config workdir: cannot hand '" + workdir_ + "' over to " + user_text_ + ": " +
                                  error_text(errno));
    }
    notices_.push_back({false, "workdir " + workdir_ + " handed over to " + user_text_ + ", who runs the commands"});
    return;
  }
  std::string message = "config workdir: '" + workdir_ + "' belongs to " + account_text(st.st_uid) + ", not to " +
                        user_text_ + " who runs the commands";
  if (st.st_uid == ::geteuid()) message += ", and is not empty, so it is not handed over";
  throw std::invalid_argument(message + "; run 'chown " + chown_hint + "' or set user: to its owner");
}

void Sandbox::build_landlock(bool is_disabled_for_test) {
  if (is_disabled_for_test) {
    landlock_text_ =
        "Landlock unavailable (disabled by disable_landlock_for_test): writes limited by the user's "
        "permissions only";
    return;
  }
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 0) {
    if (errno != ENOSYS && errno != EOPNOTSUPP) {
      throw std::runtime_error("sandbox: cannot ask the kernel for Landlock: " + error_text(errno));
    }
    landlock_text_ = "Landlock unavailable (" + error_text(errno) + "): writes limited by the user's permissions only";
    return;
  }
  landlock_abi_ = static_cast<int>(abi);
  std::uint64_t writes = kWritesAbi1;
  if (landlock_abi_ >= 2) writes |= LANDLOCK_ACCESS_FS_REFER;
  if (landlock_abi_ >= 3) writes |= LANDLOCK_ACCESS_FS_TRUNCATE;

  // From ABI 6, a command cannot signal processes outside the sandbox either
  // (the daemon, when commands run as its own user).
  RulesetAttributes attributes{writes, 0, landlock_abi_ >= 6 ? LANDLOCK_SCOPE_SIGNAL : 0};
  const std::size_t size = landlock_abi_ >= 6 ? sizeof attributes : sizeof attributes.handled_access_fs;
  ruleset_ = Fd(static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attributes, size, 0U)));
  if (!ruleset_.is_open()) throw std::runtime_error("sandbox: cannot create a Landlock ruleset: " + error_text(errno));

  allow_beneath(ruleset_.get(), workdir_.c_str(), writes);
  const bool has_tmp = allow_beneath(ruleset_.get(), Sandbox::kTemporaryFolder, writes);
  // `> /dev/null` opens with O_TRUNC, which Landlock ABI 3 counts as truncating.
  const std::uint64_t device_writes = LANDLOCK_ACCESS_FS_WRITE_FILE | (writes & LANDLOCK_ACCESS_FS_TRUNCATE);
  for (const char* device : kDevices) allow_beneath(ruleset_.get(), device, device_writes);

  landlock_text_ = "writes confined by Landlock (ABI " + decimal(landlock_abi_) + ") to it" +
                   (has_tmp ? " and " + std::string(Sandbox::kTemporaryFolder) : std::string());
}

void Sandbox::build_seccomp() {
  const std::unique_ptr<void, void (*)(scmp_filter_ctx)> context(::seccomp_init(SCMP_ACT_ALLOW), ::seccomp_release);
  if (!context) throw std::runtime_error("sandbox: cannot build the seccomp filter: out of memory");
  auto check = [](int result, const char* what) {
    if (result < 0) throw std::runtime_error(std::string("sandbox: seccomp ") + what + ": " + error_text(-result));
  };
  // socket() takes an int: compare only the low 32 bits of the register.
  for (const int domain : {AF_INET, AF_INET6, AF_PACKET}) {
    const scmp_arg_cmp first_argument{0, SCMP_CMP_MASKED_EQ, 0xFFFFFFFFU, static_cast<scmp_datum_t>(domain)};
    check(::seccomp_rule_add_array(context.get(), SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, &first_argument),
          "rule for socket()");
  }
  // io_uring creates sockets without the socket() system call.
  check(::seccomp_rule_add(context.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(io_uring_setup), 0), "rule for io_uring");

  Fd program(static_cast<int>(::syscall(SYS_memfd_create, "shell-seccomp", MFD_CLOEXEC)));
  if (!program.is_open()) throw std::runtime_error("sandbox: cannot create a memfd: " + error_text(errno));
  check(::seccomp_export_bpf(context.get(), program.get()), "export");
  const off_t size = ::lseek(program.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0) {
    throw std::runtime_error("sandbox: the exported seccomp program has an odd size");
  }
  filter_.resize(static_cast<std::size_t>(size) / sizeof(sock_filter));
  if (::pread(program.get(), filter_.data(), static_cast<std::size_t>(size), 0) != size) {
    throw std::runtime_error("sandbox: cannot read the exported seccomp program: " + error_text(errno));
  }
}

pid_t Sandbox::spawn(const Launch& launch) const {
  Fd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd.is_open()) throw std::runtime_error("shell: cannot open /dev/null: " + error_text(errno));
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("shell: cannot create a pipe: " + error_text(errno));
  }
  Fd error_read(error_pipe[0]);
  Fd error_write(error_pipe[1]);

  // The pipes as the command's user's, so that it can reopen them by name
  // (/dev/stdout, /dev/stderr) as well as write to them.
  if (switches_user_) {
    for (const int fd : {launch.stdout_fd, launch.stderr_fd}) {
      if (::fchown(fd, uid_, gid_) != 0) {
        throw std::runtime_error("shell: cannot hand a pipe over to " + user_text_ + ": " + error_text(errno));
      }
    }
  }

  std::vector<rlimit64> limits;
  std::vector<int> limit_ids;
  for (const Limit& limit : limits_) {
    limits.push_back(rlimit64{limit.soft, limit.hard});
    limit_ids.push_back(limit.resource);
  }
  const sock_fprog program{static_cast<unsigned short>(filter_.size()), const_cast<sock_filter*>(filter_.data())};
  const ChildPlan plan{&launch,
                       workdir_.c_str(),
                       null_fd.get(),
                       error_write.get(),
                       ::getpid(),
                       switches_user_,
                       uid_,
                       gid_,
                       limits.data(),
                       limit_ids.data(),
                       limits.size(),
                       ruleset_.get(),
                       filter_.empty() ? nullptr : &program};

  sigset_t all;
  sigset_t before;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  const pid_t pid = ::fork();
  if (pid == 0) run_child(plan);
  const int fork_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) throw std::runtime_error("shell: cannot start the command: fork: " + error_text(fork_error));
  error_write.reset();

  // End of file: execve closed the pipe. A report: the child is about to exit.
  ChildFailure failure{};
  ssize_t n = 0;
  do {
    n = ::read(error_read.get(), &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return pid;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof failure)) {
    throw std::runtime_error("shell: cannot start the command: the child failed before it could say why");
  }
  throw std::runtime_error("shell: cannot start the command: " + step_text(failure, launch) + ": " +
                           error_text(failure.error));
}

std::string Sandbox::step_text(const ChildFailure& failure, const Launch& launch) const {
  const int detail = failure.detail;
  switch (failure.step) {
    case step_signals:
      return "sigprocmask";
    case step_process_group:
      return "setpgid";
    case step_stdio:
      return "dup2";
    case step_close_range:
      return "close_range";
    case step_limit:
      return detail >= 0 && static_cast<std::size_t>(detail) < limits_.size()
                 ? std::string("setrlimit(") + resource_name(limits_[static_cast<std::size_t>(detail)].resource) + ")"
                 : "setrlimit";
    case step_setgroups:
      return "setgroups";
    case step_setresgid:
      return "setresgid(" + decimal(gid_) + ")";
    case step_setresuid:
      return "setresuid(" + decimal(uid_) + ")";
    case step_death_signal:
      return "prctl(PR_SET_PDEATHSIG)";
    case step_chdir:
      return "chdir(" + workdir_ + ")";
    case step_no_new_privs:
      return "prctl(PR_SET_NO_NEW_PRIVS)";
    case step_landlock:
      return "landlock_restrict_self";
    case step_seccomp:
      return "seccomp";
    case step_execve:
      return "execve(" + std::string(launch.path) + ")";
    default:
      return "an unknown step";
  }
}

}  // namespace passepartout::shell

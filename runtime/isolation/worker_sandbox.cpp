// The skill process's sandbox: limits, user, Landlock (raw system calls) and
// the seccomp filter (built with libseccomp), and the SIGSYS handler that
// turns a denied system call into EPERM and records it.
#include "isolation/worker_sandbox.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <ucontext.h>
#include <unistd.h>
#include <csignal>
#include <ctime>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/errno_text.hpp"
#include "isolation/landlock.hpp"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef __O_TMPFILE
#define __O_TMPFILE 020000000
#endif

namespace passepartout {
namespace {

constexpr uid_t kNobody = 65534;
// si_code of a SIGSYS sent by a seccomp filter (the kernel's SYS_SECCOMP).
constexpr int kSysSeccomp = 1;

// Whether a denied system call traps into the SIGSYS handler (which can set
// its return value on these architectures) or simply returns EPERM.
#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool kCanTrap = true;
#else
constexpr bool kCanTrap = false;
#endif

constexpr bool kSanitizerNeedsAddressSpace =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    true;
#else
    false;
#endif

// --- the record of denials (async-signal-safe) ------------------------------------

// Distinct system call numbers since the last drain, each stored plus one: 0
// is a free slot. The handler claims a free slot with a compare-and-swap, so
// any number of threads may record at once; a number already held is not added again.
std::atomic<int> g_denials[kMaxRecordedDenials] = {};
static_assert(std::atomic<int>::is_always_lock_free, "the SIGSYS handler needs lock-free atomics");

void record_denial(int number) {
  const int stored = number + 1;
  for (auto& slot : g_denials) {
    int held = slot.load(std::memory_order_relaxed);
    if (held == stored) return;
    if (held == 0 && slot.compare_exchange_strong(held, stored, std::memory_order_relaxed)) return;
    if (held == stored) return;  // another thread recorded the same one meanwhile
  }
}

// SIGSYS from the filter (SECCOMP_RET_TRAP): the system call did not run; its
// result becomes -EPERM and its number is recorded. Only async-signal-safe work.
void on_sigsys(int /*signal*/, siginfo_t* info, void* context) {
  if (info == nullptr || info->si_code != kSysSeccomp || context == nullptr) return;
  const int saved = errno;
  record_denial(info->si_syscall);
  auto* uc = static_cast<ucontext_t*>(context);
#if defined(__x86_64__)
  uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
#elif defined(__aarch64__)
  uc->uc_mcontext.regs[0] = static_cast<unsigned long long>(-EPERM);
#else
  (void)uc;
#endif
  errno = saved;
}

// --- steps ------------------------------------------------------------------------

Unexpected<Error> refused_by_kernel(const std::string& step, int error) {
  return fail(ErrorCode::io_error, "sandbox: " + step + ": " + errno_text(error));
}

// The process's thread count from /proc/self/stat (field 20), or -1 when unreadable.
int thread_count() {
  const int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buffer[1024];
  const ssize_t n = ::read(fd, buffer, sizeof buffer - 1);
  ::close(fd);
  if (n <= 0) return -1;
  const std::string text(buffer, static_cast<std::size_t>(n));
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::size_t at = close + 1;
  for (int field = 3; field <= 20; ++field) {  // fields after the name are separated by one space
    const std::size_t start = at + 1;
    at = text.find(' ', start);
    if (at == std::string::npos) return -1;
    if (field == 20) {
      int count = 0;
      const auto [end, ec] = std::from_chars(text.data() + start, text.data() + at, count);
      return ec == std::errc() && end == text.data() + at ? count : -1;
    }
  }
  return -1;
}

// Lowers `resource` to `amount` (never above the current hard limit).
Result<void> lower_limit(int resource, const char* name, rlim_t soft, rlim_t hard) {
  rlimit current{};
  if (::getrlimit(resource, &current) != 0) return refused_by_kernel(std::string("getrlimit(") + name + ")", errno);
  const rlimit wanted{std::min(soft, current.rlim_max), std::min(hard, current.rlim_max)};
  if (::setrlimit(resource, &wanted) != 0) return refused_by_kernel(std::string("setrlimit(") + name + ")", errno);
  return {};
}

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

// Adds a read-only rule for `path` (plus execute when `execute`); false
// when it does not exist.
Result<bool> allow_reading(int ruleset, const std::filesystem::path& path, bool execute) {
  const Descriptor target(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (target.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return refused_by_kernel("cannot open " + path.string() + " for Landlock", errno);
  }
  struct stat st {};
  if (::fstat(target.get(), &st) != 0) return refused_by_kernel("fstat " + path.string(), errno);
  landlock_path_beneath_attr rule{};
  rule.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE | (execute ? LANDLOCK_ACCESS_FS_EXECUTE : 0);
  if (S_ISDIR(st.st_mode)) rule.allowed_access |= LANDLOCK_ACCESS_FS_READ_DIR;
  rule.parent_fd = target.get();
  if (::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0U) != 0) {
    return refused_by_kernel("Landlock refused a rule for " + path.string(), errno);
  }
  return true;
}

// Where programs and their libraries are, readable and executable when the skill may start processes.
constexpr const char* kProgramFolders[] = {"/usr",   "/bin",   "/sbin",   "/lib",
                                           "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache"};

Result<std::string> apply_landlock(const SandboxSpec& spec, int abi) {
  const Descriptor ruleset(landlock::create_ruleset(abi, landlock::every_fs_access(abi), spec.network));
  if (ruleset.get() < 0) return refused_by_kernel("landlock_create_ruleset", errno);

  std::vector<std::string> missing;
  for (const auto& path : spec.files) {
    auto added = allow_reading(ruleset.get(), path, false);
    if (!added) return fail(added.error().code, added.error().message);
    if (!*added) missing.push_back(path.string());
  }
  if (spec.processes) {
    for (const char* folder : kProgramFolders) {
      auto added = allow_reading(ruleset.get(), folder, true);
      if (!added) return fail(added.error().code, added.error().message);
    }
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0U) != 0) {
    return refused_by_kernel("landlock_restrict_self", errno);
  }
  std::string text = "Landlock ABI " + std::to_string(abi) + " (" +
                     (spec.files.empty() ? std::string("no files") : "reads beneath the listed files only") +
                     (spec.processes ? ", programs under /usr and /lib" : "") + ")";
  if (!missing.empty()) {
    text += " (missing, so not readable: ";
    for (std::size_t i = 0; i < missing.size(); ++i) text += (i == 0 ? "" : ", ") + missing[i];
    text += ")";
  }
  return text;
}

// --- the seccomp filter ----------------------------------------------------------

// System calls serving hook calls needs, allowed with any arguments.
constexpr const char* kAlwaysAllowed[] = {
    // the channel and descriptors the worker already holds
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "sendmsg",
    "recvmsg", "sendto", "recvfrom", "sendmmsg", "recvmmsg", "shutdown", "getsockopt", "getsockname", "getpeername",
    "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl", "epoll_create",
    "epoll_create1", "eventfd", "eventfd2", "pipe", "pipe2", "timerfd_create", "timerfd_settime", "timerfd_gettime",
    "close", "close_range", "dup", "dup2", "dup3", "fcntl", "fstat", "lseek", "getdents64",
    // memory
    "mmap", "munmap", "mprotect", "madvise", "brk", "mremap", "msync", "mincore",
    // time
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    // threads and signals
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "rt_sigprocmask",
    "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "rt_sigsuspend", "sigaltstack", "restart_syscall",
    "sched_yield", "sched_getaffinity", "exit", "exit_group",
    // who and where am I
    "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
    "uname", "sysinfo", "getrusage", "times", "getcwd", "getrlimit", "getrandom", "membarrier"};

// Reading files by path: allowed with `files` (Landlock confines where) and with `processes`.
constexpr const char* kPathReads[] = {"newfstatat", "statx",      "stat",     "lstat",     "access",
                                      "faccessat",  "faccessat2", "readlink", "readlinkat"};

constexpr const char* kNetwork[] = {"socket", "socketpair", "connect", "bind",
                                    "listen", "accept",     "accept4", "setsockopt"};

constexpr const char* kProcesses[] = {"fork",   "vfork",  "clone",  "clone3", "execve",     "execveat", "wait4",
                                      "waitid", "kill",   "tgkill", "tkill",  "setpgid",    "getpgid",  "getpgrp",
                                      "setsid", "getsid", "chdir",  "fchdir", "arch_prctl", "umask",    "prctl"};

// prctl options allowed without `processes`.
constexpr int kPrctlOptions[] = {PR_SET_NAME,     PR_GET_NAME,    PR_SET_VMA,
                                 PR_GET_DUMPABLE, PR_GET_SECCOMP, PR_GET_NO_NEW_PRIVS};

// ioctl requests allowed (reading a descriptor's state, setting flags on it).
constexpr unsigned long kIoctls[] = {FIONREAD, FIONBIO, FIOCLEX, FIONCLEX, TCGETS, TIOCGWINSZ};

using FilterContext = std::unique_ptr<void, void (*)(scmp_filter_ctx)>;

class FilterBuilder {
 public:
  explicit FilterBuilder(scmp_filter_ctx context) : context_(context) {}

  // Adds `action` for `name` (when this architecture has it) under `conditions`.
  void add(std::uint32_t action, const char* name, std::initializer_list<scmp_arg_cmp> conditions = {}) {
    if (!error_.empty()) return;
    const int number = ::seccomp_syscall_resolve_name(name);
    if (number == __NR_SCMP_ERROR || number < 0) return;  // not a system call of this architecture
    const std::vector<scmp_arg_cmp> compares(conditions);
    const int result = ::seccomp_rule_add_array(context_, action, number, static_cast<unsigned>(compares.size()),
                                                compares.empty() ? nullptr : compares.data());
    if (result < 0) error_ = std::string("seccomp rule for ") + name + ": " + errno_text(-result);
  }
  void allow(const char* name, std::initializer_list<scmp_arg_cmp> conditions = {}) {
    add(SCMP_ACT_ALLOW, name, conditions);
  }
  const std::string& error() const { return error_; }

 private:
  scmp_filter_ctx context_;
  std::string error_;
};

// A 32-bit argument compared on the register's low 32 bits (the upper half may hold garbage).
scmp_arg_cmp int_equals(unsigned argument, std::uint64_t value) {
  return scmp_arg_cmp{argument, SCMP_CMP_MASKED_EQ, 0xFFFFFFFFU, value};
}

Result<bool> apply_seccomp(const SandboxSpec& spec) {
  // With `processes`, programs the skill runs inherit the filter but not the
  // SIGSYS handler (execve resets it): they get EPERM instead of dying.
  const bool traps = kCanTrap && !spec.processes;
  const std::uint32_t deny = traps ? SCMP_ACT_TRAP : SCMP_ACT_ERRNO(EPERM);
  const FilterContext context(::seccomp_init(deny), ::seccomp_release);
  if (!context) return fail(ErrorCode::io_error, "sandbox: cannot build the seccomp filter (out of memory)");
  FilterBuilder filter(context.get());

  for (const char* name : kAlwaysAllowed) filter.allow(name);
  const auto pid = static_cast<std::uint64_t>(::getpid());

  // Descriptors' metadata without a path (fstat through fstatat and statx).
  filter.allow("newfstatat", {scmp_arg_cmp{3, SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH}});
  filter.allow("statx", {scmp_arg_cmp{2, SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH}});

  // Every signal handler but SIGSYS's: the filter's own stays.
  filter.allow("rt_sigaction", {scmp_arg_cmp{0, SCMP_CMP_NE, SIGSYS, 0}});
  for (const unsigned long request : kIoctls) filter.allow("ioctl", {int_equals(1, request)});
  filter.allow("prlimit64", {scmp_arg_cmp{0, SCMP_CMP_EQ, 0, 0}});
  filter.allow("setrlimit");

  // Threads, not processes: glibc tries clone3 first and falls back to clone
  // on ENOSYS; clone3's flags are in memory, where the filter cannot look.
  if (spec.processes) {
    for (const char* name : kProcesses) filter.allow(name);
  } else {
    filter.allow("clone", {scmp_arg_cmp{0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD}});
    filter.add(SCMP_ACT_ERRNO(ENOSYS), "clone3");
    // A new process is refused with EPERM straight away, not through the
    // trap: posix_spawn (so system() and popen()) and LeakSanitizer clone
    // with every signal blocked, and a trap while SIGSYS is blocked kills
    // the process. So fork is the one refusal drain_sandbox_denials() does not list.
    filter.add(SCMP_ACT_ERRNO(EPERM), "clone", {scmp_arg_cmp{0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0}});
    filter.add(SCMP_ACT_ERRNO(EPERM), "fork");
    filter.add(SCMP_ACT_ERRNO(EPERM), "vfork");
    filter.allow("tgkill", {int_equals(0, pid)});
    filter.allow("kill", {int_equals(0, pid)});
    for (const int option : kPrctlOptions) filter.allow("prctl", {int_equals(0, static_cast<std::uint64_t>(option))});
  }

  // Opening read-only: nothing that writes, creates, truncates or appends.
  // Landlock says where; openat2 hides its flags in memory, so it is ENOSYS
  // (callers fall back to openat).
  if (!spec.files.empty() || spec.processes) {
    constexpr std::uint64_t kWrites = O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND | __O_TMPFILE;
    filter.allow("openat", {scmp_arg_cmp{2, SCMP_CMP_MASKED_EQ, kWrites, 0}});
    filter.allow("open", {scmp_arg_cmp{1, SCMP_CMP_MASKED_EQ, kWrites, 0}});
    filter.add(SCMP_ACT_ERRNO(ENOSYS), "openat2");
    for (const char* name : kPathReads) filter.allow(name);
  }
  if (spec.network) {
    for (const char* name : kNetwork) filter.allow(name);
  }
  if (!filter.error().empty()) return fail(ErrorCode::io_error, "sandbox: " + filter.error());

  // Every thread gets the filter (and no_new_privs); another architecture's
  // system call numbers (x32, 32-bit int 0x80) end the process.
  auto check = [](int result, const char* what) -> Result<void> {
    if (result < 0) return refused_by_kernel(what, -result);
    return {};
  };
  if (auto r = check(::seccomp_attr_set(context.get(), SCMP_FLTATR_CTL_TSYNC, 1), "seccomp TSYNC attribute"); !r) {
    return fail(r.error().code, r.error().message);
  }
  if (auto r = check(::seccomp_attr_set(context.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS),
                     "seccomp bad-architecture attribute");
      !r) {
    return fail(r.error().code, r.error().message);
  }

  if (traps) {
    struct sigaction action {};
    action.sa_sigaction = on_sigsys;
    action.sa_flags = SA_SIGINFO;
    ::sigemptyset(&action.sa_mask);
    if (::sigaction(SIGSYS, &action, nullptr) != 0) return refused_by_kernel("sigaction(SIGSYS)", errno);
  }
  if (auto r = check(::seccomp_load(context.get()), "seccomp_load"); !r) return fail(r.error().code, r.error().message);
  return traps;
}

}  // namespace

Result<SandboxReport> apply_worker_sandbox(const SandboxSpec& spec) {
  const SandboxCapabilities capabilities = probe_sandbox();
  if (auto required = check_requirements(spec, capabilities); !required)
    return fail(required.error().code, required.error().message);
  if (capabilities.landlock_abi > 0) {
    const int threads = thread_count();
    if (threads != 1) {
      return fail(ErrorCode::refused,
                  "sandbox: the process runs " +
                      (threads < 0 ? std::string("an unknown number of") : std::to_string(threads)) +
                      " threads; apply the sandbox before starting any (Landlock binds only the calling thread)");
    }
  }

  // What localtime() reads once, while files can still be opened.
  ::tzset();

  SandboxReport report;
  std::vector<std::string> layers;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0) return refused_by_kernel("prctl(PR_SET_NO_NEW_PRIVS)", errno);
  report.no_new_privs = true;
  layers.emplace_back("no_new_privs");

  if (auto r = lower_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", spec.open_files, spec.open_files); !r) {
    return fail(r.error().code, r.error().message);
  }
  // At the soft limit SIGXCPU, a second later SIGKILL.
  if (auto r = lower_limit(RLIMIT_CPU, "RLIMIT_CPU", spec.cpu_seconds, spec.cpu_seconds + 1); !r) {
    return fail(r.error().code, r.error().message);
  }
  std::string limits =
      "limits (open files " + std::to_string(spec.open_files) + ", cpu " + std::to_string(spec.cpu_seconds) + " s, ";
  if (kSanitizerNeedsAddressSpace) {
    limits += "memory not limited: a sanitizer build";
  } else {
    if (auto r = lower_limit(RLIMIT_AS, "RLIMIT_AS", spec.memory_bytes, spec.memory_bytes); !r) {
      return fail(r.error().code, r.error().message);
    }
    report.memory_limit = true;
    limits += "memory " + size_text(spec.memory_bytes);
  }
  // RLIMIT_NPROC is left alone: it counts the threads of every process of the
  // user, so a low one would stop this process's own threads; the filter is
  // what denies fork.
  layers.push_back(limits + ")");
  report.limits = true;

  if (capabilities.can_switch_user) {
    // glibc's wrappers change the credentials of every thread.
    if (::setgroups(0, nullptr) != 0) return refused_by_kernel("setgroups({})", errno);
    if (::setresgid(kNobody, kNobody, kNobody) != 0) return refused_by_kernel("setresgid(65534)", errno);
    if (::setresuid(kNobody, kNobody, kNobody) != 0) return refused_by_kernel("setresuid(65534)", errno);
    report.user_switched = true;
    layers.emplace_back("user nobody (uid 65534)");
  } else {
    layers.push_back("user unchanged (" + capabilities.user_reason + ")");
  }

  if (capabilities.landlock_abi > 0) {
    auto landlock = apply_landlock(spec, capabilities.landlock_abi);
    if (!landlock) return fail(landlock.error().code, landlock.error().message);
    report.landlock_abi = capabilities.landlock_abi;
    layers.push_back(*landlock);
  } else {
    layers.push_back("no Landlock (" + capabilities.landlock_reason + ")");
  }

  if (capabilities.seccomp) {
    auto traps = apply_seccomp(spec);
    if (!traps) return fail(traps.error().code, traps.error().message);
    report.seccomp = true;
    report.denials_recorded = *traps;
    layers.push_back(std::string("seccomp (") + (spec.network ? "network allowed" : "network denied") + ", " +
                     (spec.processes ? "processes allowed" : "processes denied") + ", " +
                     (*traps ? "denials recorded" : "denials return EPERM unrecorded") + ")");
  } else {
    layers.push_back("no seccomp (" + capabilities.seccomp_reason + ")");
  }

  report.description = "sandbox in force: ";
  for (std::size_t i = 0; i < layers.size(); ++i) report.description += (i == 0 ? "" : "; ") + layers[i];
  return report;
}

std::vector<int> drain_sandbox_denials() {
  std::vector<int> denied;
  for (auto& slot : g_denials) {
    const int stored = slot.exchange(0, std::memory_order_relaxed);
    if (stored > 0 && std::find(denied.begin(), denied.end(), stored - 1) == denied.end()) denied.push_back(stored - 1);
  }
  return denied;
}

std::string syscall_name(int number) {
  const std::unique_ptr<char, void (*)(void*)> name(::seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, number),
                                                    std::free);
  if (!name) return "syscall " + std::to_string(number);
  return name.get();
}

}  // namespace passepartout

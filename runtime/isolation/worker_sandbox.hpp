// The skill process's sandbox: what a worker drops, in its own process, after
// it loaded the skill's library and before it creates the instance. Layers:
// no_new_privs, resource limits, an unprivileged user (when root), Landlock,
// and a seccomp filter that allows what serving hook calls needs and denies
// the rest with an error the skill sees (EPERM), recording what was denied.
//
// The order a worker follows:
//   1. probe/check: check_requirements(spec, sandbox_capabilities()) (refuse to start otherwise);
//   2. load the library (the dynamic loader opens files: before the filter);
//   3. apply_worker_sandbox(spec) while the process has ONE thread (Landlock binds
//      only the calling thread; the seccomp filter is synchronised to every
//      thread anyway, so a thread started before is filtered too, but then the
//      call fails: see apply_worker_sandbox);
//   4. start the lane threads, create the instance, serve calls; after each
//      call, drain_sandbox_denials() and report each as
//      "tried <syscall_name(nr)> (denied by the sandbox)".
//
// Refusals: a denied system call traps into a SIGSYS handler that makes it
// return EPERM and records it; a new process (fork, clone without
// CLONE_THREAD, vfork) returns EPERM without the trap and is not recorded,
// because posix_spawn (system(), popen()) and LeakSanitizer clone with every
// signal blocked, and a trap while SIGSYS is blocked kills the process.
// Likewise a skill that blocks SIGSYS and then makes a denied call dies of
// SIGSYS (the worker reports a death, as for any crash).
//
// Sanitizer builds (checked by hand with AddressSanitizer with
// UndefinedBehaviorSanitizer, and with ThreadSanitizer, whose runtime has no
// thread of its own at that point): reports still reach stderr, unsymbolized
// (/proc/self/exe and /proc/self/maps are closed, the symbolizer cannot be
// started); LeakSanitizer cannot stop the world at exit ("LeakSanitizer has
// encountered a fatal error", status 1), so a worker ends with _exit() or
// runs with ASAN_OPTIONS=detect_leaks=0. RLIMIT_AS is not set there.
#pragma once

#include <string>
#include <vector>

#include "base/result.hpp"
#include "skills/sandbox_spec.hpp"

namespace passepartout {

// The layers that hold after apply_worker_sandbox, for the worker's log line.
struct SandboxReport {
  bool no_new_privs = false;
  bool limits = false;  // RLIMIT_NOFILE, RLIMIT_CPU, and RLIMIT_AS unless memory_limit is false
  bool memory_limit = false;
  bool user_switched = false;  // now uid/gid 65534 with no supplementary groups
  int landlock_abi = 0;        // 0: no Landlock domain
  bool seccomp = false;
  bool denials_recorded = false;  // SECCOMP_RET_TRAP with the SIGSYS handler (else RET_ERRNO)
  std::string description;        // one line: "sandbox in force: no_new_privs; limits (...); ..."
};

// Applies every layer `spec` and this kernel allow, in the calling process:
// PR_SET_NO_NEW_PRIVS; RLIMIT_NOFILE, RLIMIT_CPU (soft; SIGKILL a second later)
// and RLIMIT_AS (not in AddressSanitizer/ThreadSanitizer builds); setgroups({}),
// setresgid and setresuid to 65534 when root (glibc changes every thread);
// a Landlock domain handling every file access it knows (reads allowed beneath
// spec.files only; TCP and abstract Unix sockets too unless spec.network;
// signals to processes outside the domain); the seccomp filter, with TSYNC.
// A layer the kernel lacks is left out and the report says so; a step the
// kernel refuses is an error (io_error), and the process must then not serve
// calls: some layers may already hold. Call once, with the process
// single-threaded: with other threads running and Landlock available it
// refuses (refused) before changing anything, since Landlock cannot bind them.
// Also reads the time zone first (localtime needs /etc/localtime, which is
// closed afterwards).
Result<SandboxReport> apply_worker_sandbox(const SandboxSpec& spec);

// The system calls the filter denied since the last call, each once, in no
// particular order (at most kMaxRecordedDenials distinct ones; more are
// dropped). Async-signal-safe recording; call from any thread.
inline constexpr std::size_t kMaxRecordedDenials = 64;
std::vector<int> drain_sandbox_denials();

// The name of a system call of this architecture: "openat"; "syscall 999" when unknown.
std::string syscall_name(int number);

}  // namespace passepartout

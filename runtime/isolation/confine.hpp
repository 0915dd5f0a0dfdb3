// Confinement: what a program the daemon starts for the operator (an MCP
// server over stdio) runs under, and `passepartout confine`, which applies
// it. The daemon does not drop anything between fork and exec: it starts
//
//   passepartout confine [--user UID:GID] [--writable DIR]... [--no-network]
//                        [--open-files N] [--memory BYTES] [--cpu-seconds N]
//                        [--parent PID] -- PROGRAM ARGS...
//
// with posix_spawn, in the process group, folder and environment the program
// is to have; that process, single-threaded and freshly started, drops what
// the options say and execs PROGRAM, which keeps every layer:
//   1. resource limits: no core dumps, RLIMIT_NOFILE, and RLIMIT_AS and
//      RLIMIT_CPU when given (none by default: JavaScript engines reserve
//      far more address space than they use);
//   2. the user (setgroups({}), setresgid, setresuid), when given;
//   3. PR_SET_PDEATHSIG SIGKILL, so that it dies with the daemon's thread
//      that started it, and an exit if the daemon is already gone;
//   4. no_new_privs, then a Landlock domain that handles the writes: allowed
//      beneath the --writable folders and to the terminal-like devices
//      (/dev/null, ...), denied elsewhere; signals to processes outside the
//      domain denied (ABI 6); with --no-network TCP bind and connect too
//      (ABI 4), and abstract Unix sockets (ABI 6);
//   5. with --no-network, a seccomp filter: socket() for AF_INET, AF_INET6
//      and AF_PACKET fails with EACCES, io_uring_setup with EPERM;
//   6. execvp(PROGRAM) with the environment it was given.
// A step that fails ends the process with a line on stderr ("confine:
// setresuid(65534): Operation not permitted") and status 126, or 127 when
// PROGRAM cannot be found: the daemon reports the line with the exit.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "skills/sandbox_spec.hpp"

namespace passepartout {

struct Confinement {
  static constexpr std::uint64_t kDefaultOpenFiles = 1024;

  bool switch_user = false;  // to uid:gid, with no supplementary groups
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<std::filesystem::path> writable;  // absolute, existing folders
  bool network = true;
  std::uint64_t open_files = kDefaultOpenFiles;
  std::uint64_t memory_bytes = 0;  // RLIMIT_AS; 0: not limited
  std::uint64_t cpu_seconds = 0;   // RLIMIT_CPU; 0: not limited
  pid_t parent = 0;                // the daemon; 0: not checked
};

// The arguments that follow the executable: "confine", the options, "--".
std::vector<std::string> confine_arguments(const Confinement& confinement);

// Reads the options of `arguments` (what follows "confine") up to "--";
// `*program` is set to the index of the program after it. Errors
// (invalid_input) name the option.
Result<Confinement> parse_confine_arguments(std::span<const std::string> arguments, std::size_t* program);

// One line for the log and `mcp list`: "runs as nobody (uid 65534); writes
// confined by Landlock (ABI 7) to /srv/notes, /tmp/passepartout-mcp-fs-x1;
// network denied; open files 1024".
std::string describe(const Confinement& confinement, const SandboxCapabilities& capabilities);

// `passepartout confine ...`: applies the confinement and execs the
// program; returns only on failure (the exit status).
int run_confine(int argc, char** argv);

}  // namespace passepartout

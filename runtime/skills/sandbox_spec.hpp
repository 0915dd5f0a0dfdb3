// SandboxSpec: what a skill's manifest allows its skill process (the `sandbox:`
// section), and SandboxCapabilities: which protections this kernel and this
// process can give it. Plain data and cheap checks, read where manifests are
// read; applying the protections is isolation/worker_sandbox.hpp's job.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/byte_size.hpp"
#include "base/result.hpp"

namespace passepartout {

// The manifest's `sandbox:` section, defaults filled in. Format (YAML):
//   sandbox:
//     files: [/srv/models, /etc/ssl/certs]  absolute paths the skill may read (read-only; default none)
//     network: false                         sockets (default denied)
//     processes: false                       fork, clone and execve (default denied)
//     memory: 512MiB                         address space: bytes, or a number with KiB, MiB or GiB
//     open_files: 64                         descriptors (RLIMIT_NOFILE)
//     cpu_seconds: 600                       CPU time backstop (RLIMIT_CPU)
//     require: [seccomp, landlock, user]     refuse to load where a layer is unavailable
//
// Plain data: copy and read from any thread.
struct SandboxSpec {
  static constexpr std::uint64_t kDefaultMemoryBytes = std::uint64_t{512} << 20;
  static constexpr std::uint64_t kMinMemoryBytes = std::uint64_t{16} << 20;
  static constexpr std::uint64_t kMaxMemoryBytes = std::uint64_t{1} << 40;
  static constexpr std::uint64_t kDefaultOpenFiles = 64;
  static constexpr std::uint64_t kMaxOpenFiles = 1 << 20;
  static constexpr std::uint64_t kDefaultCpuSeconds = 600;
  static constexpr std::size_t kMaxFiles = 64;

  std::vector<std::filesystem::path> files;  // absolute, lexically normal
  bool network = false;
  bool processes = false;
  std::uint64_t memory_bytes = kDefaultMemoryBytes;
  std::uint64_t open_files = kDefaultOpenFiles;
  std::uint64_t cpu_seconds = kDefaultCpuSeconds;
  std::vector<std::string> require;  // each one of kSandboxLayers, no repeats
};

// The layers a manifest may require, as spelled in `require:`.
inline constexpr std::string_view kSandboxLayers[] = {"seccomp", "landlock", "user"};

// What the kernel and this process offer a skill process. Each reason says
// why a layer is missing in the operator's terms, with the probe's error.
struct SandboxCapabilities {
  bool seccomp = false;          // filters with SECCOMP_RET_TRAP and SECCOMP_RET_ERRNO
  std::string seccomp_reason;    // empty when available
  int landlock_abi = 0;          // 0: unavailable
  std::string landlock_reason;   // empty when available
  bool can_switch_user = false;  // the process is root, so a skill process becomes nobody
  std::string user_reason;       // empty when it can
  bool memory_limit = true;      // false in AddressSanitizer and ThreadSanitizer builds
  std::string memory_reason;     // empty when it is enforced
};

// Asks the kernel, without changing anything: seccomp(SECCOMP_GET_ACTION_AVAIL),
// landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION), geteuid(). Any thread.
SandboxCapabilities probe_sandbox();

// The probe's result for this process, taken once on first use. Any thread.
const SandboxCapabilities& sandbox_capabilities();

// One line for the daemon's start: "skill sandbox: seccomp on; Landlock ABI 7;
// user switch to nobody (uid 65534); memory limit on".
std::string describe(const SandboxCapabilities& capabilities);

// What a skill process with `spec` gets here, one line: "files: none; network:
// denied; processes: denied; memory: 512 MiB; open files: 64; cpu: 600 s;
// layers: no_new_privs, limits, user nobody (uid 65534), Landlock ABI 7, seccomp".
std::string describe(const SandboxSpec& spec, const SandboxCapabilities& capabilities);

// Refuses (ErrorCode::refused) a spec that requires a layer `capabilities`
// lacks: "the manifest requires Landlock (sandbox.require), which is
// unavailable here: ...", one sentence per missing layer.
Result<void> check_requirements(const SandboxSpec& spec, const SandboxCapabilities& capabilities);

}  // namespace passepartout

// The sandbox a manifest asks for, and the probe of what this kernel offers.
#include "skills/sandbox_spec.hpp"

#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "base/errno_text.hpp"

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif

namespace passepartout {
namespace {

// True in builds whose sanitizer reserves terabytes of shadow address space.
constexpr bool kSanitizerNeedsAddressSpace =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& part : parts) {
    if (!out.empty()) out += separator;
    out += part;
  }
  return out;
}

}  // namespace

SandboxCapabilities probe_sandbox() {
  SandboxCapabilities found;

  // Both actions the worker's filter uses must be known to the kernel.
  for (const std::uint32_t action : {std::uint32_t{SECCOMP_RET_TRAP}, std::uint32_t{SECCOMP_RET_ERRNO}}) {
    std::uint32_t asked = action;
    if (::syscall(SYS_seccomp, long{SECCOMP_GET_ACTION_AVAIL}, 0L, &asked) != 0) {
      const int error = errno;
      found.seccomp_reason = error == ENOSYS || error == EINVAL
                                 ? "the kernel has no seccomp filters (seccomp: " + errno_text(error) + ")"
                                 : "the container refuses seccomp (seccomp: " + errno_text(error) + ")";
      break;
    }
  }
  found.seccomp = found.seccomp_reason.empty();

  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0L, long{LANDLOCK_CREATE_RULESET_VERSION});
  if (abi > 0) {
    found.landlock_abi = static_cast<int>(abi);
  } else {
    const int error = errno;
    found.landlock_reason =
        error == EOPNOTSUPP ? "Landlock is built into the kernel but not enabled at boot (add landlock to lsm=; "
                              "landlock_create_ruleset: " +
                                  errno_text(error) + ")"
        : error == ENOSYS ? "the kernel has no Landlock (Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK; "
                            "landlock_create_ruleset: " +
                                errno_text(error) + ")"
                          : "the container refuses Landlock (landlock_create_ruleset: " + errno_text(error) + ")";
  }

  found.can_switch_user = ::geteuid() == 0;
  if (!found.can_switch_user) {
    found.user_reason =
        "the daemon does not run as root (uid " + std::to_string(::geteuid()) + "), so skill processes keep its user";
  }

  found.memory_limit = !kSanitizerNeedsAddressSpace;
  if (!found.memory_limit) {
    found.memory_reason = "a sanitizer build (its shadow memory needs the address space), so no RLIMIT_AS";
  }
  return found;
}

const SandboxCapabilities& sandbox_capabilities() {
  static const SandboxCapabilities kProbed = probe_sandbox();
  return kProbed;
}

std::string describe(const SandboxCapabilities& capabilities) {
  std::vector<std::string> parts;
  parts.push_back(capabilities.seccomp ? "seccomp on" : "seccomp off: " + capabilities.seccomp_reason);
  parts.push_back(capabilities.landlock_abi > 0 ? "Landlock ABI " + std::to_string(capabilities.landlock_abi)
                                                : "Landlock off: " + capabilities.landlock_reason);
  parts.push_back(capabilities.can_switch_user ? "user switch to nobody (uid 65534)"
                                               : "no user switch: " + capabilities.user_reason);
  parts.push_back(capabilities.memory_limit ? "memory limit on" : "memory limit off: " + capabilities.memory_reason);
  return "skill sandbox: " + join(parts, "; ");
}

std::string describe(const SandboxSpec& spec, const SandboxCapabilities& capabilities) {
  std::vector<std::string> parts;
  if (spec.files.empty()) {
    parts.emplace_back("files: none");
  } else {
    std::vector<std::string> paths;
    paths.reserve(spec.files.size());
    for (const auto& path : spec.files) paths.push_back(path.string());
    parts.push_back("files: " + join(paths, ", ") + " (read-only" +
                    (capabilities.landlock_abi > 0 ? ")" : "; not confined to them: Landlock is off)"));
  }
  parts.emplace_back(spec.network ? "network: allowed" : "network: denied");
  parts.emplace_back(spec.processes ? "processes: allowed" : "processes: denied");
  parts.push_back("memory: " + (capabilities.memory_limit ? size_text(spec.memory_bytes)
                                                          : "not limited (" + capabilities.memory_reason + ")"));
  parts.push_back("open files: " + std::to_string(spec.open_files));
  parts.push_back("cpu: " + std::to_string(spec.cpu_seconds) + " s");

  std::vector<std::string> layers{"no_new_privs", "limits"};
  if (capabilities.can_switch_user) layers.emplace_back("user nobody (uid 65534)");
  if (capabilities.landlock_abi > 0) layers.push_back("Landlock ABI " + std::to_string(capabilities.landlock_abi));
  if (capabilities.seccomp) layers.emplace_back("seccomp");
  std::string line = join(parts, "; ") + "; layers: " + join(layers, ", ");
  if (!spec.require.empty()) line += "; requires " + join(spec.require, ", ");
  return line;
}

Result<void> check_requirements(const SandboxSpec& spec, const SandboxCapabilities& capabilities) {
  std::vector<std::string> missing;
  for (const std::string& layer : spec.require) {
    if (layer == "seccomp" && !capabilities.seccomp) {
      missing.push_back("the manifest requires seccomp (sandbox.require), which is unavailable here: " +
                        capabilities.seccomp_reason);
    } else if (layer == "landlock" && capabilities.landlock_abi == 0) {
      missing.push_back("the manifest requires Landlock (sandbox.require), which is unavailable here: " +
                        capabilities.landlock_reason);
    } else if (layer == "user" && !capabilities.can_switch_user) {
      missing.push_back("the manifest requires a user switch (sandbox.require), which is unavailable here: " +
                        capabilities.user_reason);
    }
  }
  if (missing.empty()) return {};
  return fail(ErrorCode::refused, join(missing, "; "));
}

}  // namespace passepartout

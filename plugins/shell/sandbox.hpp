// The shell actuator's sandbox: the protections a command runs under (user,
// resource limits, Landlock, seccomp), prepared once at create and applied in
// the forked child before execve.
#pragma once

#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <passepartout/value.hpp>

#include <string>
#include <vector>

#include "unique_fd.hpp"

namespace passepartout::shell {

struct ChildFailure;

// What a command is started with; every pointer stays valid until spawn returns.
struct Launch {
  const char* path = nullptr;   // the executable
  char* const* argv = nullptr;  // NULL-terminated
  char* const* envp = nullptr;  // NULL-terminated
  int stdout_fd = -1;           // becomes the child's 1
  int stderr_fd = -1;           // becomes the child's 2 (stdin is /dev/null)
};

// Built at create from the manifest's config and the (existing) workdir;
// immutable afterwards, so spawn() may run on any number of threads at once.
// Owns the Landlock ruleset descriptor and the seccomp program.
class Sandbox {
 public:
  // The one folder besides the workdir a command may write in (TMPDIR).
  static constexpr const char kTemporaryFolder[] = "/tmp";

  // What the skill should log at create besides description(): a workdir
  // handed over to the command's user (info), commands run as root (warning).
  struct Notice {
    bool is_warning;
    std::string text;
  };

  // Reads `user`, `allow_root`, `network`, `limits` and
  // `disable_landlock_for_test` from `config`; `workdir` is an existing
  // folder. Throws std::invalid_argument (which refuses the load) on bad
  // config or a workdir the command's user could not use, and
  // std::runtime_error when the kernel refuses a protection it offers. May
  // chown an empty workdir the daemon owns to the command's user.
  Sandbox(const ValueRef& config, std::string workdir);
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Forks a child that enters a new process group, takes stdin from
  // /dev/null and the launch's stdout and stderr (handed to the command's
  // user, so that /dev/stdout opens), applies every protection, changes to
  // the workdir and execs. Returns its pid once it has exec'd; the caller
  // reaps it. Throws std::runtime_error ("shell: cannot start the command:
  // setresuid(65534): Operation not permitted") when a step failed, after
  // reaping it. Any thread; the calling thread's signals are blocked around
  // the fork.
  pid_t spawn(const Launch& launch) const;

  // One line for the log: who commands run as, and which protections hold.
  const std::string& description() const noexcept { return description_; }
  const std::vector<Notice>& notices() const noexcept { return notices_; }
  // The name the command runs under, for USER and LOGNAME.
  const std::string& user_name() const noexcept { return user_name_; }

 private:
  struct Limit {
    int resource;
    rlim_t soft;
    rlim_t hard;
  };

  void choose_user(const ValueRef& config);
  void hand_over_workdir();
  void read_limits(const ValueRef& config);
  void build_landlock(bool is_disabled_for_test);
  void build_seccomp();
  std::string step_text(const ChildFailure& failure, const Launch& launch) const;

  std::string workdir_;
  // Identity: switched to only when the daemon is root and commands may not be.
  bool switches_user_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::string user_name_;
  std::string user_text_;  // "nobody (uid 65534)"

  std::vector<Limit> limits_;
  std::string limits_text_;

  bundled::Fd ruleset_;  // Landlock; closed when Landlock is unavailable
  int landlock_abi_ = 0;
  std::string landlock_text_;

  bool network_ = false;
  std::vector<sock_filter> filter_;  // empty when the network is allowed

  std::string description_;
  std::vector<Notice> notices_;
};

}  // namespace passepartout::shell

// Test support for the integration tests: the real `passepartout` executable
// run as a child process in a temp dir (support/wire_client.hpp talks to it).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/skill_fixtures.hpp"
#include "support/wire_client.hpp"
#include "value/value.hpp"

namespace passepartout::testing {

// Long enough for a loaded machine or a sanitizer build; a test that hits it has hung.
inline constexpr std::chrono::seconds kProcessWait{30};

// What a finished run of the executable printed and how it ended.
struct ProcessRun {
  int exit_status = -1;  // -1: killed by a signal or did not finish in time
  std::string out;
  std::string err;
};

// Runs `passepartout <args>` to completion (at most kProcessWait) with
// `env` as its whole environment.
ProcessRun run_passepartout(const std::vector<std::string>& args, const std::vector<std::string>& env);

// A hermetic environment for the child: PATH, HOME=`home`, and the
// sanitizers' options when set; nothing else leaks in from the test's own.
std::vector<std::string> hermetic_env(const std::filesystem::path& home);

// The whole file (empty when it cannot be read).
std::string read_text_file(const std::filesystem::path& file);

// `passepartout daemon` in a temp dir: HOME, the state folder and the socket
// all inside it, port 0, the scripted provider with `script` (YAML rules).
// The constructor starts it and waits for `listening on 127.0.0.1:<port>`;
// the destructor kills it if it still runs.
class DaemonProcess {
 public:
  struct Options {
    std::string script;                   // the scripted provider's rules
    std::vector<std::string> extra_args;  // more flags
    std::vector<std::string> extra_env;   // more NAME=value
    bool copy_manifests = false;          // run from a copy of the bundled manifests (to change them)
    std::filesystem::path state_from;     // start from a copy of this state folder (a restart)
    std::string provider = "scripted";    // --provider
  };

  explicit DaemonProcess(Options options);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  bool started() const noexcept { return port_ != 0; }
  std::uint16_t port() const noexcept { return port_; }
  pid_t pid() const noexcept { return pid_; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  std::filesystem::path socket_path() const { return dir_.path() / "s.sock"; }
  std::filesystem::path state_dir() const { return dir_.path() / "state"; }
  std::filesystem::path manifest_dir() const { return dir_.path() / "manifests"; }
  // The daemon's standard error so far (its log).
  std::string log() const;
  // Waits until the log holds `text` (the event loops write a round's info
  // lines after its replies, so a line may follow the frame it explains);
  // false when the timeout passes first.
  bool wait_for_log(std::string_view text, std::chrono::milliseconds timeout = kProcessWait) const;
  // The operator token the daemon wrote.
  std::string token() const;

  void signal(int number) const;
  // Waits for the process to exit; its exit status, or nullopt on timeout
  // or when a signal ended it.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout = kProcessWait);

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::uint16_t port_ = 0;
};

}  // namespace passepartout::testing

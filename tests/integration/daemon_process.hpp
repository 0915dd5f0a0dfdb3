// Test support for the integration tests: the real `passepartout` executable
// run as a child process in a temp dir (support/wire_client.hpp talks to it),
// and a user's requests to it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
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
// The same with `input` as its standard input (then its end).
ProcessRun run_passepartout(const std::vector<std::string>& args, const std::vector<std::string>& env,
                            std::string_view input);

// `passepartout <args>` running with a pipe for its standard input, written
// a piece at a time, and its standard output read as it comes (an
// interactive command). The destructor kills it if it still runs.
class InteractiveProcess {
 public:
  InteractiveProcess(const std::vector<std::string>& args, const std::vector<std::string>& env);
  ~InteractiveProcess();
  InteractiveProcess(const InteractiveProcess&) = delete;
  InteractiveProcess& operator=(const InteractiveProcess&) = delete;

  // Writes `text` to its standard input.
  void write(std::string_view text);
  // Waits until its standard output so far holds `text` `count` times;
  // false when the timeout passes first.
  bool wait_for_output(std::string_view text, std::size_t count = 1, std::chrono::milliseconds timeout = kProcessWait);
  // Its standard error so far.
  std::string err() const;
  // Ends its standard input and waits (at most kProcessWait) for it to exit.
  ProcessRun finish();

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  int in_fd_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  std::string out_;
};

// A hermetic environment for the child: PATH, HOME=`home`, and the
// sanitizers' options when set; nothing else leaks in from the test's own.
std::vector<std::string> hermetic_env(const std::filesystem::path& home);

// The line of an mcp_servers entry (indented for a server's keys) that runs
// its server as the daemon's own user: "    user: root\n" when the tests run
// as root, where a server otherwise runs as nobody, who may not reach the
// build tree or the npm cache in root's home; "" for anyone else.
std::string as_daemon_user();

// The whole file (empty when it cannot be read).
std::string read_text_file(const std::filesystem::path& file);

// The bundled skills' libraries copied into `plugins` and their manifests
// into `manifests` (both created): folders of a test's own, to change.
void copy_bundled_skills(const std::filesystem::path& plugins, const std::filesystem::path& manifests);

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
    std::filesystem::path socket{};       // the Unix socket; empty: s.sock in dir()
    std::string metrics_port = "off";     // --metrics-port: off, "0" for a free one (metrics_port()); "": not given
    // With copy_manifests: changes the copy (its folder) before the daemon starts.
    std::function<void(const std::filesystem::path&)> edit_manifests = {};
  };

  explicit DaemonProcess(Options options);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  bool started() const noexcept { return port_ != 0; }
  std::uint16_t port() const noexcept { return port_; }
  // The metrics endpoint's port, from its `metrics on 127.0.0.1:<port>` line; 0 when off.
  std::uint16_t metrics_port() const noexcept { return metrics_port_; }
  pid_t pid() const noexcept { return pid_; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  std::filesystem::path socket_path() const { return socket_.empty() ? dir_.path() / "s.sock" : socket_; }
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
  std::filesystem::path socket_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::uint16_t port_ = 0;
  std::uint16_t metrics_port_ = 0;
};

// A user's input as the TUI sends it, with :REQUEST-ID and :AUTH (which
// every TCP request needs: the daemon's token()) when they are given.
std::string user_input(std::string_view text, std::string_view request_id = "", std::string_view token = "");
// Sends `message` on `client` and reads frames until the one answering
// `request_id`: all of them, printed, one a line.
std::string exchange(WireClient& client, const std::string& message, std::string_view request_id);
// The same with `text` as the user's input.
std::string converse(WireClient& client, std::string_view text, std::string_view request_id);
// The same on a new connection to the daemon's Unix socket (no token needed).
std::string ask(const DaemonProcess& daemon, std::string_view text, std::string_view request_id);
// Sends `text` as the user's input on a new connection to the daemon's Unix
// socket and reads up to the answer to `request_id`: the token of the
// approval its action asked for (REQUIREs one).
std::string ask_for_approval(const DaemonProcess& daemon, std::string_view text, std::string_view request_id);

}  // namespace passepartout::testing

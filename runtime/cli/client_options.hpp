// How the client commands are wired into the command line: what they parse,
// the connection options each takes, and one function per command group,
// defined in that group's file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/client_commands.hpp"
#include "cli/commands.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace passepartout::cli {

// Everything the client commands parse into; shared by their callbacks (only
// one subcommand runs) and kept alive by them.
struct ParsedClient {
  std::string socket_path;
  int port = 0;
  std::string host;
  std::string token_file;
  double timeout_s = 0;
  bool json = false;
  const CLI::Option* verbose = nullptr;  // the top-level --verbose, read after parsing

  std::vector<std::string> chat_words;
  std::string session_id;
  std::filesystem::path manifest;
  std::string name;
  bool cascade = false;
  bool force = false;
  std::string token;
  std::string all_from;
  std::int64_t limit = 0;    // 0: not given
  std::int64_t offset = -1;  // -1: not given
  DoctorOptions doctor;
  std::filesystem::path state_dir;  // skills history --state-dir: read this folder, not the daemon
  std::string skill;                // skills history --skill
  NewSkillOptions new_skill;        // skills new
  InstallSkillOptions install;      // skills install (and uninstall's --manifests, --plugins)
  RememberOptions remember;         // approvals approve --remember
};

// Seconds to wait for the daemon's answer unless --timeout says otherwise.
inline constexpr int kReplyTimeoutS = 30;
inline constexpr int kChatReplyTimeoutS = 120;

inline constexpr const char* kExitFooter =
    "Exit status: 0 success; 1 the daemon could not be reached or the request failed; 2 bad usage or a request "
    "the daemon did not understand.";

// --socket, --port, --host, --token-file, --timeout and --json on `command`.
void add_connection_options(CLI::App& command, ParsedClient& parsed, int default_timeout_s);

// What a client command does once the daemon's address is known.
using ClientBody = std::function<int(const Target& target, const Output& output)>;
// Sets `chosen` to configure logging, resolve the target, then run `body` with it.
void choose(Runner& chosen, const std::shared_ptr<ParsedClient>& parsed, int default_timeout_s, ClientBody body);

// Each command group's subcommands, in the group's own file.
void add_chat_command(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen);
void add_status_commands(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen);  // status, stop
void add_skills_commands(CLI::App& skills, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen);
void add_install_commands(CLI::App& skills, const std::shared_ptr<ParsedClient>& parsed,
                          Runner& chosen);  // skills new|install|uninstall
void add_approvals_commands(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen);
void add_rules_commands(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen);
void add_doctor_command(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen);

}  // namespace passepartout::cli

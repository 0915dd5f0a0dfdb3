// Finding the daemon a client command talks to: its socket or TCP port from
// the options, the environment or the defaults, and the operator token.
#include <cstdlib>
#include <system_error>
#include <utility>

#include "base/state_paths.hpp"
#include "base/utf8.hpp"
#include "cli/client_commands.hpp"
#include "cli/terminal_text.hpp"
#include "daemon/daemon_config.hpp"
#include "daemon/token_file.hpp"

namespace passepartout::cli {
namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// A port number in [1, 65535], or nullopt.
std::optional<std::uint16_t> parse_port(const std::string& text) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const long port = std::stol(text);
  if (port < 1 || port > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(port);
}

std::chrono::milliseconds seconds_to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

}  // namespace

// The socket of the daemon scripts/passepartout.service runs (RuntimeDirectory=passepartout).
constexpr const char* kSystemSocket = "/run/passepartout/passepartout.sock";

// The user's own daemon's socket, else, when that does not exist and the
// system service's does, the service's: an operator finds either without flags.
fs::path default_socket_path() {
  fs::path own = passepartout::default_socket_path(process_env("XDG_RUNTIME_DIR"), default_state_dir());
  std::error_code ec;
  if (!fs::exists(own, ec) && fs::exists(kSystemSocket, ec)) return kSystemSocket;
  return own;
}

Result<Target> resolve_target(const ConnectionOptions& options, std::chrono::milliseconds default_reply_timeout) {
  Target target;
  target.reply_timeout = options.timeout_s ? seconds_to_ms(*options.timeout_s) : default_reply_timeout;
  if (!options.host.empty()) target.endpoint.host = options.host;
  if (!options.socket_path.empty()) {
    target.endpoint.socket_path = options.socket_path;
  } else if (options.port) {
    target.endpoint.port = *options.port;
  } else if (std::string socket = env("PASSEPARTOUT_SOCKET"); !socket.empty()) {
    target.endpoint.socket_path = socket;
  } else if (std::string port = env("PASSEPARTOUT_PORT"); !port.empty()) {
    const auto parsed = parse_port(port);
    if (!parsed) {
      return fail(ErrorCode::invalid_input,
                  "PASSEPARTOUT_PORT is '" + printable(port) + "', not a port number from 1 to 65535");
    }
    target.endpoint.port = *parsed;
  } else {
    target.endpoint.socket_path = default_socket_path();
  }
  if (!target.endpoint.is_tcp()) return target;

  // The token, for operator requests over TCP.
  std::string file = options.token_file;
  std::string source = "--token-file";
  if (file.empty()) {
    file = env("PASSEPARTOUT_TOKEN_FILE");
    source = "PASSEPARTOUT_TOKEN_FILE";
  }
  if (!file.empty()) {
    auto token = read_token(file);
    if (!token) {
      return fail(ErrorCode::invalid_input,
                  "cannot read the token file " + file + " (from " + source + "): " + token.error().message);
    }
    target.token = std::move(*token);
    target.token_source = file;
  } else if (std::string from_env = env("PASSEPARTOUT_TOKEN"); !from_env.empty()) {
    target.token = std::move(from_env);
    target.token_source = "PASSEPARTOUT_TOKEN";
  } else if (const fs::path default_file = token_file(default_state_dir()); auto from_file = read_token(default_file)) {
    target.token = std::move(*from_file);
    target.token_source = default_file.string();
  }
  if (!is_valid_utf8(target.token)) {
    return fail(ErrorCode::invalid_input, "the token from " + target.token_source + " is not UTF-8 text");
  }
  return target;
}

}  // namespace passepartout::cli

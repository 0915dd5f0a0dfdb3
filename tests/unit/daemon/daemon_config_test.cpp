// Tests for the daemon's settings: precedence of the sources, the checks and
// their messages, the .env file, the token file and systemd notifications.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "daemon/daemon.hpp"
#include "daemon/daemon_config.hpp"
#include "daemon/systemd_notify.hpp"
#include "daemon/token_file.hpp"
#include "support/skill_fixtures.hpp"

namespace passepartout {
namespace {

using testing::TempDir;
using namespace std::chrono_literals;

// Sources with a fake environment.
struct Sources {
  std::map<std::string, std::string> env;
  SettingSources sources;

  Sources() {
    sources.env = [this](std::string_view name) -> std::optional<std::string> {
      auto it = env.find(std::string(name));
      if (it == env.end() || it->second.empty()) return std::nullopt;
      return it->second;
    };
    env["PASSEPARTOUT_STATE_DIR"] = "/state";
  }
  Result<DaemonConfig> resolve() const { return resolve_daemon_config(sources); }
};

std::string error_of(const Result<DaemonConfig>& result) {
  REQUIRE_FALSE(result.has_value());
  return result.error().message;
}

}  // namespace

TEST_CASE("daemon settings default to the seed's values", "[daemon][config]") {
  Sources s;
  auto config = s.resolve();
  REQUIRE(config.has_value());
  CHECK(config->state_dir == "/state");
  CHECK(config->socket_path == "/state/passepartout.sock");
  CHECK(config->listen_address == "127.0.0.1");
  CHECK(config->port == 9105);
  CHECK(config->listen_tcp);
  CHECK(config->providers == std::vector<std::string>{"offline"});
  CHECK(config->memory_file == "/state/memory.sexp");
  CHECK(config->memory_history_limit == 100'000);
  CHECK(config->heartbeat_interval == 60s);
  CHECK(config->auto_save_interval == 300s);
  CHECK(config->default_actuator == "CLI");
  CHECK(config->silent_actuators == std::vector<std::string>{"CLI", "SYSTEM-MESSAGE", "EMACS"});
  CHECK(config->assistant_name == "Agent");
  CHECK(config->context_log_limit == 20);
  CHECK(config->privacy_tags == std::vector<std::string>{"@personal"});
  CHECK(config->approval_lifetime == 24h);
  CHECK(config->approval_retention == 24h * 30);
  CHECK(config->max_pending_approvals == 1000);
  CHECK(config->max_pending_approvals_per_session == 20);
  CHECK(config->max_frame == 1024 * 1024);
  CHECK(config->idle_poll == 200us);
  CHECK(config->log_level == LogLevel::info);

  s.env["XDG_RUNTIME_DIR"] = "/run/user/1000";
  CHECK(s.resolve()->socket_path == "/run/user/1000/passepartout.sock");
}

TEST_CASE("the seed's environment variables keep their names and map onto the options", "[daemon][config]") {
  Sources s;
  s.env["HEARTBEAT_INTERVAL"] = "0.25";
  s.env["MEMORY_AUTO_SAVE_INTERVAL"] = "5";
  s.env["DEFAULT_ACTUATOR"] = "tui";
  s.env["SILENT_ACTUATORS"] = "cli, :emacs";
  s.env["MEMEX_ASSISTANT"] = "Jeeves";
  s.env["CONTEXT_LOG_LIMIT"] = "5";
  s.env["PRIVACY_FILTER_TAGS"] = "@personal, @health";
  s.env["MEMORY_SNAPSHOT_PATH"] = "/m/memory.sexp";
  s.env["PASSEPARTOUT_SCRIPT"] = "/s.yaml";
  auto config = s.resolve();
  REQUIRE(config.has_value());
  CHECK(config->heartbeat_interval == 250ms);
  CHECK(config->auto_save_interval == 5s);
  CHECK(config->default_actuator == "TUI");
  CHECK(config->silent_actuators == std::vector<std::string>{"CLI", "EMACS"});
  CHECK(config->assistant_name == "Jeeves");
  CHECK(config->context_log_limit == 5);
  CHECK(config->privacy_tags == std::vector<std::string>{"@personal", "@health"});
  CHECK(config->memory_file == "/m/memory.sexp");
  CHECK(config->providers == std::vector<std::string>{"scripted"});  // a script alone chooses it
  CHECK(config->script == "/s.yaml");
}

TEST_CASE("the command line beats the config file, which beats the environment", "[daemon][config]") {
  TempDir dir;
  const auto file = dir.path() / "daemon.yaml";
  std::ofstream(file) << "port: 7000\nmax-connections: 9\nsilent-actuators: [cli, shell]\nno-tcp: true\n"
                         "script: rules.yaml\n";
  Sources s;
  s.env["PASSEPARTOUT_PORT"] = "6000";
  s.env["PASSEPARTOUT_MAX_CONNECTIONS"] = "3";
  s.env["PASSEPARTOUT_MAX_FRAME"] = "2048";
  s.sources.config_file = file;
  s.sources.command_line["port"] = "8000";
  auto config = s.resolve();
  REQUIRE(config.has_value());
  CHECK(config->port == 8000);
  CHECK(config->max_connections == 9);
  CHECK(config->max_frame == 2048);
  CHECK(config->silent_actuators == std::vector<std::string>{"CLI", "SHELL"});
  CHECK_FALSE(config->listen_tcp);
  CHECK(config->script == dir.path() / "rules.yaml");  // relative to the config file
}

TEST_CASE("a bad setting is refused with its source and what is allowed", "[daemon][config]") {
  Sources s;
  SECTION("a fleet's trusted key that is not one") {
    s.env["PASSEPARTOUT_FLEET_TRUSTED_KEY"] = "d75a980182b10ab7";
    CHECK(error_of(s.resolve()) ==
          "PASSEPARTOUT_FLEET_TRUSTED_KEY: 'd75a980182b10ab7' is not an Ed25519 public key (64 hex digits, as "
          "`passepartout fleet keygen` prints it)");
    s.env["PASSEPARTOUT_FLEET_TRUSTED_KEY"] = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    auto config = s.resolve();
    REQUIRE(config.has_value());
    CHECK(config->fleet_trusted_key == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  }
  SECTION("a flag") {
    s.sources.command_line["port"] = "70000";
    CHECK(error_of(s.resolve()) == "--port: '70000' is not a port number (0 to 65535)");
  }
  SECTION("an environment variable") {
    s.env["HEARTBEAT_INTERVAL"] = "-1";
    CHECK(error_of(s.resolve()).starts_with("HEARTBEAT_INTERVAL: '-1' is not a number of seconds"));
  }
  SECTION("a frame limit over what six hex digits can say") {
    s.sources.command_line["max-frame"] = "16777216";
    CHECK(error_of(s.resolve()) == "--max-frame: '16777216' is not a frame size in code points (64 to 16777215)");
  }
  SECTION("an unknown provider") {
    s.sources.command_line["provider"] = "gpt";
    CHECK(error_of(s.resolve())
              .find("unknown provider 'gpt' (known: scripted, offline, ollama, openrouter, openai, anthropic, groq, "
                    "gemini)") != std::string::npos);
  }
  SECTION("the scripted provider without a script") {
    s.sources.command_line["provider"] = "scripted";
    CHECK(error_of(s.resolve()).find("--script FILE") != std::string::npos);
  }
  SECTION("approval lifetime and retention, memory history limit") {
    s.env["PASSEPARTOUT_APPROVAL_RETENTION"] = "0";    // allowed: kept for ever
    s.env["PASSEPARTOUT_MEMORY_HISTORY_LIMIT"] = "0";  // allowed: no limit
    s.sources.command_line["approval-lifetime"] = "3600";
    auto config = s.resolve();
    REQUIRE(config.has_value());
    CHECK(config->approval_lifetime == 1h);
    CHECK(config->approval_retention == 0s);
    CHECK(config->memory_history_limit == 0);
    s.env["PASSEPARTOUT_MEMORY_HISTORY_LIMIT"] = "lots";
    CHECK(error_of(s.resolve()).starts_with("PASSEPARTOUT_MEMORY_HISTORY_LIMIT: 'lots' is not a number of versions"));
    s.env.erase("PASSEPARTOUT_MEMORY_HISTORY_LIMIT");
    s.sources.command_line["approval-lifetime"] = "0";
    CHECK(error_of(s.resolve()) == "--approval-lifetime: '0' is not a number of seconds above 0");
  }
  SECTION("bounds on pending approvals, from flags and the environment") {
    s.env["PASSEPARTOUT_MAX_PENDING_APPROVALS"] = "50";
    s.sources.command_line["max-pending-approvals-per-session"] = "5";
    auto config = s.resolve();
    REQUIRE(config.has_value());
    CHECK(config->max_pending_approvals == 50);
    CHECK(config->max_pending_approvals_per_session == 5);
    s.sources.command_line["max-pending-approvals-per-session"] = "0";
    CHECK(error_of(s.resolve()) ==
          "--max-pending-approvals-per-session: '0' is not a number of approvals (1 to 1000000)");
    s.sources.command_line.erase("max-pending-approvals-per-session");
    s.env["PASSEPARTOUT_MAX_PENDING_APPROVALS"] = "lots";
    CHECK(error_of(s.resolve()) ==
          "PASSEPARTOUT_MAX_PENDING_APPROVALS: 'lots' is not a number of approvals (1 to 1000000)");
  }
  SECTION("a log level") {
    s.env["PASSEPARTOUT_LOG_LEVEL"] = "loud";
    CHECK(error_of(s.resolve()) == "PASSEPARTOUT_LOG_LEVEL: 'loud' is not a log level (debug, info, warn or error)");
  }
  SECTION("a switch") {
    s.env["PASSEPARTOUT_NO_TCP"] = "maybe";
    CHECK(error_of(s.resolve()) == "PASSEPARTOUT_NO_TCP: 'maybe' is not true or false");
  }
  SECTION("a socket path too long for sun_path") {
    s.sources.command_line["socket"] = "/" + std::string(120, 's');
    CHECK(error_of(s.resolve()).find("107 bytes") != std::string::npos);
  }
}

TEST_CASE("the gate budget and its maximum are read, bounded, and the budget may not exceed the maximum",
          "[daemon][config]") {
  Sources s;
  SECTION("defaults") {
    auto config = s.resolve();
    REQUIRE(config.has_value());
    CHECK(config->gate_timeout == 1s);
    CHECK(config->gate_timeout_max == 10s);
  }
  SECTION("set, in seconds") {
    s.sources.command_line["gate-timeout"] = "0.25";
    s.env["PASSEPARTOUT_GATE_TIMEOUT_MAX"] = "30";
    auto config = s.resolve();
    REQUIRE(config.has_value());
    CHECK(config->gate_timeout == 250ms);
    CHECK(config->gate_timeout_max == 30s);
  }
  SECTION("zero and past an hour are refused") {
    s.sources.command_line["gate-timeout"] = "0";
    CHECK(error_of(s.resolve()) == "--gate-timeout: '0' is not a number of seconds above 0");
    s.sources.command_line["gate-timeout"] = "1";
    s.sources.command_line["gate-timeout-max"] = "3601";
    CHECK(error_of(s.resolve()) == "--gate-timeout-max: '3601' is not a number of seconds from 0.001 to 3600");
  }
  SECTION("a budget above the maximum stops the start, naming both") {
    s.sources.command_line["gate-timeout"] = "20";
    CHECK(error_of(s.resolve()) ==
          "--gate-timeout (20000 ms) is above --gate-timeout-max (10000 ms); lower the one or raise the other");
  }
}

TEST_CASE("a config file's mistakes are reported with file, line and column", "[daemon][config]") {
  TempDir dir;
  const auto file = dir.path() / "daemon.yaml";
  Sources s;
  s.sources.config_file = file;
  SECTION("unknown keys, all of them") {
    std::ofstream(file) << "port: 1\nprot: 2\nsockte: /x\n";
    const std::string message = error_of(s.resolve());
    CHECK(message.find(file.string() + ":2:1: unknown key 'prot'; did you mean 'port'?") != std::string::npos);
    CHECK(message.find(file.string() + ":3:1: unknown key 'sockte'; did you mean 'socket'?") != std::string::npos);
  }
  SECTION("a bad value, at its line") {
    std::ofstream(file) << "\nport: many\n";
    CHECK(error_of(s.resolve()) == file.string() + ":2:7: port: 'many' is not a port number (0 to 65535)");
  }
  SECTION("not YAML") {
    std::ofstream(file) << "port: [1\n";
    CHECK(error_of(s.resolve()).starts_with(file.string() + ":"));
  }
  SECTION("missing") {
    auto result = resolve_daemon_config(SettingSources{{}, dir.path() / "absent.yaml", {}});
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code == ErrorCode::io_error);
  }
}

TEST_CASE("the config file's budget is read, its per-provider names checked, and --price-table kept",
          "[daemon][config][budget]") {
  TempDir dir;
  const auto file = dir.path() / "daemon.yaml";
  Sources s;
  s.sources.config_file = file;
  SECTION("caps, in order") {
    std::ofstream(file) << "budget:\n  daily_usd: 5\n  per_provider:\n    openai: {monthly_usd: 50}\n";
    s.sources.command_line = {{"price-table", (dir.path() / "prices.json").string()}};
    const auto config = s.resolve();
    REQUIRE(config.has_value());
    REQUIRE(config->budget.caps.size() == 2);
    CHECK(config->budget.caps[0].name == "daily_usd");
    CHECK(config->budget.caps[1].name == "openai.monthly_usd");
    CHECK(config->price_table == dir.path() / "prices.json");
  }
  SECTION("a provider the daemon does not know, with the nearest one") {
    std::ofstream(file) << "budget:\n  per_provider:\n    opnai: {monthly_usd: 50}\n";
    const std::string message = error_of(s.resolve());
    CHECK(message.starts_with(file.string() + ":3:5: unknown key 'opnai' in budget.per_provider; did you mean "
                                              "'openai'?"));
  }
  SECTION("a bad cap, at its line") {
    std::ofstream(file) << "port: 1\nbudget:\n  daily_usd: lots\n";
    CHECK(error_of(s.resolve()).find(file.string() + ":3:14: daily_usd: 'lots' is not an amount of US dollars") !=
          std::string::npos);
  }
}

TEST_CASE("the .env file fills only what the environment leaves unset", "[daemon][config]") {
  TempDir dir;
  const auto file = dir.path() / ".env";
  std::ofstream(file) << "# settings\nPP_TEST_ENV_A=from-file\nexport PP_TEST_ENV_B=\"quoted value\"\n"
                         "PP_TEST_ENV_C='single' \n\nPP_TEST_ENV_D=plain # a comment\n";
  ::setenv("PP_TEST_ENV_A", "from-environment", 1);
  ::unsetenv("PP_TEST_ENV_B");
  ::unsetenv("PP_TEST_ENV_C");
  ::unsetenv("PP_TEST_ENV_D");
  auto loaded = load_env_file(file);
  REQUIRE(loaded.has_value());
  CHECK(*loaded == 3);
  CHECK(std::string(std::getenv("PP_TEST_ENV_A")) == "from-environment");
  CHECK(std::string(std::getenv("PP_TEST_ENV_B")) == "quoted value");
  CHECK(std::string(std::getenv("PP_TEST_ENV_C")) == "single");
  CHECK(std::string(std::getenv("PP_TEST_ENV_D")) == "plain");
  for (const char* name : {"PP_TEST_ENV_A", "PP_TEST_ENV_B", "PP_TEST_ENV_C", "PP_TEST_ENV_D"}) ::unsetenv(name);

  CHECK(*load_env_file(dir.path() / "absent") == 0);
  std::ofstream(file) << "GOOD=1\nthis is not a setting\n";
  auto bad = load_env_file(file);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message.starts_with(file.string() + ":2: expected NAME=value"));
  CHECK(std::getenv("GOOD") == nullptr);  // nothing set from a malformed file
}

TEST_CASE("the token file is created 0600 once and refused when others can read it", "[daemon][config]") {
  TempDir dir;
  const auto file = token_file(dir.path() / "state");
  auto token = load_or_create_token(file);
  REQUIRE(token.has_value());
  CHECK(token->size() == 64);
  struct stat info {};
  REQUIRE(::stat(file.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
  CHECK(*load_or_create_token(file) == *token);  // kept across restarts
  CHECK(*read_token(file) == *token);

  ::chmod(file.c_str(), 0644);
  auto refused = load_or_create_token(file);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::refused);
  CHECK(refused.error().message.find("0644") != std::string::npos);

  ::chmod(file.c_str(), 0600);
  std::ofstream(file) << "not a token\n";
  CHECK_FALSE(load_or_create_token(file).has_value());
  CHECK(read_token(dir.path() / "absent").error().code == ErrorCode::not_found);
}

TEST_CASE("loopback addresses are recognised", "[daemon][config]") {
  CHECK(is_loopback_address("127.0.0.1"));
  CHECK(is_loopback_address("127.1.2.3"));
  CHECK(is_loopback_address("::1"));
  CHECK(is_loopback_address("localhost"));
  CHECK_FALSE(is_loopback_address("0.0.0.0"));
  CHECK_FALSE(is_loopback_address("192.168.1.10"));
  CHECK_FALSE(is_loopback_address("::"));
  CHECK_FALSE(is_loopback_address("example.org"));
}

TEST_CASE("systemd notifications are datagrams to NOTIFY_SOCKET, abstract names included", "[daemon][config]") {
  TempDir dir;
  const bool abstract = GENERATE(false, true);
  const std::string name =
      abstract ? "@passepartout-test-" + std::to_string(::getpid()) : (dir.path() / "n.sock").string();
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, name.data(), name.size());
  if (abstract) address.sun_path[0] = '\0';
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);

  SystemdNotifier notifier(name, std::chrono::microseconds(30'000'000));
  CHECK(notifier.enabled());
  CHECK(notifier.watchdog_period() == std::chrono::microseconds(15'000'000));
  REQUIRE(notifier.notify("READY=1\nSTATUS=serving"));
  char buffer[128];
  const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
  REQUIRE(got > 0);
  CHECK(std::string(buffer, static_cast<std::size_t>(got)) == "READY=1\nSTATUS=serving");
  ::close(fd);

  CHECK_FALSE(SystemdNotifier().notify("READY=1"));
  CHECK_FALSE(SystemdNotifier().watchdog_period().has_value());
}

TEST_CASE("the event loops' idle poll is set in microseconds and bounded", "[daemon][config]") {
  Sources s;
  s.env["PASSEPARTOUT_IDLE_POLL"] = "0";
  CHECK(s.resolve()->idle_poll == 0us);
  s.env["PASSEPARTOUT_IDLE_POLL"] = "1500";
  CHECK(s.resolve()->idle_poll == 1500us);
  s.env["PASSEPARTOUT_IDLE_POLL"] = "100001";
  CHECK(error_of(s.resolve()) == "PASSEPARTOUT_IDLE_POLL: '100001' is not a number of microseconds (0 to 100000)");
  s.env["PASSEPARTOUT_IDLE_POLL"] = "-5";
  CHECK(error_of(s.resolve()).find("PASSEPARTOUT_IDLE_POLL: '-5' is not a number of microseconds") == 0);
}

TEST_CASE("the decision log is on by default, bounded on disk, and its settings are checked", "[daemon][config]") {
  Sources s;
  auto defaults = s.resolve();
  REQUIRE(defaults.has_value());
  CHECK(defaults->decision_log);
  CHECK(defaults->decision_log_file_bytes == std::size_t{64} * 1024 * 1024);
  CHECK(defaults->decision_log_files == 8);
  CHECK(defaults->decision_log_rotate == std::chrono::hours(24));
  CHECK(defaults->decision_log_sample == 1);
  CHECK(defaults->decision_log_time_gates == 8);
  CHECK(defaults->decision_log_buffer == 1024);
  s.env["PASSEPARTOUT_NO_DECISION_LOG"] = "1";
  s.sources.command_line["decision-log-file-size"] = "16";
  s.sources.command_line["decision-log-files"] = "3";
  s.sources.command_line["decision-log-rotate"] = "3600";
  s.sources.command_line["decision-log-sample"] = "10";
  s.sources.command_line["decision-log-time-gates"] = "1";
  auto set = s.resolve();
  REQUIRE(set.has_value());
  CHECK_FALSE(set->decision_log);
  CHECK(set->decision_log_file_bytes == std::size_t{16} * 1024 * 1024);
  CHECK(set->decision_log_files == 3);
  CHECK(set->decision_log_rotate == std::chrono::hours(1));
  CHECK(set->decision_log_sample == 10);
  CHECK(set->decision_log_time_gates == 1);
  s.sources.command_line["decision-log-sample"] = "0";
  CHECK(error_of(s.resolve()) == "--decision-log-sample: '0' is not a sampling rate (1 in N) (1 to 1000000)");
}

TEST_CASE("the metrics port defaults to 9106, takes a port, 0 or off, and says when it was chosen",
          "[daemon][config]") {
  Sources s;
  SECTION("default") {
    auto config = s.resolve();
    REQUIRE(config.has_value());
    CHECK(config->metrics);
    CHECK(config->metrics_port == 9106);
    CHECK_FALSE(config->metrics_port_explicit);
  }
  SECTION("from the environment") {
    s.env["PASSEPARTOUT_METRICS_PORT"] = "0";
    auto config = s.resolve();
    REQUIRE(config.has_value());
    CHECK(config->metrics);
    CHECK(config->metrics_port == 0);
    CHECK(config->metrics_port_explicit);
  }
  SECTION("off on the command line") {
    s.sources.command_line["metrics-port"] = "OFF";
    auto config = s.resolve();
    REQUIRE(config.has_value());
    CHECK_FALSE(config->metrics);
  }
  SECTION("not a port") {
    s.sources.command_line["metrics-port"] = "70000";
    CHECK(error_of(s.resolve()) == "--metrics-port: '70000' is not a port number or off (0 to 65535)");
  }
}

TEST_CASE("offline is told apart when it was chosen from when nothing was configured", "[daemon][config]") {
  Sources s;
  auto by_default = s.resolve();
  REQUIRE(by_default.has_value());
  CHECK(by_default->offline_by_default);
  s.sources.command_line["provider"] = "offline";
  auto chosen = s.resolve();
  REQUIRE(chosen.has_value());
  CHECK(chosen->providers == std::vector<std::string>{"offline"});
  CHECK_FALSE(chosen->offline_by_default);
}

}  // namespace passepartout

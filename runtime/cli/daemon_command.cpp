// `passepartout daemon`: boots the runtime and serves the framed protocol.
#include "cli/cli11.hpp"

#include <deque>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/crash_context.hpp"
#include "base/log.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "daemon/daemon.hpp"
#include "daemon/daemon_config.hpp"

namespace passepartout::cli {
namespace {

// Exit statuses (cli/exit_status.hpp): kExitProblem when the daemon could not
// start (a listener, the state folder) or save memory; kExitUsage for a bad
// flag, config file, environment value or .env line.

// What the command line gave, kept until the command runs.
struct DaemonArgs {
  std::string config_file;
  // One entry per setting, in daemon_settings() order.
  std::vector<std::string> texts;
  std::vector<std::vector<std::string>> words;  // settings that take more than one word
  std::deque<bool> switches;                    // not vector<bool>: CLI11 binds to a bool&
  std::vector<CLI::Option*> options;
};

int fail_usage(const std::string& message) {
  std::cerr << "passepartout daemon: " << message << '\n';
  return kExitUsage;
}

int run_daemon(const DaemonArgs& args) {
  // .env first: it only fills what the environment leaves unset.
  if (auto loaded = load_env_file(default_env_file()); !loaded) return fail_usage(loaded.error().message);

  SettingSources sources;
  sources.config_file = args.config_file;
  sources.env = process_env;
  const auto settings = daemon_settings();
  for (std::size_t i = 0; i < settings.size(); ++i) {
    if (args.options[i]->count() == 0) continue;
    const std::string key(settings[i].key);
    std::string text = args.texts[i];
    if (settings[i].words > 1) {
      for (const std::string& word : args.words[i]) text += (text.empty() ? "" : " ") + word;
    }
    sources.command_line[key] = settings[i].is_switch() ? (args.switches[i] ? "true" : "false") : text;
  }
  auto config = resolve_daemon_config(sources);
  if (!config) {
    if (config.error().code == ErrorCode::invalid_input) return fail_usage(config.error().message);
    std::cerr << "passepartout daemon: " << config.error().message << '\n';
    return kExitUsage;
  }
  configure_logging(config->log_level, config->log_format);
  write_held_logs_on_fatal_signals();
  log_exit_in_skill_hooks();

  auto daemon = Daemon::start(std::move(*config));
  if (!daemon) {
    log_message(LogLevel::error, "daemon", "could not start: {}", daemon.error().message);
    std::cerr << "passepartout daemon: " << daemon.error().message << '\n';
    return daemon.error().code == ErrorCode::invalid_input ? kExitUsage : kExitProblem;
  }
  const int status = (*daemon)->serve();
  return status == 0 ? kExitOk : kExitProblem;
}

std::string option_help(const DaemonSetting& setting) {
  std::string help(setting.help);
  if (!setting.env.empty()) help += "\n[env " + std::string(setting.env) + "]";
  return help;
}

}  // namespace

void add_daemon_command(CLI::App& app, Runner& chosen) {
  auto args = std::make_shared<DaemonArgs>();
  const auto settings = daemon_settings();
  args->texts.resize(settings.size());
  args->switches.resize(settings.size(), false);
  args->words.resize(settings.size());

  auto* command = app.add_subcommand(
      "daemon",
      "Run the runtime headless: boot memory, skills and the model providers, then serve the framed\n"
      "protocol on a Unix socket and on loopback TCP until SIGTERM, SIGINT or an operator's :SHUTDOWN.");
  command
      ->add_option("--config", args->config_file,
                   "A YAML file of settings, keys named like the flags without '--' (port: 9105,\n"
                   "no-tcp: true, silent-actuators: [cli, emacs]); an unknown key is an error naming its line")
      ->type_name("FILE");
  for (std::size_t i = 0; i < settings.size(); ++i) {
    const DaemonSetting& setting = settings[i];
    const std::string flag = "--" + std::string(setting.key);
    CLI::Option* option = nullptr;
    if (setting.is_switch()) {
      option = command->add_flag(flag, args->switches[i], option_help(setting));
    } else if (setting.words > 1) {
      option = command->add_option(flag, args->words[i], option_help(setting))
                   ->expected(1, setting.words)
                   ->type_name(std::string(setting.value_name));
    } else {
      option =
          command->add_option(flag, args->texts[i], option_help(setting))->type_name(std::string(setting.value_name));
    }
    args->options.push_back(option);
  }
  command->footer(
      "Settings come from, highest precedence first: the command line; the --config file; the\n"
      "environment; ~/.config/passepartout/.env (KEY=value lines; $XDG_CONFIG_HOME/passepartout/.env when\n"
      "XDG_CONFIG_HOME is set), which only fills variables the environment does not set. Switches take\n"
      "true/false in the environment and the config file. Also read: PASSEPARTOUT_STATE_DIR,\n"
      "XDG_STATE_HOME and XDG_RUNTIME_DIR for the default folders; NOTIFY_SOCKET and WATCHDOG_USEC\n"
      "under systemd (Type=notify: READY=1 once serving, WATCHDOG=1 every half period, STOPPING=1).\n"
      "\n"
      "The state folder holds `token`, created mode 0600: an operator request over TCP must carry\n"
      ":AUTH \"<token>\"; on the Unix socket (mode 0600) none is needed.\n"
      "\n"
      "Signals: SIGTERM and SIGINT stop accepting, let requests in flight finish (--shutdown-grace),\n"
      "save memory and exit 0; SIGHUP rescans the manifest folder. A skill's hook still running\n"
      "when the grace ends is named in the log, memory is saved, and the daemon exits 1 at once.\n"
      "Exit status: 0 after a clean stop; 1 could not start, memory could not be saved, or a skill's\n"
      "hook did not return within the grace;\n"
      "2 a bad setting (flag, config file, environment or .env).");
  command->callback([args, &chosen] { chosen = [args] { return run_daemon(*args); }; });
}

}  // namespace passepartout::cli

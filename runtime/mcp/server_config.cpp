// Reading `mcp_servers:` and .mcp.json files. JSON is YAML, so one reader
// (yaml-cpp, with its line marks) serves both, and an error in either names
// the file, line and key.
#include "mcp/server_config.hpp"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <utility>

#include "base/byte_size.hpp"
#include "base/errno_text.hpp"
#include "base/yaml_diagnostics.hpp"
#include "base/yaml_scalars.hpp"
#include "providers/provider_config.hpp"

namespace passepartout::mcp {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kKeys[] = {
    "command", "args",    "env",          "cwd",    "writable",     "network",          "user",     "limits",
    "url",     "headers", "headers_file", "guards", "call_timeout", "max_result_bytes", "disabled", "type"};
constexpr std::string_view kLimitKeys[] = {"open_files", "memory", "cpu_seconds"};
// What other hosts' files carry and this host does not use: ignored there.
constexpr std::string_view kForeignKeys[] = {"envFile",      "autoApprove",   "alwaysAllow", "timeout",
                                             "description",  "transportType", "trust",       "includeTools",
                                             "excludeTools", "oauth"};
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {{"cmd", "command"},
                                                                      {"arguments", "args"},
                                                                      {"environment", "env"},
                                                                      {"endpoint", "url"},
                                                                      {"timeout", "call_timeout"}};

bool valid_server_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxServerName || name.find("__") != std::string_view::npos) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// ${env:NAME}, ${NAME} and ${NAME:-default} in `text`; the error names the variable.
Result<std::string> expand(std::string_view text, const EnvLookup& env, bool* used_env = nullptr) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t open = text.find("${", i);
    if (open == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, open - i));
    const std::size_t close = text.find('}', open);
    if (close == std::string_view::npos) return fail(ErrorCode::invalid_input, "an unclosed ${ in " + in_quotes(text));
    std::string_view inner = text.substr(open + 2, close - open - 2);
    if (inner.starts_with("env:")) inner.remove_prefix(4);
    std::optional<std::string> fallback;
    if (const std::size_t dash = inner.find(":-"); dash != std::string_view::npos) {
      fallback = std::string(inner.substr(dash + 2));
      inner = inner.substr(0, dash);
    }
    if (inner.empty()) return fail(ErrorCode::invalid_input, "an empty ${} in " + in_quotes(text));
    std::optional<std::string> value = env(inner);
    if (!value && !fallback) {
      return fail(ErrorCode::invalid_input, "${" + std::string(inner) + "} is not set in the environment");
    }
    out += value ? *value : *fallback;
    if (used_env != nullptr) *used_env = true;
    i = close + 1;
  }
  return out;
}

// "Name: value" lines of an owner-only file.
Result<std::vector<std::pair<std::string, std::string>>> read_headers_file(const fs::path& file) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    return fail(ErrorCode::io_error, file.string() + " cannot be read (" + errno_text(errno) + ")");
  }
  if ((info.st_mode & 077U) != 0) {
    return fail(ErrorCode::refused,
                file.string() + " can be read by others than its owner; run chmod 600 " + file.string());
  }
  std::ifstream in(file);
  if (!in) return fail(ErrorCode::io_error, file.string() + " cannot be read (" + errno_text(errno) + ")");
  std::vector<std::pair<std::string, std::string>> headers;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    const std::size_t colon = line.find(':');
    const std::string name = line.substr(0, colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || name.empty() || !std::all_of(name.begin(), name.end(), is_token_char)) {
      return fail(ErrorCode::invalid_input,
                  file.string() + ":" + std::to_string(number) + ": expected a header line \"Name: value\"");
    }
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    headers.emplace_back(name, value);
  }
  return headers;
}

// Reads one entry into `c`; every problem goes to `problems`, located.
class EntryReader {
 public:
  EntryReader(YamlProblems& problems, const EnvLookup& env, fs::path base, bool foreign)
      : problems_(problems), env_(env), base_(std::move(base)), foreign_(foreign) {}

  std::optional<McpServerConfig> read(const YAML::Node& name_node, const YAML::Node& entry) {
    McpServerConfig c;
    c.name = name_node.IsScalar() ? name_node.Scalar() : std::string();
    c.where = located(problems_.origin(), name_node.Mark(), "").substr(0);
    if (c.where.size() >= 2) c.where.resize(c.where.size() - 2);  // located() ends "...:col: "
    const std::size_t before = problems_.count();
    if (!valid_server_name(c.name)) {
      problems_.problem(name_node.Mark(),
                        "mcp server " + in_quotes(c.name) + ": a name is 1 to 24 of A-Z a-z 0-9 _ - (without \"__\")");
    }
    if (!entry.IsMap()) {
      problems_.problem(entry.Mark(), "mcp server '" + c.name +
                                          "' must be a map such as {command: npx, args: [...]} or {url: https://...}");
      return std::nullopt;
    }
    what_ = " of mcp server '" + c.name + "'";
    std::string type;
    bool literal_header = false;
    YAML::Node headers_key;
    for (const auto& field : entry) {
      const YAML::Node& key = field.first;
      const YAML::Node& value = field.second;
      const std::string name = key.IsScalar() ? key.Scalar() : std::string("?");
      if (std::find(std::begin(kKeys), std::end(kKeys), name) == std::end(kKeys)) {
        if (foreign_ && (std::find(std::begin(kForeignKeys), std::end(kForeignKeys), name) != std::end(kForeignKeys)))
          continue;
        problems_.problem(key.Mark(), unknown_key_message(name, kKeys, what_, kAliases));
        continue;
      }
      if (name == "command") {
        if (auto text = string_of(key, value, name)) c.command = *text;
      } else if (name == "args") {
        c.args = strings_of(key, value, name);
      } else if (name == "env") {
        c.env = map_of(key, value, name, nullptr);
      } else if (name == "cwd") {
        if (auto text = string_of(key, value, name)) c.cwd = path_of(*text).string();
      } else if (name == "writable") {
        for (const std::string& path : strings_of(key, value, name)) c.writable.push_back(path_of(path));
      } else if (name == "network") {
        if (auto flag = bool_of(key, value, name)) c.network = *flag;
      } else if (name == "user") {
        if (auto text = string_of(key, value, name)) c.user = *text;
      } else if (name == "limits") {
        read_limits(key, value, c);
      } else if (name == "url") {
        if (auto text = string_of(key, value, name)) c.url = *text;
      } else if (name == "headers") {
        headers_key = key;
        for (auto& [header, text] : map_of(key, value, name, &literal_header)) {
          if (!std::all_of(header.begin(), header.end(), is_token_char) || header.empty()) {
            problems_.problem(key.Mark(), "headers" + what_ + ": " + in_quotes(header) + " is not a header name");
            continue;
          }
          c.headers.emplace_back(header, text);
        }
      } else if (name == "headers_file") {
        if (auto text = string_of(key, value, name)) {
          auto read = read_headers_file(path_of(*text));
          if (!read) {
            problems_.problem(value.Mark(), "headers_file" + what_ + ": " + read.error().message);
          } else {
            for (auto& header : *read) c.headers.push_back(std::move(header));
          }
        }
      } else if (name == "guards") {
        c.guards = strings_of(key, value, name);
        if (c.guards.empty()) {
          problems_.problem_at(key, value,
                               "guards" + what_ + ": name at least one skill (tool-permissions by default)");
        }
      } else if (name == "call_timeout") {
        if (auto text = string_of(key, value, name)) {
          auto duration = parse_duration(*text);
          if (!duration || duration->count() == 0) {
            problems_.problem(value.Mark(), "call_timeout" + what_ + ": " + in_quotes(*text) +
                                                " is not a duration (e.g. 30, 30s, 500ms; more than zero)");
          } else {
            c.call_timeout = *duration;
          }
        }
      } else if (name == "max_result_bytes") {
        if (auto text = string_of(key, value, name)) {
          std::size_t n = 0;
          const std::string_view digits = *text;
          const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
          if (error != std::errc() || end != digits.data() + digits.size() || n < 256 || n > (std::size_t{16} << 20)) {
            problems_.problem(value.Mark(), "max_result_bytes" + what_ + ": " + in_quotes(*text) +
                                                " is not a number of bytes (256 to 16777216)");
          } else {
            c.max_result_bytes = n;
          }
        }
      } else if (name == "disabled") {
        if (auto flag = bool_of(key, value, name)) c.disabled = *flag;
      } else if (name == "type") {
        if (auto text = string_of(key, value, name)) type = *text;
      }
    }
    if (!type.empty() && type != "stdio" && type != "http" && type != "streamable-http" && type != "streamableHttp") {
      problems_.problem(entry.Mark(), "type" + what_ + ": " + in_quotes(type) +
                                          (type == "sse" ? " (the old HTTP+SSE transport) is not spoken here; the "
                                                           "server's Streamable HTTP endpoint is (type: http)"
                                                         : " is not stdio or http"));
    }
    if (c.command.empty() == c.url.empty()) {
      problems_.problem(entry.Mark(), "mcp server '" + c.name +
                                          "': give either command: (a program run over stdio) "
                                          "or url: (a Streamable HTTP endpoint)");
    }
    c.kind = c.url.empty() ? McpServerConfig::Kind::stdio : McpServerConfig::Kind::http;
    if (!c.url.empty() && !c.url.starts_with("http://") && !c.url.starts_with("https://")) {
      problems_.problem(entry.Mark(), "url" + what_ + ": " + in_quotes(c.url) + " is not an http:// or https:// URL");
    }
    if (literal_header && !owner_only()) {
      problems_.problem(headers_key.Mark(),
                        "headers" + what_ +
                            ": a header's value is never written in the config file; take it from the "
                            "environment (\"Bearer ${env:TOKEN}\") or from headers_file: (an owner-only file)");
    }
    if (problems_.count() != before) return std::nullopt;
    return c;
  }

 private:
  void read_limits(const YAML::Node& key, const YAML::Node& value, McpServerConfig& c) {
    if (!value.IsMap()) {
      problems_.problem_at(key, value, "limits" + what_ + ": expected a map such as {open_files: 1024, memory: 2GiB}");
      return;
    }
    for (const auto& item : value) {
      const std::string name = item.first.IsScalar() ? item.first.Scalar() : std::string("?");
      if (std::find(std::begin(kLimitKeys), std::end(kLimitKeys), name) == std::end(kLimitKeys)) {
        problems_.problem(item.first.Mark(), unknown_key_message(name, kLimitKeys, " of limits" + what_, {}));
        continue;
      }
      auto text = string_of(item.first, item.second, "limits." + name);
      if (!text) continue;
      std::uint64_t number = 0;
      bool ok = false;
      if (name == "memory") {
        auto bytes = parse_size(*text);
        ok = bytes && *bytes >= (std::uint64_t{16} << 20);
        if (ok) number = *bytes;
      } else {
        const std::string_view digits = *text;
        const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
        ok = error == std::errc() && end == digits.data() + digits.size() && number > 0 && number <= (1U << 30);
      }
      if (!ok) {
        problems_.problem(item.second.Mark(), "limits." + name + what_ + ": " + in_quotes(*text) +
                                                  (name == "memory" ? " is not a size of at least 16MiB (such as 2GiB)"
                                                                    : " is not a positive whole number"));
        continue;
      }
      if (name == "open_files") c.open_files = number;
      if (name == "memory") c.memory_bytes = number;
      if (name == "cpu_seconds") c.cpu_seconds = number;
    }
  }

  bool owner_only() const {
    if (!foreign_) return false;  // the daemon's own config says where secrets come from
    struct stat info {};
    return ::stat(problems_.origin().c_str(), &info) == 0 && (info.st_mode & 077U) == 0;
  }

  fs::path path_of(const std::string& text) const {
    fs::path path = text;
    if (text.starts_with("~/")) {
      if (auto home = env_("HOME")) path = fs::path(*home) / text.substr(2);
    }
    if (path.is_relative()) path = base_ / path;
    return path.lexically_normal();
  }

  std::optional<std::string> string_of(const YAML::Node& key, const YAML::Node& value, const std::string& name,
                                       bool* used_env = nullptr) {
    if (!value.IsScalar()) {
      problems_.problem_at(key, value, name + what_ + ": expected a single value");
      return std::nullopt;
    }
    auto expanded = expand(value.Scalar(), env_, used_env);
    if (!expanded) {
      problems_.problem(value.Mark(), name + what_ + ": " + expanded.error().message);
      return std::nullopt;
    }
    return std::move(*expanded);
  }

  std::vector<std::string> strings_of(const YAML::Node& key, const YAML::Node& value, const std::string& name) {
    std::vector<std::string> out;
    if (!value.IsSequence()) {
      problems_.problem_at(key, value, name + what_ + ": expected a list such as [a, b]");
      return out;
    }
    for (const auto& item : value) {
      if (auto text = string_of(key, item, name)) out.push_back(std::move(*text));
    }
    return out;
  }

  // A map of strings; `literal` is set when a value took nothing from the environment.
  std::vector<std::pair<std::string, std::string>> map_of(const YAML::Node& key, const YAML::Node& value,
                                                          const std::string& name, bool* literal) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!value.IsMap()) {
      problems_.problem_at(key, value, name + what_ + ": expected a map such as {NAME: value}");
      return out;
    }
    for (const auto& item : value) {
      const std::string item_name = item.first.IsScalar() ? item.first.Scalar() : std::string("?");
      bool used_env = false;
      if (auto text = string_of(item.first, item.second, std::string(name).append(".").append(item_name), &used_env)) {
        if (literal != nullptr && !used_env) *literal = true;
        out.emplace_back(item_name, std::move(*text));
      }
    }
    return out;
  }

  std::optional<bool> bool_of(const YAML::Node& key, const YAML::Node& value, const std::string& name) {
    const std::optional<bool> flag = value.IsScalar() ? core_bool(value.Scalar()) : std::nullopt;
    if (!flag) problems_.problem_at(key, value, name + what_ + ": expected true or false");
    return flag;
  }

  YamlProblems& problems_;
  const EnvLookup& env_;
  fs::path base_;
  bool foreign_;
  std::string what_;
};

}  // namespace

bool McpServerConfig::same_as(const McpServerConfig& other) const {
  return kind == other.kind && command == other.command && args == other.args && env == other.env && cwd == other.cwd &&
         writable == other.writable && network == other.network && user == other.user &&
         open_files == other.open_files && memory_bytes == other.memory_bytes && cpu_seconds == other.cpu_seconds &&
         url == other.url && headers == other.headers && guards == other.guards && call_timeout == other.call_timeout &&
         max_result_bytes == other.max_result_bytes && disabled == other.disabled;
}

void read_mcp_servers(const YAML::Node& servers, YamlProblems& problems, const EnvLookup& env, const fs::path& base,
                      std::vector<McpServerConfig>& out) {
  if (servers.IsNull()) return;
  if (!servers.IsMap()) {
    problems.problem(servers.Mark(), "mcp_servers: expected a map of server names to their entries");
    return;
  }
  EntryReader reader(problems, env, base, false);
  for (const auto& entry : servers) {
    auto config = reader.read(entry.first, entry.second);
    if (!config) continue;
    const bool repeated =
        std::any_of(out.begin(), out.end(), [&](const McpServerConfig& c) { return c.name == config->name; });
    if (repeated) {
      problems.problem(entry.first.Mark(), "mcp server '" + config->name + "' is declared twice");
      continue;
    }
    out.push_back(std::move(*config));
  }
}

Result<std::vector<McpServerConfig>> read_mcp_json(const fs::path& file, const EnvLookup& env) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail(ErrorCode::io_error, file.string() + ": cannot be read (" + errno_text(errno) + ")");
  std::stringstream text;
  text << in.rdbuf();
  const std::string origin = file.string();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::invalid_input, located(origin, e.mark, e.msg));
  }
  if (!root.IsMap()) {
    return fail(ErrorCode::invalid_input,
                located(origin, root.Mark(), R"(expected a JSON object with "mcpServers" (or VS Code's "servers"))"));
  }
  YAML::Node servers = root["mcpServers"];
  if (!servers.IsDefined()) servers = root["servers"];
  if (!servers.IsDefined() || !servers.IsMap()) {
    return fail(ErrorCode::invalid_input,
                located(origin, root.Mark(), R"(no "mcpServers" (or VS Code's "servers") object of servers)"));
  }
  YamlProblems problems(origin);
  std::vector<McpServerConfig> out;
  EntryReader reader(problems, env, file.parent_path(), true);
  for (const auto& entry : servers) {
    if (auto config = reader.read(entry.first, entry.second)) out.push_back(std::move(*config));
  }
  if (!problems.ok()) return fail(ErrorCode::invalid_input, problems.message());
  return out;
}

}  // namespace passepartout::mcp

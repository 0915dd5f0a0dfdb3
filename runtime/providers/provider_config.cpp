#include "providers/provider_config.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include <fmt/format.h>

#include "base/ascii.hpp"
#include "base/errno_text.hpp"
#include "base/file_io.hpp"

namespace passepartout {
namespace {

using std::chrono::milliseconds;

// One row of the seed's provider table (D6).
struct Preset {
  std::string_view name;
  std::string_view kind;
  std::string_view base_url;
  std::string_view base_url_env;  // the official SDK's variable overriding base_url; empty: none
  std::string_view key_env;       // empty: no key needed
  std::string_view model;
  std::int64_t context_window;
};

constexpr Preset kPresets[] = {
    {"ollama", "ollama", "http://localhost:11434", "", "", "llama3", 8192},
    {"openrouter", "openai", "https://openrouter.ai/api/v1", "", "OPENROUTER_API_KEY", "openrouter/auto", 128000},
    {"openai", "openai", "https://api.openai.com/v1", "OPENAI_BASE_URL", "OPENAI_API_KEY", "gpt-4o-mini", 128000},
    {"anthropic", "anthropic", "https://api.anthropic.com", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
     "claude-3-5-sonnet-20241022", 200000},
    {"groq", "openai", "https://api.groq.com/openai/v1", "", "GROQ_API_KEY", "llama-3.1-70b-versatile", 128000},
    {"gemini", "openai", "https://generativelanguage.googleapis.com/v1beta/openai", "", "GEMINI_API_KEY",
     "gemini-2.0-flash", 1000000},
};

std::string without_trailing_slashes(std::string url) {
  while (url.size() > 1 && url.back() == '/') url.pop_back();
  return url;
}

// OLLAMA_HOST as the ollama CLI takes it: "host", "host:port" or a URL.
std::string ollama_url(std::string_view host) {
  std::string url(host);
  if (url.find("://") == std::string::npos) url = "http://" + url;
  const std::size_t authority = url.find("://") + 3;
  const std::size_t path = url.find('/', authority);
  const std::string_view hostport =
      std::string_view(url).substr(authority, path == std::string::npos ? std::string::npos : path - authority);
  // A port unless the host ends in one (an IPv6 literal ends in ']').
  const std::size_t colon = hostport.rfind(':');
  const bool has_port = colon != std::string_view::npos && hostport.find(']', colon) == std::string_view::npos;
  if (!has_port) url.insert(path == std::string::npos ? url.size() : path, ":11434");
  return without_trailing_slashes(url);
}

}  // namespace

std::vector<ProviderConfig> preset_providers(const EnvLookup& env) {
  std::vector<ProviderConfig> presets;
  for (const Preset& p : kPresets) {
    ProviderConfig c;
    c.name = p.name;
    c.kind = p.kind;
    c.base_url = p.base_url;
    if (!p.base_url_env.empty()) {
      if (auto url = env(p.base_url_env)) c.base_url = without_trailing_slashes(*url);
    }
    if (p.name == "ollama") {
      if (auto host = env("OLLAMA_HOST")) c.base_url = ollama_url(*host);
    }
    c.model = p.model;
    c.context_window = p.context_window;
    c.origin = "preset";
    if (!p.key_env.empty()) {
      if (auto key = env(p.key_env)) {
        c.api_key = *key;
        c.key_source = p.key_env;
      } else {
        c.unusable = std::string(p.key_env) + " is not set";
      }
    }
    if (p.name == "openrouter") c.headers = {{"HTTP-Referer", "http://localhost"}, {"X-Title", "Passepartout"}};
    presets.push_back(std::move(c));
  }
  return presets;
}

std::vector<ProviderConfig> merge_providers(std::vector<ProviderConfig> presets, std::vector<ProviderConfig> declared) {
  std::vector<ProviderConfig> merged = std::move(presets);
  for (ProviderConfig& d : declared) {
    auto same = std::find_if(merged.begin(), merged.end(), [&](const ProviderConfig& p) { return p.name == d.name; });
    if (same != merged.end()) {
      *same = std::move(d);
    } else {
      merged.push_back(std::move(d));
    }
  }
  return merged;
}

std::vector<std::string> split_cascade(std::string_view text) {
  std::vector<std::string> names;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty() && item.front() == ':') item.remove_prefix(1);  // the seed's keywords: :OPENAI
    std::string name = ascii_lower(item);
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return names;
}

Result<CascadeSelection> select_cascade(const std::vector<ProviderConfig>& all,
                                        const std::optional<CascadeOrder>& order, bool ollama_host_set) {
  CascadeSelection selection;
  if (order) {
    for (const std::string& name : order->names) {
      auto found = std::find_if(all.begin(), all.end(), [&](const ProviderConfig& p) { return p.name == name; });
      if (found == all.end()) {
        std::string known;
        for (const ProviderConfig& p : all) {
          if (!known.empty()) known += ", ";
          known += p.name;
        }
        return fail(ErrorCode::invalid_input,
                    fmt::format("{}: names an unknown provider '{}' (known: {})", order->where, name, known));
      }
      if (found->usable()) {
        selection.providers.push_back(*found);
      } else {
        selection.skipped.push_back(found->name + ": " + found->unusable);
      }
    }
    return selection;
  }
  // Declared ones first, as the operator wrote them; then the presets with a key.
  for (const ProviderConfig& p : all) {
    if (p.origin != "preset" && p.usable()) selection.providers.push_back(p);
  }
  for (const ProviderConfig& p : all) {
    if (p.origin != "preset" || !p.usable()) continue;
    if (p.name == "ollama" && !ollama_host_set) continue;
    selection.providers.push_back(p);
  }
  return selection;
}

std::optional<milliseconds> parse_duration(std::string_view text) {
  double scale = 1000.0;  // seconds by default
  if (text.ends_with("ms")) {
    scale = 1.0;
    text.remove_suffix(2);
  } else if (text.ends_with("s")) {
    text.remove_suffix(1);
  } else if (text.ends_with("m")) {
    scale = 60'000.0;
    text.remove_suffix(1);
  }
  double n = -1;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, n);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(n) || n < 0) return std::nullopt;
  const double ms = n * scale;
  if (ms > 24.0 * 3600 * 1000) return std::nullopt;
  return milliseconds(static_cast<std::int64_t>(std::llround(ms)));
}

Result<std::string> read_key_file(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    return fail(ErrorCode::not_found, "key file " + file + ": " + errno_text(errno));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return fail(ErrorCode::refused,
                "key file " + file + ": readable by others than its owner; run 'chmod 600 " + file + "'");
  }
  auto text = read_bounded_file(file, std::size_t{64} * 1024);
  if (!text) return fail(text.error().code, "key file " + file + ": " + text.error().message);
  std::string key = std::move(*text);
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ' || key.back() == '\t')) {
    key.pop_back();
  }
  std::size_t start = 0;
  while (start < key.size() && (key[start] == ' ' || key[start] == '\t')) ++start;
  key.erase(0, start);
  if (key.empty()) return fail(ErrorCode::invalid_input, "key file " + file + ": is empty");
  if (key.find_first_of("\r\n") != std::string::npos) {
    return fail(ErrorCode::invalid_input, "key file " + file + ": holds more than one line");
  }
  return key;
}

}  // namespace passepartout

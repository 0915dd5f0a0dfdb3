// model-router: the model selector of the seeds (D3) as a skill. For each
// provider of a model call it answers the model to use, the provider's
// default, or skip — from ordered routes, first match wins — and before any
// route it keeps private prompts on this machine: a prompt that mentions a
// privacy tag, carries one in the signal's :TAGS, or matches a private
// pattern goes to local providers only, and its session stays local-only
// (the host keeps that, whatever is loaded later).
//
// Stateless after construction: select_model runs on any thread, concurrently.
#include <passepartout/name_pattern.hpp>
#include <passepartout/skill.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pattern_table.hpp"
#include "skill_config.hpp"
#include "skill_text.hpp"

namespace {

using passepartout::ModelSelection;
using passepartout::ValueRef;
using passepartout::bundled::boolean;
using passepartout::bundled::decimal;
using passepartout::bundled::is_named;
using passepartout::bundled::lower;
using passepartout::bundled::PatternSpec;
using passepartout::bundled::PatternTable;
using passepartout::bundled::string_list;

// One route: when every condition it states holds, it decides for every provider.
struct Route {
  std::string name;
  // Conditions (absent: any).
  std::vector<std::string> sensors;  // upper-case sensor names, as keywords print
  std::optional<std::int64_t> min_prompt_tokens;
  std::optional<std::int64_t> max_prompt_tokens;
  std::optional<bool> tools;               // tools offered, or none
  std::vector<std::string> client_models;  // globs the client's :META :MODEL must match
  // Outcomes, per provider (names lower-case).
  std::vector<std::pair<std::string, std::string>> models;  // provider -> model
  std::vector<std::string> skip;                            // these providers are not called
  std::vector<std::string> only;                            // when set: every other provider is skipped
};

bool contains(const std::vector<std::string>& names, std::string_view name) {
  for (const std::string& n : names) {
    if (n == name) return true;
  }
  return false;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string where(std::size_t index, std::string_view key) {
  return "config routes[" + decimal(index) + "]." + std::string(key);
}

std::optional<std::int64_t> tokens(const ValueRef& route, std::size_t index, std::string_view key,
                                   std::string_view name) {
  const ValueRef value = route.get(key);
  if (value.is_nil()) return std::nullopt;
  if (!value.is_integer() || value.as_integer() < 0) {
    throw std::invalid_argument(where(index, name) + ": expected a number of tokens, got " + value.print());
  }
  return value.as_integer();
}

// A list of names at `key` of a route, lower-cased (providers) or upper-cased (sensors).
std::vector<std::string> names(const ValueRef& route, std::size_t index, std::string_view key, std::string_view name,
                               bool upper_case) {
  std::vector<std::string> out = string_list(route, key, where(index, name), {});
  for (std::string& n : out) n = upper_case ? upper(n) : lower(n);
  return out;
}

Route read_route(const ValueRef& value, std::size_t index) {
  if (!value.is_list()) {
    throw std::invalid_argument("config routes[" + decimal(index) +
                                "]: expected a map such as {name: small, sensor: [tool-output], models: {ollama: "
                                "llama3.2:1b}}, got " +
                                value.print());
  }
  static constexpr std::string_view kKeys[] = {
      "NAME", "SENSOR", "MIN_PROMPT_TOKENS", "MAX_PROMPT_TOKENS", "TOOLS", "CLIENT_MODEL", "MODELS", "SKIP", "ONLY"};
  for (std::size_t i = 0; i + 1 < value.size(); i += 2) {
    const ValueRef key = value[i];
    bool known = false;
    for (std::string_view k : kKeys) known = known || key.is_keyword(k);
    if (!known) {
      throw std::invalid_argument(where(index, lower(key.text())) +
                                  ": not a route key (name, sensor, min_prompt_tokens, max_prompt_tokens, tools, "
                                  "client_model, models, skip, only)");
    }
  }
  Route route;
  const ValueRef name = value.get("NAME");
  route.name = name.is_string() ? std::string(name.text()) : "routes[" + decimal(index) + "]";
  route.sensors = names(value, index, "SENSOR", "sensor", true);
  route.min_prompt_tokens = tokens(value, index, "MIN_PROMPT_TOKENS", "min_prompt_tokens");
  route.max_prompt_tokens = tokens(value, index, "MAX_PROMPT_TOKENS", "max_prompt_tokens");
  if (value.has("TOOLS")) route.tools = boolean(value, "TOOLS", where(index, "tools"), false);
  route.client_models = string_list(value, "CLIENT_MODEL", where(index, "client_model"), {});
  const ValueRef models = value.get("MODELS");
  if (!models.is_nil()) {
    if (!models.is_list() || models.size() % 2 != 0) {
      throw std::invalid_argument(where(index, "models") + ": expected a map of provider: model, got " +
                                  models.print());
    }
    for (std::size_t i = 0; i + 1 < models.size(); i += 2) {
      const ValueRef model = models[i + 1];
      if (!model.is_string() || model.text().empty()) {
        throw std::invalid_argument(where(index, "models." + lower(models[i].text())) +
                                    ": expected a model's name, got " + model.print());
      }
      route.models.emplace_back(lower(models[i].text()), std::string(model.text()));
    }
  }
  route.skip = names(value, index, "SKIP", "skip", false);
  route.only = names(value, index, "ONLY", "only", false);
  return route;
}

std::vector<Route> read_routes(const ValueRef& config) {
  std::vector<Route> routes;
  const ValueRef list = config.get("ROUTES");
  if (list.is_nil()) return routes;
  if (!list.is_list()) throw std::invalid_argument("config routes: expected a list of routes, got " + list.print());
  for (std::size_t i = 0; i < list.size(); ++i) routes.push_back(read_route(list[i], i));
  return routes;
}

// The privacy tags as case-insensitive literals, then the private patterns (RE2).
std::vector<PatternSpec> private_specs(const std::vector<std::string>& tags, const std::vector<std::string>& patterns) {
  std::vector<PatternSpec> specs;
  specs.reserve(tags.size() + patterns.size());
  for (const std::string& tag : tags) specs.push_back({"the privacy tag " + tag, "(?i)" + RE2::QuoteMeta(tag)});
  for (const std::string& pattern : patterns) specs.push_back({"the private pattern '" + pattern + "'", pattern});
  return specs;
}

class ModelRouter final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "model-router";
  static constexpr const char kVersion[] = "1.0.0";
  static constexpr passepartout::ConfigKeySpec kConfig[] = {
      {"privacy_tags", "list", "[\"@personal\"]",
       "A prompt or :TAGS mentioning one (ignoring case) goes to local providers only"},
      {"private_patterns", "list", "[]", "RE2 patterns: a prompt matching one goes to local providers only"},
      {"routes", "list", "[]", "Ordered routes, the first whose conditions hold decides"}};

  explicit ModelRouter(const ValueRef& config)
      : tags_(string_list(config, "PRIVACY_TAGS", "config privacy_tags", {"@personal"})),
        private_(private_specs(tags_, string_list(config, "PRIVATE_PATTERNS", "config private_patterns", {}))),
        routes_(read_routes(config)) {
    for (std::string& tag : tags_) tag = lower(tag);
  }

  ModelSelection select_model(const ValueRef& provider, const ValueRef& request) override {
    const std::string name = lower(provider.get("NAME").text());
    const bool local = provider.get("LOCAL").is_t();
    if (const std::string why = private_reason(request); !why.empty()) {
      // Private: the host keeps the session on local providers from now on.
      const std::string reason = "private data (" + why + ")";
      return (local ? routed(name, request) : ModelSelection::skip(reason)).local_only(reason);
    }
    return routed(name, request);
  }

 private:
  // Why the request is private ("the privacy tag @personal"), or "".
  std::string private_reason(const ValueRef& request) const {
    if (private_.size() != 0) {
      for (const char* key : {"PROMPT", "SYSTEM"}) {
        const std::string_view found = private_.first_match(request.get(key).text());
        if (!found.empty()) return std::string(found);
      }
    }
    const ValueRef tags = request.get("SIGNAL").get("PAYLOAD").get("TAGS");
    for (const ValueRef& entry : tags) {
      const std::string tag = lower(entry.text());
      for (const std::string& privacy : tags_) {
        if (!tag.empty() && tag.find(privacy) != std::string::npos) return "a :TAGS entry with " + privacy;
      }
    }
    return {};
  }

  static bool holds(const Route& route, const ValueRef& request) {
    if (!route.sensors.empty()) {
      const ValueRef sensor = request.get("SENSOR");
      bool any = false;
      for (const std::string& s : route.sensors) any = any || is_named(sensor, s);
      if (!any) return false;
    }
    const std::int64_t prompt_tokens = request.get("PROMPT-TOKENS").as_integer();
    if (route.min_prompt_tokens && prompt_tokens < *route.min_prompt_tokens) return false;
    if (route.max_prompt_tokens && prompt_tokens > *route.max_prompt_tokens) return false;
    if (route.tools && (request.get("TOOLS").as_integer() > 0) != *route.tools) return false;
    if (!route.client_models.empty()) {
      const ValueRef asked = request.get("MODEL");
      if (!asked.is_string()) return false;
      bool any = false;
      for (const std::string& glob : route.client_models) any = any || passepartout::name_matches(glob, asked.text());
      if (!any) return false;
    }
    return true;
  }

  ModelSelection routed(const std::string& provider, const ValueRef& request) const {
    for (const Route& route : routes_) {
      if (!holds(route, request)) continue;
      if (contains(route.skip, provider) || (!route.only.empty() && !contains(route.only, provider))) {
        return ModelSelection::skip("route " + route.name);
      }
      for (const auto& [who, model] : route.models) {
        if (who == provider) return ModelSelection::use(model);
      }
      if (!route.client_models.empty()) return ModelSelection::use(std::string(request.get("MODEL").text()));
      return ModelSelection::provider_default();
    }
    return ModelSelection::provider_default();
  }

  std::vector<std::string> tags_;  // lower-case, for :TAGS
  PatternTable private_;           // the tags as literals, then the private patterns
  std::vector<Route> routes_;
};

}  // namespace

PASSEPARTOUT_SKILL(ModelRouter);

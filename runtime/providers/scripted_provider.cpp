// The scripted provider: YAML rules read through yaml-cpp (whose exceptions
// stop here), patterns compiled with RE2, answers given inline or from the executor.
#include "providers/scripted_provider.hpp"

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <system_error>
#include <utility>

#include "base/file_io.hpp"
#include "base/utf8.hpp"
#include "base/yaml_diagnostics.hpp"
#include "base/yaml_scalars.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTopKeys[] = {"rules"};
constexpr std::string_view kRuleKeys[] = {"match", "reply", "delay_ms", "fail", "stream", "tool_call"};
constexpr std::string_view kToolCallKeys[] = {"name", "arguments"};
constexpr std::string_view kNoMatch = "no scripted rule matches";

// Bounds on tool_call arguments; YAML aliases count each time they are used,
// so a small file cannot expand into a huge Value.
constexpr std::size_t kMaxArgumentValues = 10000;
constexpr int kMaxArgumentDepth = 32;

std::string describe(const YAML::Node& node) {
  if (node.IsScalar()) return in_quotes(node.Scalar());
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  return "an empty value";
}

bool is_null(const YAML::Node& node) { return !node.IsDefined() || node.IsNull(); }

// Reads one script, collecting every problem as a located line.
class ScriptReader : public YamlProblems {
 public:
  using YamlProblems::YamlProblems;

  void read(const YAML::Node& root, ScriptedScript& out);

 private:
  struct Entry {
    YAML::Node key;
    YAML::Node value;
  };
  // The entries of a map by key, reporting keys that are not names, unknown or repeated.
  std::map<std::string, Entry> entries(const YAML::Node& map, std::span<const std::string_view> known,
                                       std::string_view where);
  void read_rules(const YAML::Node& rules, ScriptedScript& out);
  std::optional<ScriptedRule> read_rule(const YAML::Node& node, std::size_t number);
  std::optional<std::string> text(const Entry& entry, std::string_view field, std::string_view example);
  std::optional<bool> boolean(const Entry& entry, std::string_view field);
  std::optional<Value> read_tool_call(const Entry& entry, std::string_view where);
  Value convert(const YAML::Node& node, const std::string& path, int depth);

  std::size_t argument_values_ = 0;
};

std::map<std::string, ScriptReader::Entry> ScriptReader::entries(const YAML::Node& map,
                                                                 std::span<const std::string_view> known,
                                                                 std::string_view where) {
  std::map<std::string, Entry> found;
  for (const auto& item : map) {
    const YAML::Node& key = item.first;
    if (!key.IsScalar()) {
      problem(key.Mark(), "keys" + std::string(where) + " must be names, found " + describe(key));
      continue;
    }
    const std::string& name = key.Scalar();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      problem(key.Mark(), unknown_key_message(name, known, where));
      continue;
    }
    if (auto [it, inserted] = found.emplace(name, Entry{key, item.second}); !inserted) {
      problem(key.Mark(), "duplicate key " + in_quotes(name) + std::string(where) + " (first given at line " +
                              std::to_string(it->second.key.Mark().line + 1) + "); keep one");
    }
  }
  return found;
}

void ScriptReader::read(const YAML::Node& root, ScriptedScript& out) {
  if (root.IsSequence()) {
    read_rules(root, out);
    return;
  }
  if (!root.IsMap()) {
    problem(root.Mark(),
            "a script must be a map such as 'rules: [{match: hello, reply: Hi}]', found " + describe(root));
    return;
  }
  auto top = entries(root, kTopKeys, "");
  auto rules = top.find("rules");
  if (rules == top.end()) {
    if (ok()) {
      problem(root.Mark(), "missing key 'rules': add a list of rules such as 'rules: [{match: hello, reply: Hi}]'");
    }
    return;
  }
  if (is_null(rules->second.value)) return;  // `rules:` with nothing: a script that never matches
  if (!rules->second.value.IsSequence()) {
    problem_at(rules->second.key, rules->second.value,
               "'rules' must be a list such as [{match: hello, reply: Hi}], found " + describe(rules->second.value));
    return;
  }
  read_rules(rules->second.value, out);
}

void ScriptReader::read_rules(const YAML::Node& rules, ScriptedScript& out) {
  std::size_t number = 0;
  for (const YAML::Node& node : rules) {
    if (auto rule = read_rule(node, ++number)) out.rules.push_back(std::move(*rule));
  }
}

std::optional<std::string> ScriptReader::text(const Entry& entry, std::string_view field, std::string_view example) {
  if (entry.value.IsScalar()) return entry.value.Scalar();
  problem_at(entry.key, entry.value,
             "'" + std::string(field) + "' must be text such as " + std::string(example) + ", found " +
                 describe(entry.value) + (is_null(entry.value) ? " (write '' for empty text)" : ""));
  return std::nullopt;
}

std::optional<bool> ScriptReader::boolean(const Entry& entry, std::string_view field) {
  if (entry.value.IsScalar()) {
    if (auto b = core_bool(entry.value.Scalar())) return b;
  }
  problem_at(entry.key, entry.value,
             "'" + std::string(field) + "' must be true or false, found " + describe(entry.value));
  return std::nullopt;
}

std::optional<ScriptedRule> ScriptReader::read_rule(const YAML::Node& node, std::size_t number) {
  const std::string where = " in rule " + std::to_string(number);
  if (!node.IsMap()) {
    problem(node.Mark(), "rule " + std::to_string(number) + " must be a map such as {match: hello, reply: Hi}, found " +
                             describe(node));
    return std::nullopt;
  }
  const std::size_t problems_before = count();
  auto fields = entries(node, kRuleKeys, where);
  auto field = [&](std::string_view name) -> const Entry* {
    auto it = fields.find(std::string(name));
    return it == fields.end() ? nullptr : &it->second;
  };

  ScriptedRule rule;
  rule.line = node.Mark().line + 1;

  if (const Entry* match = field("match")) {
    if (auto pattern = text(*match, "match", "'(?i)hello'")) {
      RE2::Options options;
      options.set_log_errors(false);
      auto regex = std::make_shared<const RE2>(*pattern, options);
      if (regex->ok()) {
        rule.plain_text = pattern->find_first_of("\\.^$|?*+()[]{}") == std::string::npos;
        rule.pattern = std::move(*pattern);
        rule.regex = std::move(regex);
      } else {
        problem(match->value.Mark(), "invalid regular expression " + in_quotes(*pattern) + ": " + regex->error() +
                                         "; 'match' takes RE2 syntax (quote it in single quotes so YAML keeps "
                                         "backslashes, and escape special characters such as ( [ . * with \\)");
      }
    }
  } else {
    problem(node.Mark(), "rule " + std::to_string(number) +
                             " has no 'match': add the regular expression to search in the prompt ('' matches "
                             "every prompt)");
  }

  const Entry* reply = field("reply");
  if (reply) {
    if (auto content = text(*reply, "reply", "'Hello!'")) rule.reply = std::move(*content);
  }
  if (const Entry* delay = field("delay_ms")) {
    const std::string digits = delay->value.IsScalar() ? delay->value.Scalar() : std::string();
    std::int64_t ms = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ms);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || ms < 0 ||
        ms > ScriptedScript::kMaxDelay.count()) {
      problem_at(delay->key, delay->value,
                 "'delay_ms' must be a whole number of milliseconds from 0 to " +
                     std::to_string(ScriptedScript::kMaxDelay.count()) + ", found " + describe(delay->value));
    } else {
      rule.delay = std::chrono::milliseconds(ms);
    }
  }
  if (const Entry* fail = field("fail")) rule.fail = boolean(*fail, "fail").value_or(false);
  if (const Entry* stream = field("stream")) rule.stream = boolean(*stream, "stream").value_or(false);
  const Entry* tool_call = field("tool_call");
  if (tool_call) {
    if (auto call = read_tool_call(*tool_call, where)) rule.tool_call = std::move(*call);
  }

  // What a rule answers with must be unambiguous.
  if (tool_call && reply) {
    problem(reply->key.Mark(),
            "rule " + std::to_string(number) + " has both 'reply' and 'tool_call'; a rule answers with one of them");
  } else if (tool_call && field("fail") && rule.fail) {
    problem(tool_call->key.Mark(), "rule " + std::to_string(number) +
                                       " has both 'fail: true' and 'tool_call'; a failing rule gives its message "
                                       "in 'reply'");
  } else if (tool_call && rule.stream) {
    problem(tool_call->key.Mark(),
            "rule " + std::to_string(number) + " streams a tool call; 'stream' applies to a text 'reply' only");
  } else if (rule.fail && rule.stream) {
    problem(field("stream")->key.Mark(),
            "rule " + std::to_string(number) + " both fails and streams; remove 'stream' or 'fail'");
  } else if (!tool_call && !reply && !rule.fail) {
    problem(node.Mark(), "rule " + std::to_string(number) +
                             " gives no answer: add 'reply' (the text to return), 'tool_call', or 'fail: true'");
  }
  if (count() != problems_before) return std::nullopt;
  return rule;
}

std::optional<Value> ScriptReader::read_tool_call(const Entry& entry, std::string_view where) {
  const std::string inside = " in 'tool_call'" + std::string(where);
  if (!entry.value.IsMap()) {
    problem_at(entry.key, entry.value,
               "'tool_call' must be a map such as {name: shell, arguments: {cmd: ls}}, found " + describe(entry.value));
    return std::nullopt;
  }
  auto fields = entries(entry.value, kToolCallKeys, inside);
  Value name;
  auto name_entry = fields.find("name");
  if (name_entry == fields.end()) {
    problem(entry.value.Mark(), "'tool_call' has no 'name': add the tool to call, such as 'name: shell'");
  } else if (!name_entry->second.value.IsScalar() || name_entry->second.value.Scalar().empty()) {
    problem_at(name_entry->second.key, name_entry->second.value,
               "'tool_call.name' must be a tool name such as shell, found " + describe(name_entry->second.value));
  } else {
    name = Value::string(name_entry->second.value.Scalar());
  }
  Value arguments;
  if (auto args = fields.find("arguments"); args != fields.end()) {
    const YAML::Node& value = args->second.value;
    if (value.IsMap()) {
      arguments = convert(value, "tool_call.arguments", 1);
    } else if (value.IsScalar()) {
      arguments = Value::string(value.Scalar());
    } else if (!is_null(value)) {
      problem(value.Mark(),
              "'tool_call.arguments' must be a map such as {cmd: ls}, or JSON text, found " + describe(value));
    }
  }
  if (name.is_nil()) return std::nullopt;
  return Value::plist({{"NAME", name}, {"ARGUMENTS", arguments}});
}

Value ScriptReader::convert(const YAML::Node& node, const std::string& path, int depth) {
  if (++argument_values_ > kMaxArgumentValues) {
    if (argument_values_ == kMaxArgumentValues + 1) {
      problem(node.Mark(), "'" + path + "' holds more than " + std::to_string(kMaxArgumentValues) +
                               " values (aliases count each time they are used)");
    }
    return Value::nil();
  }
  if (node.IsScalar()) {
    auto typed = type_scalar(node);
    if (!typed) {
      problem(node.Mark(), "'" + path + "': " + typed.error().message);
      return Value::nil();
    }
    return scalar_value<Value>(*typed);
  }
  if (!node.IsMap() && !node.IsSequence()) return Value::nil();
  if (depth > kMaxArgumentDepth) {
    problem(node.Mark(), "'" + path + "' nests deeper than " + std::to_string(kMaxArgumentDepth) + " levels");
    return Value::nil();
  }
  std::vector<Value> items;
  if (node.IsSequence()) {
    std::size_t index = 0;
    for (const YAML::Node& item : node) {
      items.push_back(convert(item, path + "[" + std::to_string(index++) + "]", depth + 1));
    }
    return Value::list(items);
  }
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar() || key.Scalar().empty()) {
      problem(key.Mark(), "keys in '" + path + "' must be names, found " + describe(key));
      continue;
    }
    items.push_back(Value::keyword(key.Scalar()));
    items.push_back(convert(entry.second, path + "." + key.Scalar(), depth + 1));
  }
  return Value::list(items);
}

Result<ScriptedScript> parse_document(std::string_view yaml, const std::string& where) {
  if (yaml.size() > ScriptedScript::kMaxFileSize) {
    return fail(ErrorCode::limit_exceeded, where + ":1:1: the script is " + std::to_string(yaml.size()) +
                                               " bytes, over the limit of " +
                                               std::to_string(ScriptedScript::kMaxFileSize) + "; split it up");
  }
  if (std::optional<std::size_t> bad = find_invalid_utf8(yaml)) {
    const std::string_view before = yaml.substr(0, *bad);
    const std::size_t line_start = before.rfind('\n');
    YAML::Mark mark;
    mark.line = static_cast<int>(std::count(before.begin(), before.end(), '\n'));
    mark.column = static_cast<int>(*bad - (line_start == std::string_view::npos ? 0 : line_start + 1));
    return fail(ErrorCode::invalid_input, located(where, mark, "the script is not valid UTF-8; save it as UTF-8"));
  }
  std::vector<YAML::Node> documents;
  for (YAML::Node& document : YAML::LoadAll(std::string(yaml))) {
    if (!document.IsNull()) documents.push_back(document);
  }
  if (documents.empty()) {
    return fail(ErrorCode::invalid_input,
                where + ":1:1: the script is empty; add rules such as 'rules: [{match: hello, reply: Hi}]'");
  }
  if (documents.size() > 1) {
    return fail(ErrorCode::invalid_input,
                located(where, documents[1].Mark(),
                        "a script holds one YAML document, found " + std::to_string(documents.size()) +
                            "; put all rules under one 'rules:'"));
  }
  ScriptReader reader(where);
  ScriptedScript script;
  reader.read(documents[0], script);
  if (!reader.ok()) return fail(ErrorCode::invalid_input, reader.message());
  return script;
}

// `text` cut into a few pieces at code-point boundaries, for streaming.
std::vector<std::string_view> chunks_of(std::string_view text) {
  constexpr std::size_t kChunks = 4;
  std::vector<std::string_view> chunks;
  const std::size_t size = std::max<std::size_t>(1, (text.size() + kChunks - 1) / kChunks);
  while (!text.empty()) {
    std::size_t cut = std::min(size, text.size());
    while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;
    chunks.push_back(text.substr(0, cut));
    text.remove_prefix(cut);
  }
  return chunks;
}

// Gives `rule`'s answer: streamed chunks first when asked for, then the completion.
void answer(const ScriptedRule& rule, const InlineFunction<void(std::string_view)>& on_chunk,
            const ProviderCompletion& done) {
  if (rule.fail) {
    done(ProviderReply::failed(rule.reply.empty() ? "scripted failure (rule at line " + std::to_string(rule.line) + ")"
                                                  : rule.reply));
    return;
  }
  if (!rule.tool_call.is_nil()) {
    done(ProviderReply::calls(Value::list({rule.tool_call})));
    return;
  }
  if (rule.stream && on_chunk) {
    try {
      for (std::string_view chunk : chunks_of(rule.reply)) on_chunk(chunk);
    } catch (const std::exception& e) {
      done(ProviderReply::failed(std::string("the chunk receiver threw: ") + e.what()));
      return;
    }
  }
  done(ProviderReply::text(rule.reply));
}

}  // namespace

Result<ScriptedScript> ScriptedScript::parse(std::string_view yaml, std::string_view origin) {
  const std::string where = origin.empty() ? std::string("<string>") : std::string(origin);
  try {
    return parse_document(yaml, where);
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::invalid_input, located(where, e.mark, "YAML syntax error: " + e.msg));
  } catch (const std::exception& e) {
    return fail(ErrorCode::failed, where + ": cannot parse the script: " + e.what());
  }
}

Result<ScriptedScript> ScriptedScript::load(const fs::path& file) {
  const std::string where = file.string();
  auto text = read_bounded_file(file, kMaxFileSize);
  if (!text && text.error().code == ErrorCode::limit_exceeded) {
    return fail(ErrorCode::limit_exceeded,
                where + ": the script is larger than " + std::to_string(kMaxFileSize) + " bytes; split it up");
  }
  if (!text) return fail(text.error().code, where + ": cannot read the script: " + text.error().message);
  return parse(*text, where);
}

ScriptedProvider::ScriptedProvider(ScriptedScript script, Executor* executor, std::string name)
    : script_(std::move(script)),
      executor_(executor),
      name_(std::move(name)),
      patterns_(std::make_unique<ShardPatterns[]>(kThreadShards)),
      hits_(std::make_unique<ShardedCounter[]>(script_.rules.size())) {}

ScriptedProvider::~ScriptedProvider() = default;

std::size_t ScriptedProvider::hits(std::size_t index) const noexcept {
  return index < script_.rules.size() ? static_cast<std::size_t>(hits_[index].sum()) : 0;
}

const std::vector<std::unique_ptr<const RE2>>& ScriptedProvider::patterns() {
  ShardPatterns& shard = patterns_[thread_shard()];
  std::call_once(shard.compiled, [&] {
    shard.regexes.reserve(script_.rules.size());
    for (const ScriptedRule& rule : script_.rules) {
      shard.regexes.push_back(std::make_unique<const RE2>(rule.regex->pattern(), rule.regex->options()));
    }
  });
  return shard.regexes;
}

void ScriptedProvider::complete(const ProviderRequest& request, ProviderCompletion done) {
  const std::vector<std::unique_ptr<const RE2>>& regexes = patterns();
  for (std::size_t i = 0; i < script_.rules.size(); ++i) {
    const ScriptedRule& rule = script_.rules[i];
    const bool matches = rule.plain_text ? request.prompt.find(rule.pattern) != std::string::npos
                                         : RE2::PartialMatch(request.prompt, *regexes[i]);
    if (!matches) continue;
    hits_[i].add(1);
    if (rule.delay.count() == 0) {
      answer(rule, request.on_chunk, done);
    } else if (executor_ == nullptr) {
      done(ProviderReply::failed("the scripted rule at line " + std::to_string(rule.line) +
                                 " waits delay_ms, but this provider was created without an executor"));
    } else {
      // The task owns copies of everything it uses: the provider may be gone when it runs.
      executor_->post_after(
          rule.delay, [rule, on_chunk = request.on_chunk, done = std::move(done)] { answer(rule, on_chunk, done); });
    }
    return;
  }
  misses_.add(1);
  done(ProviderReply::failed(std::string(kNoMatch)));
}

}  // namespace passepartout

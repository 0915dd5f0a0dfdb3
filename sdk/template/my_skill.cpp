// my-skill: an example Passepartout skill. Its gate blocks any action that
// mentions a forbidden word (config `forbidden_word`); it also shapes the prompt
// for user input that asks for help.
#include <passepartout/skill.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace {

using passepartout::Action;
using passepartout::Signal;
using passepartout::ValueRef;
using passepartout::Verdict;

// Whether `text` contains `word` (case-sensitive; an empty word never matches).
bool mentions(std::string_view text, std::string_view word) {
  return !word.empty() && text.find(word) != std::string_view::npos;
}

// Whether any string inside `value`, however deeply nested, mentions `word`.
bool mentions_anywhere(const ValueRef& value, std::string_view word) {
  if (value.is_string()) return mentions(value.text(), word);
  for (const ValueRef item : value) {  // empty unless `value` is a list
    if (mentions_anywhere(item, word)) return true;
  }
  return false;
}

class MySkill final : public passepartout::Skill {
 public:
  // Must equal the manifest's `name` and `version`, or the host refuses the library.
  static constexpr const char kName[] = "my-skill";
  static constexpr const char kVersion[] = "1.0.0";
  // The keys this skill reads from its manifest's config: the host refuses any
  // other key there (a typo), naming its line and the nearest of these.
  static constexpr passepartout::ConfigKeySpec kConfig[] = {
      {"forbidden_word", "string", nullptr, "Actions mentioning it are blocked (none: every action passes)"}};

  // `config` is the manifest's config: (:FORBIDDEN_WORD "rm"). Its text stays
  // valid for the instance's life, so a string_view into it is safe to keep.
  explicit MySkill(const ValueRef& config) : forbidden_(config.get("FORBIDDEN_WORD").text()) {
    if (forbidden_.empty()) {
      log_warn("no forbidden_word in config: the gate lets everything through");
    } else {
      log_info("blocking actions that mention '" + std::string(forbidden_) + "'");
    }
  }

  // Asked only when the manifest's trigger (user input) matched: take the
  // prompt over when the user asks for help.
  bool trigger(const Signal& signal) override { return mentions(signal.get("PAYLOAD").get("TEXT").text(), "help"); }

  // Runs on any thread, concurrently: reads only what the constructor set.
  std::optional<std::string> prompt(const Signal& signal) override {
    std::string text(signal.get("PAYLOAD").get("TEXT").text());
    return "The user asks for help. Answer briefly, and never suggest commands that use '" + std::string(forbidden_) +
           "'. The request: " + text;
  }

  // The hot path: a pass allocates nothing. Throwing here would block too.
  Verdict gate(const Action& action, const Signal& /*signal*/) override {
    if (mentions_anywhere(action, forbidden_)) {
      return Verdict::block("my-skill: the action mentions '" + std::string(forbidden_) + "'");
    }
    return Verdict::pass();
  }

 private:
  std::string_view forbidden_;
};

}  // namespace

PASSEPARTOUT_SKILL(MySkill);

// policy: the explanation gate. An action passes only when it justifies itself
// with a :PAYLOAD :EXPLANATION longer than a configured number of characters.
#include <passepartout/skill.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

using passepartout::Action;
using passepartout::LogLevel;
using passepartout::Signal;
using passepartout::ValueRef;
using passepartout::Verdict;

constexpr std::int64_t kDefaultMinExplanationLength = 10;
constexpr std::string_view kViolation = "POLICY VIOLATION: Action lacks sufficient explanation.";
constexpr std::string_view kReason =
    "Action blocked: Missing or insufficient :explanation. Please justify your reasoning.";

// The number of Unicode code points in `text`, which the host guarantees is
// valid UTF-8: every byte that is not a continuation byte (10xxxxxx) starts one.
std::size_t code_points(std::string_view text) noexcept {
  std::size_t count = 0;
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0U) != 0x80U) ++count;
  }
  return count;
}

// `config :MIN_EXPLANATION_LENGTH`: a non-negative integer, the default when absent or null.
std::size_t min_explanation_length(const ValueRef& config) {
  const ValueRef value = config.get("MIN_EXPLANATION_LENGTH");
  if (value.is_nil()) return static_cast<std::size_t>(kDefaultMinExplanationLength);
  if (!value.is_integer() || value.as_integer() < 0) {
    throw std::invalid_argument("config min_explanation_length: expected a non-negative integer, got " + value.print());
  }
  return static_cast<std::size_t>(value.as_integer());
}

// Stateless after construction, so gate() may run on any number of threads at once.
class Policy final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "policy";
  static constexpr const char kVersion[] = "1.0.0";
  static constexpr passepartout::ConfigKeySpec kConfig[] = {
      {"min_explanation_length", "integer", "10", "An explanation needs more code points than this"}};

  explicit Policy(const ValueRef& config)
      : min_length_(min_explanation_length(config)),
        mandate_(
            "MANDATE: every action you propose (a tool call, a command) carries an :EXPLANATION (the "
            "`explanation` argument) of more than " +
            std::to_string(min_length_) + " characters saying why; an action without one is blocked.") {}

  // The one rule this gate enforces, told to the model before it proposes (seed D8).
  std::optional<std::string> mandate(const Signal& /*signal*/) override { return mandate_; }

  passepartout::Verdict gate(const Action& action, const Signal& /*signal*/) override {
    // A rejection or log line is shown to the user, never executed: nothing to justify.
    if (action.get("TYPE").is_keyword("LOG")) return Verdict::pass();

    const ValueRef explanation = action.get("PAYLOAD").get("EXPLANATION");
    if (explanation.is_string() && code_points(explanation.text()) > min_length_) {
      return Verdict::pass();
    }
    log_warn(kViolation);
    return Verdict::block(std::string(kReason), LogLevel::warn);
  }

 private:
  std::size_t min_length_;  // an explanation needs strictly more code points than this
  std::string mandate_;
};

}  // namespace

PASSEPARTOUT_SKILL(Policy);

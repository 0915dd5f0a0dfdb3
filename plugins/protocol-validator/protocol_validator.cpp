// protocol-validator: the message-shape gate. An action passes only when it is
// a property list whose :TYPE is one of the protocol's message types.
#include <passepartout/skill.hpp>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

namespace {

using passepartout::Action;
using passepartout::Signal;
using passepartout::ValueRef;
using passepartout::Verdict;

// Keyword names as the host stores them: upper-case, without ':'.
constexpr std::array<std::string_view, 5> kMessageTypes = {"REQUEST", "EVENT", "RESPONSE", "LOG", "STATUS"};

bool is_message_type(const ValueRef& type) {
  if (!type.is_keyword()) return false;
  return std::find(kMessageTypes.begin(), kMessageTypes.end(), type.text()) != kMessageTypes.end();
}

// Stateless, so gate() may run on any number of threads at once.
class ProtocolValidator final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "protocol-validator";
  static constexpr const char kVersion[] = "1.0.0";

  passepartout::Verdict gate(const Action& action, const Signal& /*signal*/) override {
    // get() reads NIL from anything that is not a list, so a bare atom reports type NIL.
    const ValueRef type = action.get("TYPE");
    if (action.is_list() && is_message_type(type)) return Verdict::pass();
    return Verdict::block("Protocol Violation: Invalid message type '" + type.print() + "'");
  }
};

}  // namespace

PASSEPARTOUT_SKILL(ProtocolValidator);

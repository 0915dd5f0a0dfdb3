// The operator requests about rules (docs/rules.md): :RULES, :RULE,
// :RULE-ADD, :RULE-REMOVE, :RULE-TEST, :RULES-CARRY, and :APPROVE with
// :REMEMBER (a standing approval taught by approving). Each change is
// written to the rules file before it answers, and audited with who asked.
#pragma once

#include <string>
#include <string_view>

#include "daemon/operator_handler.hpp"
#include "value/value.hpp"

namespace passepartout {

// Answers `request` (command `name`, upper-case) when it is one of those
// above, on the control thread, and returns true; false for any other.
bool handle_rules_request(std::string_view name, const Value& request, const std::string& requester,
                          const OperatorHandler::Services& services, const OperatorHandler::Answer& answer);

}  // namespace passepartout

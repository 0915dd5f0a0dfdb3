// skill.hpp included alone into C++17, with the project's warnings: it must stand on its
// own, and override detection (which hooks go into the table) is checked at compile time.
#include "passepartout/skill.hpp"

namespace {

using passepartout::Action;
using passepartout::Context;
using passepartout::Signal;
using passepartout::ValueRef;
using passepartout::Verdict;

struct GateOnly final : passepartout::Skill {
  static constexpr const char kName[] = "gate-only";
  static constexpr const char kVersion[] = "1.0.0";
  Verdict gate(const Action& /*action*/, const Signal& /*signal*/) override { return Verdict::pass(); }
};

struct Everything final : passepartout::Skill {
  static constexpr const char kName[] = "everything";
  static constexpr const char kVersion[] = "2.1.0";
  explicit Everything(const ValueRef& /*config*/) {}
  bool trigger(const Signal& /*signal*/) override { return false; }
  std::optional<std::string> prompt(const Signal& /*signal*/) override { return "p"; }
  Verdict gate(const Action& /*action*/, const Signal& /*signal*/) override { return Verdict::pass(); }
  void self_test() override {}
  ValueRef export_state(Context& ctx) override { return ctx.nil(); }
  void import_state(const ValueRef& /*state*/) override {}
};

// A hook overridden in an intermediate base counts as overridden.
struct PromptBase : passepartout::Skill {
  std::optional<std::string> prompt(const Signal& /*signal*/) override { return std::nullopt; }
};
struct Derived final : PromptBase {
  static constexpr const char kName[] = "derived";
  static constexpr const char kVersion[] = "1.0.0";
};

namespace sdk = passepartout::sdk_detail;

static_assert(sdk::overrides_gate<GateOnly> && !sdk::overrides_trigger<GateOnly> &&
              !sdk::overrides_prompt<GateOnly> && !sdk::overrides_self_test<GateOnly> &&
              !sdk::overrides_export_state<GateOnly> && !sdk::overrides_import_state<GateOnly>);
static_assert(sdk::overrides_gate<Everything> && sdk::overrides_trigger<Everything> &&
              sdk::overrides_prompt<Everything> && sdk::overrides_self_test<Everything> &&
              sdk::overrides_export_state<Everything> && sdk::overrides_import_state<Everything>);
static_assert(sdk::overrides_prompt<Derived> && !sdk::overrides_gate<Derived>);

constexpr pp_skill_api kGateOnly = sdk::skill_table<GateOnly>();
static_assert(kGateOnly.struct_size == sizeof(pp_skill_api) && kGateOnly.abi_major == PP_ABI_MAJOR &&
              kGateOnly.abi_minor == PP_ABI_MINOR);
static_assert(kGateOnly.name[0] == 'g' && kGateOnly.version[0] == '1');
constexpr pp_skill_api kDerived = sdk::skill_table<Derived>();
static_assert(kDerived.name[0] == 'd' && kDerived.version[0] == '1');

}  // namespace

// The macro itself, as a skill library uses it.
PASSEPARTOUT_SKILL(Everything);

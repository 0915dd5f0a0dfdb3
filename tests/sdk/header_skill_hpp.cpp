// skill.hpp included alone into C++17, with the project's warnings: it must stand on its
// own, and override detection (which hooks, tools and actuators go into the table) is
// checked at compile time.
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

// ABI 1.1: tools, an actuator, observe and on_error.
struct Hands final : passepartout::Skill {
  static constexpr const char kName[] = "hands";
  static constexpr const char kVersion[] = "1.1.0";
  static constexpr passepartout::ToolSpec kTools[] = {
      {"read-file", "Reads a file", R"({"type": "object"})"},
      {"list_dir", nullptr, nullptr},
  };
  static constexpr const char* kActuators[] = {"shell", "Notify"};
  ValueRef call_tool(std::string_view /*tool*/, const ValueRef& args, const Signal& /*signal*/) override {
    return args;
  }
  ValueRef act(std::string_view /*target*/, const Action& action, const Signal& /*signal*/) override { return action; }
  void observe(const Signal& /*signal*/) override {}
  passepartout::ErrorChoice on_error(const Signal& /*signal*/, const ValueRef& /*error*/) override {
    return passepartout::ErrorChoice::skip();
  }
};

// Only observe: no tools, no actuator.
struct Watcher final : passepartout::Skill {
  static constexpr const char kName[] = "watcher";
  static constexpr const char kVersion[] = "1.0.0";
  void observe(const Signal& /*signal*/) override {}
};

namespace sdk = passepartout::sdk_detail;

static_assert(!sdk::overrides_call_tool<Everything> && !sdk::overrides_act<Everything> &&
              !sdk::overrides_observe<Everything> && !sdk::overrides_on_error<Everything> &&
              !sdk::HasTools<Everything>::value && !sdk::HasActuators<Everything>::value);
static_assert(sdk::overrides_call_tool<Hands> && sdk::overrides_act<Hands> && sdk::overrides_observe<Hands> &&
              sdk::overrides_on_error<Hands> && sdk::tools_are_tool_specs<Hands>() &&
              sdk::actuators_are_names<Hands>() && sdk::tool_names_valid<Hands>() &&
              sdk::actuator_names_valid<Hands>());

constexpr pp_skill_api kHands = sdk::skill_table<Hands>();
static_assert(kHands.tools == Hands::kTools && kHands.tool_count == 2 &&
              kHands.call_tool == &sdk::Trampolines<Hands>::call_tool);
static_assert(kHands.actuators == Hands::kActuators && kHands.actuator_count == 2 &&
              kHands.act == &sdk::Trampolines<Hands>::act);
static_assert(kHands.observe == &sdk::Trampolines<Hands>::observe &&
              kHands.error_policy == &sdk::Trampolines<Hands>::error_policy);
static_assert(kHands.struct_size == PP_SKILL_API_SIZE_1_4 && kHands.gate == nullptr);
constexpr pp_skill_api kWatcher = sdk::skill_table<Watcher>();
static_assert(kWatcher.tools == nullptr && kWatcher.tool_count == 0 && kWatcher.call_tool == nullptr &&
              kWatcher.actuators == nullptr && kWatcher.act == nullptr && kWatcher.error_policy == nullptr &&
              kWatcher.observe == &sdk::Trampolines<Watcher>::observe);
constexpr pp_skill_api kEverything = sdk::skill_table<Everything>();
static_assert(kEverything.tools == nullptr && kEverything.call_tool == nullptr && kEverything.act == nullptr &&
              kEverything.observe == nullptr && kEverything.error_policy == nullptr);

// The compile-time name checks the host repeats at load.
struct BadToolName final : passepartout::Skill {
  static constexpr passepartout::ToolSpec kTools[] = {{"Read-File", nullptr, nullptr}};
};
struct DuplicateTool final : passepartout::Skill {
  static constexpr passepartout::ToolSpec kTools[] = {{"a", nullptr, nullptr}, {"a", nullptr, nullptr}};
};
struct DuplicateActuator final : passepartout::Skill {
  static constexpr const char* kActuators[] = {"shell", "SHELL"};
};
struct NotToolSpecs final : passepartout::Skill {
  static constexpr const char* kTools[] = {"read-file"};
};
static_assert(!sdk::tool_names_valid<BadToolName>() && !sdk::tool_names_valid<DuplicateTool>() &&
              !sdk::actuator_names_valid<DuplicateActuator>() && !sdk::tools_are_tool_specs<NotToolSpecs>());

// ABI 1.2: the config keys a skill declares go into its table as they are; a
// skill without kConfig declares none.
struct Configured final : passepartout::Skill {
  static constexpr const char kName[] = "configured";
  static constexpr const char kVersion[] = "1.0.0";
  static constexpr passepartout::ConfigKeySpec kConfig[] = {
      {"max_output", "integer", "100000", "Bytes of output kept"},
      {"labels", nullptr, nullptr, nullptr},
  };
};
struct DuplicateConfigKey final : passepartout::Skill {
  static constexpr passepartout::ConfigKeySpec kConfig[] = {{"timeout", nullptr, nullptr, nullptr},
                                                            {"TIMEOUT", nullptr, nullptr, nullptr}};
};
struct BadConfigKeyName final : passepartout::Skill {
  static constexpr passepartout::ConfigKeySpec kConfig[] = {{"max output", nullptr, nullptr, nullptr}};
};
struct NotConfigKeySpecs final : passepartout::Skill {
  static constexpr const char* kConfig[] = {"max_output"};
};
static_assert(sdk::config_are_key_specs<Configured>() && sdk::config_names_valid<Configured>() &&
              !sdk::config_names_valid<DuplicateConfigKey>() && !sdk::config_names_valid<BadConfigKeyName>() &&
              !sdk::config_are_key_specs<NotConfigKeySpecs>() && !sdk::config_are_key_specs<Hands>());
constexpr pp_skill_api kConfigured = sdk::skill_table<Configured>();
static_assert(kConfigured.config_keys == Configured::kConfig && kConfigured.config_key_count == 2 &&
              kConfigured.struct_size == PP_SKILL_API_SIZE_1_4 && kConfigured.abi_minor == PP_ABI_MINOR);
static_assert(kHands.config_keys == nullptr && kHands.config_key_count == 0);

static_assert(sdk::overrides_gate<GateOnly> && !sdk::overrides_trigger<GateOnly> && !sdk::overrides_prompt<GateOnly> &&
              !sdk::overrides_self_test<GateOnly> && !sdk::overrides_export_state<GateOnly> &&
              !sdk::overrides_import_state<GateOnly>);
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

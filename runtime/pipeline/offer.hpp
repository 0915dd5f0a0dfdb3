// Offer: what the model is offered in one snapshot of the skills: the
// functions it may call (tools, and actuators that describe their payload),
// each with its schema, the skill that serves it and how a call becomes an
// action, and the text that teaches it all in the system prompt (the action
// grammar of IDENTITY, the TOOLS section). The prompt builder, the drivers
// (through ProviderRequest::tools) and the answer parser read the same Offer,
// built once per snapshot.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/external_tools.hpp"
#include "value/value.hpp"

namespace passepartout {

class Snapshot;
class Slot;

// One thing the model may call or address.
struct OfferedFunction {
  enum class Kind : std::uint8_t {
    tool,      // a skill's tool: (:TARGET :TOOL :PAYLOAD (:TOOL "<name>" :ARGS (...)))
    actuator,  // a skill's actuator: (:TARGET :<NAME> :PAYLOAD (...))
  };
  Kind kind = Kind::tool;
  // As the model calls it: the tool's name ("read-file"), or the actuator's
  // in lower case ("shell").
  std::string name;
  // For an actuator, its :TARGET keyword's name ("SHELL"); empty for a tool.
  std::string target;
  std::string description;
  // The arguments' JSON Schema as the skill wrote it ("" when none), and
  // through the JSON bridge (NIL when none).
  std::string parameters_json;
  Value parameters;
  // The schema's properties, in its order, as the model writes them
  // ("cmd"), and whether each is required: for the grammar line.
  struct Argument {
    std::string name;
    bool required = false;
  };
  std::vector<Argument> arguments;
  // Offered as a native function (a tool, or an actuator whose payload is
  // described); an actuator that is not is taught in the grammar only.
  bool native = true;
  const Slot* slot = nullptr;  // who serves it (valid while the snapshot is); nullptr for an external tool
  // An external tool (an MCP server's): its catalog entry, valid while the Offer is.
  const ExternalTool* external = nullptr;
};

class Offer {
 public:
  // What `snapshot` offers: every tool, and every actuator but the reply
  // channel (:TUI), whose guards are loaded (Snapshot::unguarded), and every
  // tool of `catalog` whose guards are loaded; one that lacks a guard is left
  // out (it still fails closed if called anyway). A catalog tool whose name
  // a skill's tool has is left out too: the skill keeps its name.
  explicit Offer(const Snapshot& snapshot, std::shared_ptr<const ToolCatalog> catalog = nullptr);

  std::uint64_t snapshot_id() const noexcept { return snapshot_id_; }
  std::uint64_t catalog_generation() const noexcept { return catalog_ != nullptr ? catalog_->generation() : 0; }
  // Everything offered, tools then actuators, each sorted by name.
  std::span<const OfferedFunction> functions() const noexcept { return functions_; }
  // The native function of that name (ASCII case ignored), or nullptr.
  const OfferedFunction* find_native(std::string_view name) const noexcept;
  // The native functions as ProviderRequest::tools carries them to the
  // drivers: (:NAME "shell" :DESCRIPTION "..." :PARAMETERS (...) :PARAMETERS-JSON "{...}") each.
  const Value& native_tools() const noexcept { return native_tools_; }
  // The TOOLS section's text (seed B12's tool belt, tools only).
  std::string_view tool_belt() const noexcept { return tool_belt_; }
  // How to answer, call a tool and address each actuator, in the plist
  // grammar the answer parser reads: IDENTITY's instructions.
  std::string_view grammar() const noexcept { return grammar_; }

  // The action a native call of `function` with `args` (a plist, keys
  // upper-cased by the JSON bridge, or NIL) becomes: what the plist grammar
  // gives for the same call.
  // An external tool's call carries its :SERVER and the :DIGEST of the
  // definition the model was shown.
  static Value action_for_call(const OfferedFunction& function, const Value& args);

  // `action` with the :SERVER and :DIGEST of the external tool its :PAYLOAD
  // :TOOL names set from this offer, whatever the model wrote there: the
  // gates and the decision log see which server and which definition the
  // call is for. Any other action is returned as it is.
  Value stamp(Value action) const;

 private:
  std::uint64_t snapshot_id_ = 0;
  std::shared_ptr<const ToolCatalog> catalog_;
  std::vector<OfferedFunction> functions_;
  Value native_tools_;
  std::string tool_belt_;
  std::string grammar_;
};

// The Offer of `snapshot` and `catalog`, built once per pair (the first
// thread to ask builds it; each thread then keeps its own reference until
// either changes, so the pipeline takes no lock for it). Thread-safe.
std::shared_ptr<const Offer> offer_of(const Snapshot& snapshot,
                                      const std::shared_ptr<const ToolCatalog>& catalog = nullptr);

}  // namespace passepartout

// Global awareness: the skeletal Org outline of the active projects that the
// context gives the model ("peripheral vision"), with the node in focus shown in full.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memory/memory_store.hpp"
#include "memory/memory_table.hpp"
#include "value/value.hpp"

namespace passepartout {

// Borrowed for the call: what the fields view must outlive it.
struct AwarenessOptions {
  // The node in focus (foveal): rendered with its content at any depth, and
  // so are its children. Empty for none.
  std::string_view foveal_id;
  // Projects whose :TAGS contain any of these (case-insensitive) are left out
  // (G7: the privacy tags, PRIVACY_FILTER_TAGS).
  std::span<const std::string> private_tags;
};

// "GLOBAL MEMEX AWARENESS (Peripheral Vision):\n" followed by each active
// project (see active_projects()) as an Org outline, or by
// "No active projects found.\n". A node renders as
//   <depth stars> <:TITLE or "Untitled">\n:PROPERTIES:\n:ID: <id>\n:END:\n
// then its content and a newline when it is the foveal node, then its
// children. Projects are depth 1; nodes deeper than 2 render only when
// foveal, and a node that does not render hides its subtree. Children that
// are not in `objects` are skipped; a cycle of ids is followed once.
std::string render_global_awareness(const MemoryTable& objects, const AwarenessOptions& options = {});
std::string render_global_awareness(const MemoryStore& store, const AwarenessOptions& options = {});

// The node a signal focuses on: its :FOVEAL-FOCUS, else its :PAYLOAD :TARGET-ID
// (strings only); empty when neither is given.
std::string foveal_id_of(const Value& signal);

}  // namespace passepartout

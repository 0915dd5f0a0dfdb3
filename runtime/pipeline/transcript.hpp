// A session's conversation with the model (Decisions 5: the model sees a
// tool's result and takes the next step): the user's texts, the model's
// answers and tool calls with their ids, the tools' results and the gates'
// rejections, oldest first, bounded by a token estimate.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "providers/provider.hpp"

namespace passepartout {

class Transcript {
 public:
  // What one turn's text may hold: longer texts (a tool's whole output) are
  // cut, saying how much was left out.
  static constexpr std::size_t kMaxTurnChars = 16 * 1024;

  // A rough token estimate: four characters a token, and a few tokens of
  // framing per message (what the vendors' own rules of thumb say).
  static std::size_t estimate_tokens(const Turn& turn) noexcept;
  // The same for text outside a turn (a system prompt): no framing.
  static std::size_t estimate_tokens(std::string_view text) noexcept;

  // Marks where the signal being reasoned about starts: its turns are never
  // dropped to make room (its current turn, a tool call and its result).
  void begin_signal() noexcept { current_ = turns_.size(); }

  void add_user(std::string_view text);
  // The model's answer: its text and the calls it made (either may be empty;
  // an answer with neither is not recorded).
  void add_assistant(std::string_view text, const std::vector<ToolCall>& calls);
  // A tool's result, or why the call was not run, answering `call`.
  void add_tool_result(const ToolCall& call, std::string_view text);

  // The result that answers the call `call_id` becomes `text` (what an
  // action that waited for a human's approval did once it was decided).
  // When no turn answers it any more (dropped to make room), `text` is added
  // as a user turn instead, so the conversation still learns it.
  void settle_tool_result(std::string_view call_id, std::string_view text);

  // The calls of the latest assistant turn that no tool result answers yet.
  std::vector<ToolCall> unanswered_calls() const;

  // Drops the oldest exchanges until the estimate is at most `budget_tokens`:
  // whole units only (a user text; an assistant turn with the results of its
  // calls), never a turn of the current signal.
  void trim(std::size_t budget_tokens);

  // The turns for a request, written over `out` (whose buffers are reused).
  void copy_to(std::vector<Turn>& out) const;

  const std::deque<Turn>& turns() const noexcept { return turns_; }
  std::size_t tokens() const noexcept { return tokens_; }
  bool empty() const noexcept { return turns_.empty(); }
  void clear() noexcept;

 private:
  void push(Turn turn);
  void pop_front();

  std::deque<Turn> turns_;
  std::size_t tokens_ = 0;   // the estimate for turns_
  std::size_t current_ = 0;  // turns_[current_...] belong to the signal being reasoned about
};

// `text` cut to Transcript::kMaxTurnChars (on a UTF-8 boundary), with a note
// of how many characters were left out.
std::string bounded_turn_text(std::string_view text);

}  // namespace passepartout

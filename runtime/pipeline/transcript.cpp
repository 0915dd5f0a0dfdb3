// A session's conversation with the model, bounded by a token estimate.
#include "pipeline/transcript.hpp"

#include <algorithm>
#include <utility>

#include "base/utf8.hpp"
#include "pipeline/credential_rule.hpp"

namespace passepartout {

namespace {

constexpr std::size_t kCharsPerToken = 4;
constexpr std::size_t kTokensPerMessage = 4;

}  // namespace

std::string bounded_turn_text(std::string_view text) { return bounded_text(text, Transcript::kMaxTurnChars); }

std::size_t Transcript::estimate_tokens(std::string_view text) noexcept {
  return (text.size() + kCharsPerToken - 1) / kCharsPerToken;
}

std::size_t Transcript::estimate_tokens(const Turn& turn) noexcept {
  std::size_t chars = turn.text.size();
  for (const ToolCall& call : turn.tool_calls) chars += call.id.size() + call.name.size() + call.arguments.size();
  chars += turn.tool_call_id.size();
  return (chars + kCharsPerToken - 1) / kCharsPerToken + kTokensPerMessage;
}

void Transcript::push(Turn turn) {
  // No configured key reaches a model, whatever a tool read or a model wrote.
  KnownCredentials::mask(turn.text);
  for (ToolCall& call : turn.tool_calls) KnownCredentials::mask(call.arguments);
  tokens_ += estimate_tokens(turn);
  turns_.push_back(std::move(turn));
}

void Transcript::add_user(std::string_view text) {
  Turn turn;
  turn.role = Turn::Role::user;
  turn.text = bounded_turn_text(text);
  push(std::move(turn));
}

void Transcript::add_assistant(std::string_view text, const std::vector<ToolCall>& calls) {
  if (text.empty() && calls.empty()) return;
  Turn turn;
  turn.role = Turn::Role::assistant;
  turn.text = bounded_turn_text(text);
  turn.tool_calls = calls;
  push(std::move(turn));
}

void Transcript::add_tool_result(const ToolCall& call, std::string_view text) {
  Turn turn;
  turn.role = Turn::Role::tool;
  turn.text = bounded_turn_text(text);
  turn.tool_call_id = call.id;
  turn.tool_name = call.name;
  push(std::move(turn));
}

void Transcript::settle_tool_result(std::string_view call_id, std::string_view text) {
  for (Turn& turn : turns_) {
    if (turn.role != Turn::Role::tool || turn.tool_call_id != call_id) continue;
    tokens_ -= estimate_tokens(turn);
    turn.text = bounded_turn_text(text);
    KnownCredentials::mask(turn.text);
    tokens_ += estimate_tokens(turn);
    return;
  }
  add_user(text);
}

std::vector<ToolCall> Transcript::unanswered_calls() const {
  std::vector<ToolCall> open;
  for (auto it = turns_.rbegin(); it != turns_.rend(); ++it) {
    if (it->role != Turn::Role::assistant) continue;
    if (it->tool_calls.empty()) return open;
    for (const ToolCall& call : it->tool_calls) {
      const bool answered = std::any_of(it.base(), turns_.end(), [&](const Turn& later) {
        return later.role == Turn::Role::tool && later.tool_call_id == call.id;
      });
      if (!answered) open.push_back(call);
    }
    return open;
  }
  return open;
}

void Transcript::pop_front() {
  tokens_ -= estimate_tokens(turns_.front());
  turns_.pop_front();
  if (current_ > 0) --current_;
}

void Transcript::trim(std::size_t budget_tokens) {
  // Drops one unit from the front: a user text, or an assistant turn and the
  // tool results that follow it (a call never loses its result). Then the
  // conversation starts with a user text again, as the APIs expect.
  const auto drop_unit = [this] {
    const bool assistant = turns_.front().role == Turn::Role::assistant;
    pop_front();
    while (assistant && current_ > 0 && !turns_.empty() && turns_.front().role == Turn::Role::tool) pop_front();
  };
  while (tokens_ > budget_tokens && current_ > 0) drop_unit();
  while (current_ > 0 && turns_.front().role != Turn::Role::user) drop_unit();
}

void Transcript::copy_to(std::vector<Turn>& out) const {
  out.resize(turns_.size());
  for (std::size_t i = 0; i < turns_.size(); ++i) {
    const Turn& from = turns_[i];
    Turn& to = out[i];
    to.role = from.role;
    to.text.assign(from.text);
    to.tool_calls = from.tool_calls;
    to.tool_call_id.assign(from.tool_call_id);
    to.tool_name.assign(from.tool_name);
  }
}

void Transcript::clear() noexcept {
  turns_.clear();
  tokens_ = 0;
  current_ = 0;
}

}  // namespace passepartout

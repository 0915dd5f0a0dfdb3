// A session's conversation (Decisions 5): with a provider that sends
// transcripts, the model sees the session's earlier turns, its tool calls'
// results as tool messages answering their ids, and the gates' rejections.
#include <catch2/catch.hpp>

#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pipeline/credential_rule.hpp"
#include "support/async_wait.hpp"
#include "support/sexp.hpp"
#include "unit/pipeline/pipeline_rig.hpp"

namespace passepartout {
namespace {

using testing::RecordingSink;
using testing::Rig;
using testing::sexp;

// A provider that sends transcripts, as a real one does: it keeps every
// request's transcript and answers from a queue (then "done").
class ConversingModel final : public Provider {
 public:
  struct Seen {
    std::vector<Turn> transcript;
    bool prompt_in_transcript = false;
    std::string prompt;
  };

  std::string_view name() const noexcept override { return "conversing"; }
  bool reads_transcript() const noexcept override { return true; }
  void complete(const ProviderRequest& request, ProviderCompletion done) override {
    ProviderReply reply = ProviderReply::text("done");
    {
      std::lock_guard lock(mutex_);
      seen_.push_back(Seen{request.transcript, request.prompt_in_transcript, request.prompt});
      if (!replies_.empty()) {
        reply = std::move(replies_.front());
        replies_.pop_front();
      }
    }
    done(std::move(reply));
  }
  void enqueue(ProviderReply reply) {
    std::lock_guard lock(mutex_);
    replies_.push_back(std::move(reply));
  }
  Seen seen(std::size_t i) const {
    std::lock_guard lock(mutex_);
    return seen_.at(i);
  }
  std::size_t calls() const {
    std::lock_guard lock(mutex_);
    return seen_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::deque<ProviderReply> replies_;
  std::vector<Seen> seen_;
};

// A reply calling `tool` (with the id the API gave it) with (:TEXT "ping").
ProviderReply tool_call(const std::string& id, const std::string& tool) {
  ProviderReply reply =
      ProviderReply::calls(sexp("((:ID \"" + id + "\" :NAME \"" + tool + "\" :ARGUMENTS (:TEXT \"ping\")))"));
  reply.wire_calls.push_back(ToolCall{id, tool, R"({"text":"ping"})"});
  return reply;
}

std::shared_ptr<ConversingModel> install(Rig& rig) {
  auto model = std::make_shared<ConversingModel>();
  rig.cascade.set_providers({model});
  return model;
}

Value user_input(const std::string& text, const std::string& session) {
  return sexp("(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"" + session +
              "\") :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"" + text + "\"))");
}

}  // namespace

TEST_CASE("a tool call's result goes back to the model as a tool message answering its id",
          "[pipeline][conversation]") {
  Rig rig({{"policy", 0, {}, true}, {"toolbox-a", 50}}, {});
  auto model = install(rig);
  model->enqueue(tool_call("call_1", "echo-args"));
  model->enqueue(ProviderReply::text("The toolbox echoed ping."));
  auto sink = std::make_shared<RecordingSink>();

  const LoopReport report = rig.run(user_input("please echo ping", "s1"), sink);

  CHECK(report.cycles == 2);
  REQUIRE(model->calls() == 2);
  const auto first = model->seen(0);
  CHECK(first.prompt_in_transcript);
  REQUIRE(first.transcript.size() == 1);
  CHECK(first.transcript[0].role == Turn::Role::user);
  CHECK(first.transcript[0].text == "please echo ping");

  const auto second = model->seen(1);
  CHECK(second.prompt_in_transcript);
  REQUIRE(second.transcript.size() == 3);
  CHECK(second.transcript[1].role == Turn::Role::assistant);
  REQUIRE(second.transcript[1].tool_calls.size() == 1);
  CHECK(second.transcript[1].tool_calls[0].id == "call_1");
  CHECK(second.transcript[1].tool_calls[0].arguments == R"({"text":"ping"})");
  CHECK(second.transcript[2].role == Turn::Role::tool);
  CHECK(second.transcript[2].tool_call_id == "call_1");
  CHECK(second.transcript[2].tool_name == "echo-args");
  CHECK(second.transcript[2].text.find("TOOL [echo-args] RESULT") != std::string::npos);
  CHECK(second.transcript[2].text == second.prompt);  // the scripted provider's prompt is the same text
  CHECK(sink->messages().back().path({"PAYLOAD", "TEXT"}).text() == "The toolbox echoed ping.");
}

TEST_CASE("a session's next signal sees its earlier exchange, another session does not", "[pipeline][conversation]") {
  Rig rig({{"policy", 0, {}, true}}, {});
  auto model = install(rig);
  model->enqueue(ProviderReply::text("Paris."));
  rig.run(user_input("capital of France?", "s1"), std::make_shared<RecordingSink>());
  rig.run(user_input("and of Italy?", "s1"), std::make_shared<RecordingSink>());
  rig.run(user_input("hello", "s2"), std::make_shared<RecordingSink>());

  const auto second = model->seen(1);
  REQUIRE(second.transcript.size() == 3);
  CHECK(second.transcript[0].text == "capital of France?");
  CHECK(second.transcript[1].role == Turn::Role::assistant);
  CHECK(second.transcript[1].text == "Paris.");
  CHECK(second.transcript[2].text == "and of Italy?");
  const auto other = model->seen(2);
  REQUIRE(other.transcript.size() == 1);
  CHECK(other.transcript[0].text == "hello");
}

TEST_CASE("a blocked tool call's rejection reaches the next attempt as that call's result",
          "[pipeline][conversation]") {
  Rig rig({{"block-gate", 10}}, {});
  auto model = install(rig);
  model->enqueue(tool_call("call_7", "echo-args"));
  model->enqueue(ProviderReply::text("I will not call it."));
  rig.run(user_input("echo something", "s1"), std::make_shared<RecordingSink>());

  REQUIRE(model->calls() >= 2);
  const auto retry = model->seen(1);
  CHECK(retry.prompt_in_transcript);
  REQUIRE(retry.transcript.size() == 3);
  const Turn& rejection = retry.transcript[2];
  CHECK(rejection.role == Turn::Role::tool);
  CHECK(rejection.tool_call_id == "call_7");
  CHECK(rejection.text.find("blocked by block-gate") != std::string::npos);
  CHECK(rejection.text.find("The call was not run.") != std::string::npos);
  // A rejected text proposal is answered by a user turn the next attempt ends with.
  if (model->calls() >= 3) {
    const auto third = model->seen(2);
    CHECK(third.transcript.back().role == Turn::Role::user);
    CHECK(third.transcript.back().text.find("blocked by block-gate") != std::string::npos);
  }
}

TEST_CASE("of two parallel calls the second is answered as not run", "[pipeline][conversation]") {
  Rig rig({{"policy", 0, {}, true}, {"toolbox-a", 50}}, {});
  auto model = install(rig);
  ProviderReply two = tool_call("call_a", "echo-args");
  two.wire_calls.push_back(ToolCall{"call_b", "echo-args", "{}"});
  model->enqueue(std::move(two));
  rig.run(user_input("echo twice", "s1"), std::make_shared<RecordingSink>());

  REQUIRE(model->calls() == 2);
  const auto next = model->seen(1);
  REQUIRE(next.transcript.size() == 4);
  CHECK(next.transcript[2].tool_call_id == "call_b");
  CHECK(next.transcript[2].text.find("one call is run at a time") != std::string::npos);
  CHECK(next.transcript[3].tool_call_id == "call_a");
  CHECK(next.transcript[3].text.find("RESULT") != std::string::npos);
}

TEST_CASE("a call held for approval is answered as waiting, and the next signal starts clean",
          "[pipeline][conversation]") {
  Rig rig({{"approval-gate", 10}, {"toolbox-a", 50}}, {});
  auto model = install(rig);
  model->enqueue(tool_call("call_h", "echo-args"));
  rig.run(user_input("echo it", "s1"), std::make_shared<RecordingSink>());
  rig.run(user_input("anything new?", "s1"), std::make_shared<RecordingSink>());

  REQUIRE(model->calls() == 2);
  const auto next = model->seen(1);
  REQUIRE(next.transcript.size() == 4);
  CHECK(next.transcript[2].tool_call_id == "call_h");
  CHECK(next.transcript[2].text.find("waits for a human's approval") != std::string::npos);
  CHECK(next.transcript[3].text == "anything new?");
}

TEST_CASE("the transcript keeps to its budget: the oldest exchanges go first, the current turn never",
          "[pipeline][conversation]") {
  Rig rig({{"policy", 0, {}, true}}, {}, 2, [](PipelineOptions& options) { options.transcript_tokens = 40; });
  auto model = install(rig);
  const std::string long_text(100, 'x');  // 25 tokens and a few: one exchange fits, two do not
  for (const char* tag : {"one ", "two ", "three "}) {
    rig.run(user_input(tag + long_text, "s1"), std::make_shared<RecordingSink>());
  }
  const auto last = model->seen(2);
  REQUIRE(!last.transcript.empty());
  CHECK(last.transcript.front().role == Turn::Role::user);
  CHECK(last.transcript.back().text == "three " + long_text);
  for (const Turn& turn : last.transcript) CHECK(turn.text.find("one ") != 0);
}

TEST_CASE("without a provider that sends transcripts none is kept", "[pipeline][conversation]") {
  Rig rig({{"policy", 0, {}, true}}, {"rules:\n  - match: ''\n    reply: fine\n"});
  rig.run(user_input("hello", "s1"), std::make_shared<RecordingSink>());
  auto model = install(rig);
  rig.run(user_input("again", "s1"), std::make_shared<RecordingSink>());
  const auto seen = model->seen(0);
  REQUIRE(seen.transcript.size() == 1);  // the scripted exchange was not recorded
  CHECK(seen.transcript[0].text == "again");
}

TEST_CASE("a configured key never reaches the model: masked in the transcript, blocked in an action",
          "[pipeline][conversation][credentials]") {
  KnownCredentials::set({{"local-key-0123456789", "LOCAL_KEY"}});
  Rig rig({{"policy", 0, {}, true}}, {});
  auto model = install(rig);
  for (int i = 0; i < 3; ++i) model->enqueue(ProviderReply::text("Your key is local-key-0123456789."));
  auto sink = std::make_shared<RecordingSink>();
  rig.run(user_input("my key is local-key-0123456789, keep it", "s1"), sink);
  KnownCredentials::set({});

  const auto first = model->seen(0);
  REQUIRE(!first.transcript.empty());
  CHECK(first.transcript[0].text == "my key is [MASKED], keep it");
  const auto retry = model->seen(1);  // the blocked answer, masked, and its rejection
  REQUIRE(retry.transcript.size() == 3);
  CHECK(retry.transcript[1].text == "Your key is [MASKED].");
  CHECK(retry.transcript[2].text.find("contains the key of a configured provider (LOCAL_KEY)") != std::string::npos);
  for (const std::string& line : sink->printed()) CHECK(line.find("local-key-0123456789") == std::string::npos);
  INFO(sink->printed().back());
  CHECK(sink->printed().back().find("credential-rule") != std::string::npos);
}

}  // namespace passepartout

namespace passepartout {
namespace {

// A native call of the shell with a harmless command and its explanation.
ProviderReply shell_call(const std::string& id, const std::string& command) {
  const std::string arguments = R"({"cmd":")" + command + R"(","explanation":"Printing a word to greet the user."})";
  ProviderReply reply = ProviderReply::calls(Value::list({Value::plist(
      {{"ID", Value::string(id)}, {"NAME", Value::string("shell")}, {"ARGUMENTS", Value::string(arguments)}})}));
  reply.wire_calls.push_back(ToolCall{id, "shell", arguments});
  return reply;
}

const Turn* result_for(const std::vector<Turn>& transcript, std::string_view id) {
  for (const Turn& turn : transcript) {
    if (turn.role == Turn::Role::tool && turn.tool_call_id == id) return &turn;
  }
  return nullptr;
}

std::vector<testing::SkillSpec> acting_skills() {
  return {{"tool-permissions", 0, {}, true},
          {"policy", 0, {}, true},
          {"shell-guard", 0, {}, true},
          {"shell", 0, {}, true},
          {"file-tools", 0, {}, true}};
}

}  // namespace

TEST_CASE("a native shell call waits for approval, and once decided what came of it is that call's result",
          "[pipeline][conversation][offer]") {
  Rig rig(acting_skills(), {});
  auto model = install(rig);
  model->enqueue(shell_call("call_1", "echo approved-run"));
  auto sink = std::make_shared<RecordingSink>();
  rig.run(user_input("greet me through the shell", "s"), sink);
  std::string token;
  for (const Value& message : sink->messages()) {
    if (message.path({"PAYLOAD", "TOKEN"}).is_string()) token = std::string(message.path({"PAYLOAD", "TOKEN"}).text());
  }
  REQUIRE(token.size() == 32);
  const Value action = rig.approvals->find(token)->action;
  CHECK(to_sexp(action).find(R"(:TARGET :SHELL :PAYLOAD (:CMD "echo approved-run" :EXPLANATION "Printing)") !=
        std::string::npos);

  SECTION("approved") {
    std::promise<Result<Value>> ran;
    rig.pipeline->approve(token, "tester", [&](Result<Value> result) { ran.set_value(std::move(result)); });
    auto future = ran.get_future();
    REQUIRE(future.wait_for(testing::kAsyncTimeout) == std::future_status::ready);
    REQUIRE(future.get().has_value());
    rig.run(user_input("what did it print?", "s"));
    const auto seen = model->seen(model->calls() - 1).transcript;
    const Turn* result = result_for(seen, "call_1");
    REQUIRE(result != nullptr);
    INFO(result->text);
    CHECK(result->text.rfind("Approved by tester and run. ", 0) == 0);
    CHECK(result->text.find("approved-run") != std::string::npos);
  }
  SECTION("denied") {
    REQUIRE(rig.pipeline->deny(token, "tester").has_value());
    rig.run(user_input("was it run?", "s"));
    const auto seen = model->seen(model->calls() - 1).transcript;
    const Turn* result = result_for(seen, "call_1");
    REQUIRE(result != nullptr);
    CHECK(result->text == "Denied by tester: the action was not run.");
  }
}

TEST_CASE("a blocked native shell call's reason is that call's result in the model's next attempt",
          "[pipeline][conversation][offer]") {
  Rig rig(acting_skills(), {});
  auto model = install(rig);
  model->enqueue(shell_call("call_1", "rm -rf ~/scratch"));  // shell-guard blocks it; it never runs
  rig.run(user_input("free some disk space", "s"));
  REQUIRE(model->calls() >= 2);
  const auto seen = model->seen(1).transcript;  // kept: result_for points into it
  const Turn* result = result_for(seen, "call_1");
  REQUIRE(result != nullptr);
  INFO(result->text);
  CHECK(result->text.find("DESTRUCTIVE-RM") != std::string::npos);
  CHECK(result->text.find("The call was not run.") != std::string::npos);
}

}  // namespace passepartout

// What a real model is told, through the whole pipeline: the shell offered
// natively beside the tools, the action grammar, the identity and the
// skills' standing mandates in IDENTITY, the provider's real window in
// CONFIG, the session's own lines in LOGS, and a mandate that fails or
// stalls left out while the chat is answered.
#include <catch2/catch.hpp>

#include <mutex>
#include <string>
#include <vector>

#include "pipeline/signal.hpp"
#include "support/held_gate.hpp"
#include "unit/pipeline/pipeline_rig.hpp"

namespace passepartout {
namespace {

using testing::Rig;
using testing::SkillSpec;

// A provider that records each request and answers "noted", with a context window.
class Recorder final : public Provider {
 public:
  explicit Recorder(std::size_t window = 0) : window_(window) {}
  std::string_view name() const noexcept override { return "recorder"; }
  std::size_t context_window() const noexcept override { return window_; }
  void complete(const ProviderRequest& request, ProviderCompletion done) override {
    {
      std::lock_guard lock(mutex_);
      prompts_.push_back(request.system_prompt);
      tools_.push_back(request.tools);
    }
    done(ProviderReply::text("noted"));
  }
  std::string prompt(std::size_t i) const {
    std::lock_guard lock(mutex_);
    return prompts_.at(i);
  }
  Value tools(std::size_t i) const {
    std::lock_guard lock(mutex_);
    return tools_.at(i);
  }

 private:
  const std::size_t window_;
  mutable std::mutex mutex_;
  std::vector<std::string> prompts_;
  std::vector<Value> tools_;
};

std::vector<SkillSpec> acting_skills() {
  return {{"tool-permissions", 0, {}, true},
          {"policy", 0, {}, true},
          {"shell-guard", 0, {}, true},
          {"shell", 0, {}, true},
          {"file-tools", 0, {}, true}};
}

Value tool_named(const Value& tools, std::string_view name) {
  for (const Value& tool : tools.items()) {
    if (tool.at("NAME").text() == name) return tool;
  }
  return Value();
}

std::string section(const std::string& prompt, std::string_view heading, std::string_view next) {
  const std::size_t begin = prompt.find(heading);
  if (begin == std::string::npos) return {};
  const std::size_t end = next.empty() ? std::string::npos : prompt.find(next, begin);
  return prompt.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

}  // namespace

TEST_CASE("a real model is offered the shell natively and told the grammar, the identity and the mandates",
          "[pipeline][offer]") {
  Rig rig(acting_skills(), {}, 2,
          [](PipelineOptions& options) { options.identity = "You look after the build machine of team blue."; });
  auto recorder = std::make_shared<Recorder>(128000);
  rig.cascade.add(recorder);
  rig.run(user_input_signal("please list the files in my workspace using the shell", "s"));

  const Value tools = recorder->tools(0);
  const Value shell = tool_named(tools, "shell");
  REQUIRE(shell.is_list());
  CHECK(shell.at("PARAMETERS-JSON").text().find(R"("required":["cmd","explanation"])") != std::string::npos);
  CHECK(tool_named(tools, "read-file").is_list());
  CHECK(tool_named(tools, "tui").is_nil());  // the reply channel is the plain answer

  const std::string prompt = recorder->prompt(0);
  INFO(prompt);
  const std::string identity = section(prompt, "IDENTITY: ", "\n\nTOOLS:");
  CHECK(identity.rfind("IDENTITY: Agent\nYou look after the build machine of team blue.", 0) == 0);
  CHECK(identity.find("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD <cmd> :EXPLANATION <explanation>") !=
        std::string::npos);
  CHECK(identity.find("(:TYPE :REQUEST :PAYLOAD (:ACTION :MESSAGE :TEXT") != std::string::npos);
  CHECK(identity.find("MANDATE: every action you propose") != std::string::npos);  // the policy skill's
  CHECK(prompt.find("Context: 128000 tokens") != std::string::npos);
}

TEST_CASE("LOGS show the session's own lines, never the process's boot lines", "[pipeline][offer]") {
  Rig rig({{"policy", 0, {}, true}}, {});
  auto recorder = std::make_shared<Recorder>();
  rig.cascade.add(recorder);
  log_message(LogLevel::info, "loader",
              "loaded 'policy' from /srv/passepartout/plugins/libpolicy.so (sha256 "
              "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08)");
  rig.run(user_input_signal("hello", "s"));
  rig.run(user_input_signal("hello again", "s"));
  const std::string logs = section(recorder->prompt(1), "LOGS:\n", "");
  INFO(logs);
  CHECK(logs.find("/srv/passepartout") == std::string::npos);
  CHECK(logs.find("9f86d081") == std::string::npos);
  CHECK(logs.find("GATE [Perceive]") != std::string::npos);  // the session's own line about its first signal
}

TEST_CASE("a mandate that throws is left out and logged with its skill's name, and the chat is answered",
          "[pipeline][offer]") {
  Rig rig({{"mandate-skill", 10, "config: { mode: throw }\n"}}, {});
  auto recorder = std::make_shared<Recorder>();
  rig.cascade.add(recorder);
  const LoopReport report = rig.run(user_input_signal("hello", "s"));
  CHECK(report.stopped_by == "done");
  CHECK(recorder->prompt(0).find("MANDATE") == std::string::npos);
  CHECK(rig.logged("mandate-skill: its mandate failed, left out: the mandate failed on purpose"));
}

TEST_CASE("a mandate's line is in IDENTITY, and one that stalls past its budget is left out", "[pipeline][offer]") {
  SECTION("answering") {
    Rig rig({{"mandate-skill", 10, "config: { line: \"MANDATE: answer in French.\" }\n"}}, {});
    auto recorder = std::make_shared<Recorder>();
    rig.cascade.add(recorder);
    rig.run(user_input_signal("hello", "s"));
    CHECK(section(recorder->prompt(0), "IDENTITY: ", "\n\nTOOLS:").find("\nMANDATE: answer in French.\n") !=
          std::string::npos);
  }
  SECTION("stalling") {
    testing::HeldGate held;
    Rig rig({{"mandate-skill", 10,
              "gate_timeout: 100ms\nconfig: { mode: hold, line: \"MANDATE: too late.\", until-file: \"" +
                  held.release.string() + "\", spinning-file: \"" + held.calls.string() + "\" }\n"}},
            {});
    auto recorder = std::make_shared<Recorder>();
    rig.cascade.add(recorder);
    LoopReport report;
    CHECK(held.verify_when_late([&] { report = rig.run(user_input_signal("hello", "s")); }));
    CHECK(report.stopped_by == "done");
    CHECK(recorder->prompt(0).find("MANDATE: too late.") == std::string::npos);
    CHECK(rig.logged("mandate-skill: its mandate took longer than its budget of 100 ms; left out"));
  }
}

}  // namespace passepartout

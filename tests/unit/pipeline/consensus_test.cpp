// Consensus on actions, the parts that need no pipeline: the canonical form
// answers are compared in, the schema check an answer's arguments pass
// before they vote, the tally that decides a round, and the config reader.
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "pipeline/consensus.hpp"
#include "pipeline/consensus_yaml.hpp"
#include "support/sexp.hpp"
#include "value/json_bridge.hpp"

using namespace passepartout;
using passepartout::testing::sexp;

namespace {

Value json(std::string_view text) {
  auto value = json_to_value(text);
  REQUIRE(value);
  return *value;
}

Value tool_call(std::string_view args_json) {
  return Value::plist({{"TYPE", Value::keyword("REQUEST")},
                       {"TARGET", Value::keyword("TOOL")},
                       {"PAYLOAD", Value::plist({{"TOOL", Value::string("read-file")},
                                                 {"ARGS", json(args_json)},
                                                 {"EXPLANATION", Value::string("why")}})}});
}

constexpr std::string_view kShellSchema =
    R"({"type":"object","properties":{"cmd":{"type":"string","minLength":1},"explanation":{"type":"string"},)"
    R"("timeout":{"type":"integer","minimum":1,"maximum":600}},"required":["cmd","explanation"],)"
    R"("additionalProperties":false})";

}  // namespace

TEST_CASE("actions equal up to key order, number form, explanation and a command's surrounding blanks compare equal",
          "[consensus]") {
  const Value a = sexp("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"ls -la\" :EXPLANATION \"look\" :TIMEOUT 5))");
  const Value b = sexp("(:TARGET :SHELL :PAYLOAD (:TIMEOUT 5.0 :CMD \"  ls -la\n\" :EXPLANATION \"other words\"))");
  CHECK(canonical_action(a, true) == canonical_action(b, true));
  CHECK(canonical_action(a, true) == "SHELL {CMD=\"ls -la\",TIMEOUT=5}");

  // A different command, timeout or target is a different action.
  CHECK(canonical_action(a, true) !=
        canonical_action(sexp("(:TARGET :SHELL :PAYLOAD (:CMD \"ls -l\" :TIMEOUT 5))"), true));
  CHECK(canonical_action(a, true) !=
        canonical_action(sexp("(:TARGET :SHELL :PAYLOAD (:CMD \"ls -la\" :TIMEOUT 6))"), true));
  CHECK(canonical_action(a, true) !=
        canonical_action(sexp("(:TARGET :EMACS :PAYLOAD (:CMD \"ls -la\" :TIMEOUT 5))"), true));

  // A tool's arguments: key order and 1 against 1.0 do not matter; blanks
  // inside a string that is not a command do.
  CHECK(canonical_action(tool_call(R"({"path":"/tmp/a","lines":10})"), true) ==
        canonical_action(tool_call(R"({"lines":1e1,"path":"/tmp/a"})"), true));
  CHECK(canonical_action(tool_call(R"({"path":"/tmp/a"})"), true) !=
        canonical_action(tool_call(R"({"path":" /tmp/a"})"), true));
  CHECK(canonical_action(tool_call(R"({"path":"/tmp/a"})"), true).rfind("TOOL read-file ", 0) == 0);

  // Replies agree that nothing is to be done, whatever they say.
  CHECK(canonical_action(sexp("(:PAYLOAD (:ACTION :MESSAGE :TEXT \"hi\"))"), false) == "REPLY");
}

TEST_CASE("arguments are checked against the schema they were offered with, naming where they fail", "[consensus]") {
  CHECK(schema_mismatch(json(R"({"cmd":"ls","explanation":"look","timeout":30})"), kShellSchema).empty());
  CHECK(schema_mismatch(json(R"({"cmd":"ls","explanation":"look","timeout":30.0})"), kShellSchema).empty());
  CHECK(schema_mismatch(json(R"({"cmd":42,"explanation":"look"})"), kShellSchema) ==
        "/cmd: expected string, got integer");
  CHECK(schema_mismatch(json(R"({"cmd":"ls"})"), kShellSchema) == "/: \"explanation\" is required");
  CHECK(schema_mismatch(json(R"({"cmd":"ls","explanation":"x","sudo":true})"), kShellSchema) ==
        "/: \"sudo\" is not one of its properties");
  CHECK(schema_mismatch(json(R"({"cmd":"ls","explanation":"x","timeout":9999})"), kShellSchema) ==
        "/timeout: more than 600");
  CHECK(schema_mismatch(json(R"({"cmd":"ls","explanation":"x","timeout":2.5})"), kShellSchema) ==
        "/timeout: expected integer, got number");
  CHECK(schema_mismatch(json(R"({"cmd":"","explanation":"x"})"), kShellSchema) == "/cmd: shorter than 1 characters");

  constexpr std::string_view kList =
      R"({"type":"object","properties":{"paths":{"type":"array","items":{"type":"string","pattern":"^/tmp/"},"maxItems":2},)"
      R"("mode":{"enum":["read","write"]},"n":{"anyOf":[{"type":"integer"},{"type":"string"}]}}})";
  CHECK(schema_mismatch(json(R"({"paths":["/tmp/a","/tmp/b"],"mode":"read","n":"3"})"), kList).empty());
  CHECK(schema_mismatch(json(R"({"paths":["/tmp/a","/etc/passwd"]})"), kList) ==
        "/paths/1: does not match the pattern ^/tmp/");
  CHECK(schema_mismatch(json(R"({"paths":["/tmp/a","/tmp/b","/tmp/c"]})"), kList) == "/paths: more than 2 items");
  CHECK(schema_mismatch(json(R"({"mode":"delete"})"), kList) == "/mode: not one of [\"read\",\"write\"]");
  CHECK(schema_mismatch(json(R"({"n":1.5})"), kList) == "/n: matches none of anyOf");

  // The JSON bridge reads false, null, {} and [] as NIL: a boolean's false passes.
  CHECK(schema_mismatch(json(R"({"flag":false})"), R"({"properties":{"flag":{"type":"boolean"}}})").empty());
  // No schema, or one that is not JSON, checks nothing.
  CHECK(schema_mismatch(json(R"({"anything":1})"), "").empty());
  CHECK(schema_mismatch(json(R"({"anything":1})"), "{not json").empty());
}

TEST_CASE("a quorum round is agreed at the quorum and disagreed once the quorum cannot be met", "[consensus]") {
  ConsensusConfig rule;
  rule.providers = {"a", "b", "c"};
  rule.quorum = 2;
  ConsensusTally tally(rule);
  CHECK(tally.state(3) == ConsensusTally::State::open);
  tally.vote("SHELL ls", 0, "a");
  CHECK(tally.state(2) == ConsensusTally::State::open);
  CHECK(tally.needed() == 1);
  tally.vote("SHELL rm", 1, "b");
  CHECK(tally.state(1) == ConsensusTally::State::open);  // c may still side with either
  tally.vote("SHELL ls", 2, "c");
  CHECK(tally.state(0) == ConsensusTally::State::agreed);
  REQUIRE(tally.leader() != nullptr);
  CHECK(tally.leader()->key == "SHELL ls");
  CHECK(tally.leader()->providers == std::vector<std::string>{"a", "c"});
  CHECK(tally.leader()->answer == 0);

  ConsensusTally split(rule);
  split.vote("SHELL ls", 0, "a");
  split.discard();  // b's answer red-flagged
  CHECK(split.state(1) == ConsensusTally::State::open);
  split.vote("SHELL rm", 2, "c");
  CHECK(split.state(0) == ConsensusTally::State::disagreed);
  CHECK(split.votes() == 2);
  CHECK(split.discarded() == 1);
}

TEST_CASE("first-to-ahead-by-k is agreed as soon as one action leads by k and disagreed when no action can",
          "[consensus]") {
  ConsensusConfig rule;
  rule.ahead_by = 2;
  rule.max_calls = 5;
  ConsensusTally tally(rule);
  CHECK(tally.needed() == 2);
  tally.vote("x", 0, "a");
  CHECK(tally.needed() == 1);
  tally.vote("y", 1, "b");
  CHECK(tally.needed() == 2);  // tied: two more for either
  CHECK(tally.state(3) == ConsensusTally::State::open);
  tally.vote("x", 2, "a");
  CHECK(tally.state(2) == ConsensusTally::State::open);  // ahead by 1
  tally.vote("x", 3, "b");
  CHECK(tally.state(1) == ConsensusTally::State::agreed);  // 3 to 1

  ConsensusTally stuck(rule);
  stuck.vote("x", 0, "a");
  stuck.vote("y", 1, "b");
  stuck.vote("z", 2, "c");
  stuck.vote("y", 3, "a");
  // y leads by 1 with one call left: it may still get 2 ahead ...
  CHECK(stuck.state(1) == ConsensusTally::State::open);
  stuck.vote("x", 4, "b");
  // ... but not with none.
  CHECK(stuck.state(0) == ConsensusTally::State::disagreed);
}

TEST_CASE("the consensus config is read with a majority by default and every mistake located", "[consensus][config]") {
  auto read = [](std::string_view text, ConsensusConfig& out, std::vector<std::string>& origins) {
    YamlProblems problems("p.yaml");
    read_consensus(YAML::Load(std::string(text))["consensus"], problems, out, origins);
    return problems.message();
  };
  ConsensusConfig rule;
  std::vector<std::string> origins;
  CHECK(read("consensus:\n  providers: [a, b, c]\n", rule, origins).empty());
  CHECK(rule.quorum == 2);
  CHECK(rule.when == ConsensusConfig::When::acting);
  CHECK(origins == std::vector<std::string>{"p.yaml:2:15", "p.yaml:2:18", "p.yaml:2:21"});
  CHECK(rule.describe() == "quorum 2 of a, b, c");

  ConsensusConfig ahead;
  CHECK(read("consensus:\n  ahead_by: 2\n  when: always\n", ahead, origins).empty());
  CHECK(ahead.max_calls == 8);
  CHECK(ahead.when == ConsensusConfig::When::always);
  CHECK(ahead.describe() == "ahead by 2 (at most 8 calls) of the cascade's providers");

  ConsensusConfig bad;
  const std::string problems =
      read("consensus:\n  providers: [a, a]\n  quorum: 1\n  k: 2\n  when: sometimes\n", bad, origins);
  CHECK(problems.find("p.yaml:2:18: providers: 'a' is listed twice") != std::string::npos);
  CHECK(problems.find("p.yaml:3:11: quorum: expected a whole number of answers that must agree, at least 2") !=
        std::string::npos);
  CHECK(problems.find("p.yaml:4:3: unknown key 'k' in consensus; did you mean 'ahead_by'?") != std::string::npos);
  CHECK(problems.find("p.yaml:5:9: when: expected acting") != std::string::npos);

  ConsensusConfig both;
  CHECK(read("consensus:\n  quorum: 2\n  ahead_by: 2\n", both, origins).find("give quorum: or ahead_by:, not both") !=
        std::string::npos);
  ConsensusConfig too_many;
  CHECK(read("consensus:\n  providers: [a, b]\n  quorum: 3\n", too_many, origins)
            .find("p.yaml:3:3: consensus: quorum: 3 is more than the 2 providers listed") != std::string::npos);
}

// Tests for a call's arguments on their way back to a server: names and
// types from the tool's schema, not from the plist the gates saw.
#include "mcp/arguments.hpp"

#include <catch2/catch.hpp>

#include "value/json_bridge.hpp"

using namespace passepartout;
using namespace passepartout::mcp;

namespace {

// What the model sent, as the gates see it.
Value as_gates_see(std::string_view json) { return *json_to_value(json); }

}  // namespace

TEST_CASE("arguments: the schema's names and types come back after the plist round trip", "[mcp]") {
  const std::string schema = R"({"type":"object","properties":{
      "maxResults":{"type":"integer"},"recursive":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"}},
      "filter":{"type":"object","properties":{"minSize":{"type":"integer"},"hidden":{"type":"boolean"}}},
      "note":{"type":["string","null"]},"path":{"type":"string"}}})";
  const Value args = as_gates_see(
      R"({"maxResults":5,"recursive":false,"tags":[],"filter":{"minSize":10,"hidden":false},"note":null,"path":"a b"})");
  CHECK(
      arguments_json(args, schema) ==
      R"({"filter":{"hidden":false,"minSize":10},"maxResults":5,"note":null,"path":"a b","recursive":false,"tags":[]})");
}

TEST_CASE("arguments: without a schema the plain rules apply, and an explanation stays the action's", "[mcp]") {
  CHECK(arguments_json(as_gates_see(R"({"Message":"hi","explanation":"why"})"), "") == R"({"message":"hi"})");
  CHECK(arguments_json(as_gates_see(R"({"explanation":"x"})"), R"({"properties":{"explanation":{"type":"string"}}})") ==
        R"({"explanation":"x"})");
  CHECK(arguments_json(Value(), "{}") == "{}");
  CHECK(arguments_json(as_gates_see(R"({"flag":true,"n":1.5,"list":[1,"two"]})"), "not json") ==
        R"({"flag":true,"list":[1,"two"],"n":1.5})");
}

TEST_CASE("arguments: a rewritten value and a keyword written by a gate come out as JSON", "[mcp]") {
  const Value args = Value::plist({{"MODE", Value::keyword("FAST")}, {"COUNT", Value::integer(3)}});
  CHECK(arguments_json(args, R"({"properties":{"mode":{"type":"string"},"count":{"type":"integer"}}})") ==
        R"({"count":3,"mode":"fast"})");
}

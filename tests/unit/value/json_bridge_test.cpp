// Tests for the JSON bridge: JSON objects as keyword plists (the Lisp
// json-alist-to-plist cases), limits and errors, and Values out as JSON.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "support/sexp.hpp"
#include "value/json_bridge.hpp"
#include "value/json_bridge_detail.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

using passepartout::ErrorCode;
using passepartout::json_to_value;
using passepartout::to_sexp;
using passepartout::Value;
using passepartout::value_to_json;

namespace {

std::string json_as_sexp(std::string_view json) {
  auto result = json_to_value(json);
  INFO("json: " << json);
  if (!result) INFO("error: " << result.error().message);
  REQUIRE(result.has_value());
  return to_sexp(*result);
}

std::string json_error(std::string_view json, std::size_t max_depth = 256) {
  auto result = json_to_value(json, max_depth);
  INFO("json: " << json);
  REQUIRE_FALSE(result.has_value());
  return result.error().message;
}

using passepartout::testing::sexp;

}  // namespace

TEST_CASE("json object becomes a plist with upper-case keyword keys", "[value][json]") {
  // test-json-alist-to-plist-simple
  CHECK(json_as_sexp(R"({"action":"shell","cmd":"echo hello"})") == R"((:ACTION "shell" :CMD "echo hello"))");
}

TEST_CASE("json nested object becomes a nested plist", "[value][json]") {
  // test-json-alist-to-plist-nested
  const auto result = json_to_value(R"({"tool":"write","args":{"filepath":"/tmp/a.txt","content":"hi"}})");
  REQUIRE(result.has_value());
  CHECK(result->path({"args", "filepath"}) == Value::string("/tmp/a.txt"));
  CHECK(result->path({":ARGS", ":CONTENT"}) == Value::string("hi"));
  CHECK(to_sexp(*result) == R"((:TOOL "write" :ARGS (:FILEPATH "/tmp/a.txt" :CONTENT "hi")))");
}

TEST_CASE("json array of strings passes through as a list", "[value][json]") {
  // test-json-alist-to-plist-array-passthrough
  CHECK(json_as_sexp(R"({"names":["alice","bob"]})") == R"((:NAMES ("alice" "bob")))");
}

TEST_CASE("json null, false and empty structures become NIL", "[value][json]") {
  // test-json-alist-to-plist-null
  CHECK(json_as_sexp("null") == "NIL");
  CHECK(json_as_sexp("false") == "NIL");
  CHECK(json_as_sexp("{}") == "NIL");
  CHECK(json_as_sexp("[]") == "NIL");
  CHECK(json_as_sexp(R"({"a":null,"b":{},"c":[]})") == "(:A NIL :B NIL :C NIL)");
}

TEST_CASE("json empty object and array at the top level read as NIL", "[value][json][fuzz]") {
  // Found by fuzzing: closing a structure with no elements handed an empty,
  // null-data span to memset (undefined behaviour under UBSan).
  CHECK(json_to_value("{}")->is_nil());
  CHECK(json_to_value("[]")->is_nil());
  CHECK(json_as_sexp(R"({"a":{},"b":[{}]})") == "(:A NIL :B (NIL))");
}

TEST_CASE("json scalars pass through", "[value][json]") {
  // test-json-alist-to-plist-scalar
  CHECK(*json_to_value("42") == Value::integer(42));
  CHECK(*json_to_value("true") == Value::t());
  CHECK(*json_to_value("-7") == Value::integer(-7));
  CHECK(*json_to_value("2.5") == Value::real(2.5));
  CHECK(*json_to_value("1e3") == Value::real(1000.0));
  CHECK(*json_to_value(R"("text")") == Value::string("text"));
  CHECK(*json_to_value("  \n 42 \t") == Value::integer(42));
}

TEST_CASE("json integers beyond int64 become floats", "[value][json]") {
  CHECK(*json_to_value("9223372036854775807") == Value::integer(INT64_MAX));
  CHECK(*json_to_value("-9223372036854775808") == Value::integer(INT64_MIN));
  CHECK(*json_to_value("9223372036854775808") == Value::real(9223372036854775808.0));
  CHECK(*json_to_value("18446744073709551615") == Value::real(18446744073709551615.0));
}

TEST_CASE("json array of objects becomes a list of plists", "[value][json]") {
  CHECK(json_as_sexp(R"([{"name":"a","size":1},{"name":"b","size":2.5}])") ==
        R"(((:NAME "a" :SIZE 1) (:NAME "b" :SIZE 2.5)))");
  CHECK(json_as_sexp(R"({"calls":[{"tool":"ls","args":{}}]})") == R"((:CALLS ((:TOOL "ls" :ARGS NIL))))");
}

TEST_CASE("json keeps object keys in document order", "[value][json]") {
  CHECK(json_as_sexp(R"({"z":1,"a":2,"m":3})") == "(:Z 1 :A 2 :M 3)");
}

TEST_CASE("json keys with mixed case and spaces become keywords read back alike", "[value][json]") {
  const std::string printed = json_as_sexp(R"({"sessionId":"s1","two words":true})");
  CHECK(printed == R"((:SESSIONID "s1" :|TWO WORDS| T))");
  CHECK(sexp(printed).at("sessionid") == Value::string("s1"));
}

TEST_CASE("json keys keep leading colons so writing them back gives the same keys", "[value][json][fuzz]") {
  // Found by fuzzing: stripping one ':' per pass meant JSON -> Value -> JSON
  // lost a colon every round trip.
  auto result = json_to_value(R"({"::a":1,":b":2})");
  REQUIRE(result.has_value());
  CHECK(to_sexp(*result) == "(:|::A| 1 :|:B| 2)");
  CHECK(value_to_json(*result) == R"({"::a":1,":b":2})");
  CHECK(value_to_json(*json_to_value(value_to_json(*result))) == R"({"::a":1,":b":2})");
}

TEST_CASE("json strings keep non-ASCII text and decode escapes", "[value][json]") {
  CHECK(*json_to_value(R"("naïve café 😀")") == Value::string("naïve café 😀"));
  CHECK(*json_to_value(R"("\u00e9\ud83d\ude00 \"q\" \\ \n")") == Value::string("é😀 \"q\" \\ \n"));
}

TEST_CASE("json syntax errors name the byte offset", "[value][json]") {
  CHECK(json_error("tru,") == "byte 3: invalid JSON: syntax error while parsing value - invalid literal");
  CHECK(json_error(R"({"a":1,})") ==
        "byte 7: invalid JSON: syntax error while parsing object key - unexpected '}'; expected string literal");
  CHECK(json_error("") ==
        "byte 0: invalid JSON: syntax error while parsing value - unexpected end of input; expected '[', '{', or a "
        "literal");
  CHECK(json_error("[1,2") ==
        "byte 4: invalid JSON: syntax error while parsing array - unexpected end of input; expected ']'");
  CHECK(json_error("12 13") ==
        "byte 4: invalid JSON: syntax error while parsing value - unexpected number literal; expected end of input");
  auto result = json_to_value("{");
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().code == ErrorCode::invalid_input);
}

TEST_CASE("json rejects invalid UTF-8 and lone surrogates", "[value][json]") {
  // The parser's echo of the bytes it read is left out: messages stay valid UTF-8.
  CHECK(json_error("\"a\xFF\"") ==
        "byte 2: invalid JSON: syntax error while parsing value - invalid string: ill-formed UTF-8 byte");
  CHECK(json_error(R"("\ud800")") ==
        "byte 7: invalid JSON: syntax error while parsing value - invalid string: surrogate U+D800..U+DBFF "
        "must be followed by U+DC00..U+DFFF");
}

TEST_CASE("json rejects numbers outside the double range", "[value][json]") {
  CHECK(json_error("1e400") == "byte 4: invalid JSON: number overflow parsing '1e400'");
}

TEST_CASE("json rejects nesting deeper than the limit", "[value][json]") {
  CHECK(json_error("[[[1]]]", 2) == "byte 2: nesting deeper than 2");
  CHECK(json_error(R"({"a":{"b":{"c":1}}})", 2) == "byte 10: nesting deeper than 2");
  CHECK(json_error(R"({"[[[":{"b":[1]}})", 2) == "byte 12: nesting deeper than 2");
  CHECK(json_to_value("[[1]]", 2).has_value());
  const std::string deep = std::string(257, '[') + std::string(257, ']');
  auto result = json_to_value(deep);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().code == ErrorCode::limit_exceeded);
  CHECK(result.error().message == "byte 256: nesting deeper than 256");
}

TEST_CASE("value_to_json writes a plist as an object with lower-case keys", "[value][json]") {
  CHECK(value_to_json(sexp(R"((:SESSION-ID "s-1" :DEPTH 0 :OK T :NONE NIL))")) ==
        R"({"session-id":"s-1","depth":0,"ok":true,"none":null})");
}

TEST_CASE("value_to_json writes keywords as lower-case strings and symbols by name", "[value][json]") {
  CHECK(value_to_json(sexp("(:STATUS :ACTED)")) == R"({"status":"acted"})");
  CHECK(value_to_json(Value::keyword("EVENT")) == R"("event")");
  CHECK(value_to_json(Value::symbol("FOO")) == R"("FOO")");
  CHECK(value_to_json(Value::symbol("foo")) == R"("foo")");
}

TEST_CASE("value_to_json writes lists that are not plists as arrays", "[value][json]") {
  CHECK(value_to_json(sexp("(1 2 3)")) == "[1,2,3]");
  CHECK(value_to_json(sexp("(:A 1 :B)")) == R"(["a",1,"b"])");
  CHECK(value_to_json(sexp("(:A 1 \"b\" 2)")) == R"(["a",1,"b",2])");
  CHECK(value_to_json(sexp("((:NAME \"a\") (:NAME \"b\"))")) == R"([{"name":"a"},{"name":"b"}])");
  CHECK(value_to_json(sexp("(:X (1 2 3))")) == R"({"x":[1,2,3]})");
}

TEST_CASE("value_to_json writes atoms as JSON scalars", "[value][json]") {
  CHECK(value_to_json(Value()) == "null");
  CHECK(value_to_json(Value::t()) == "true");
  CHECK(value_to_json(Value::integer(-3)) == "-3");
  CHECK(value_to_json(Value::real(2.5)) == "2.5");
  CHECK(value_to_json(Value::real(std::numeric_limits<double>::quiet_NaN())) == "null");
  CHECK(value_to_json(Value::string("naïve \"café\"\n")) == R"("naïve \"café\"\n")");
}

TEST_CASE("value_to_json keeps the first of repeated plist keys", "[value][json]") {
  CHECK(value_to_json(sexp("(:A 1 :B 2 :A 3)")) == R"({"a":1,"b":2})");
}

TEST_CASE("json round-trips through a Value for a tool call", "[value][json]") {
  const std::string json = R"({"tool":"shell","args":{"cmd":"ls -la","timeout":30},"tags":["a","b"],"ok":true})";
  CHECK(value_to_json(*json_to_value(json)) == json);
}

TEST_CASE("json documents convert like json text, with sorted keys", "[value][json]") {
  const nlohmann::json document = nlohmann::json::parse(R"({"b":[1,{"c":null}],"a":{"x":"y"},"e":{}})");
  CHECK(to_sexp(passepartout::json_dom_to_value(document)) == R"((:A (:X "y") :B (1 (:C NIL)) :E NIL))");
  CHECK(passepartout::json_dom_to_value(nlohmann::json(42)) == Value::integer(42));
  CHECK(passepartout::json_dom_to_value(nlohmann::json::array()).is_nil());
  CHECK(passepartout::value_to_json_dom(sexp("(:A (1 2))")).dump() == R"({"a":[1,2]})");
}

TEST_CASE("json documents name keys in snake case when asked, at every depth, and hold no NaN", "[value][json]") {
  using passepartout::JsonKeys;
  const Value value = sexp("(:SESSION-ID \"s-1\" :GATE-TRACE ((:SKILL-NAME :SHELL-GUARD)) :SESSION-ID \"later\")");
  CHECK(passepartout::value_to_json_dom(value).dump() ==
        R"({"session-id":"s-1","gate-trace":[{"skill-name":"shell-guard"}]})");
  CHECK(passepartout::value_to_json_dom(value, JsonKeys::snake_case).dump() ==
        R"({"session_id":"s-1","gate_trace":[{"skill_name":"shell-guard"}]})");
  const auto not_a_number = passepartout::value_to_json_dom(Value::real(std::numeric_limits<double>::quiet_NaN()));
  CHECK(not_a_number.is_null());
  CHECK(passepartout::value_to_json_dom(Value::real(std::numeric_limits<double>::infinity())).is_null());
}

// Tests for the JSON-RPC messages and the reading of tools and results: what
// a server sends is untrusted, so each malformed shape gets its own error.
#include "mcp/json_rpc.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "mcp/tools.hpp"

using namespace passepartout;
using namespace passepartout::mcp;

TEST_CASE("json-rpc: responses, errors, requests and notifications are told apart", "[mcp]") {
  auto response = parse_message(R"({"jsonrpc":"2.0","id":7,"result":{"ok":true}})");
  REQUIRE(response.has_value());
  CHECK(response->kind == RpcMessage::Kind::response);
  CHECK(response->id == 7);
  CHECK(response->result_json == R"({"ok":true})");

  auto error = parse_message(R"({"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"bad"}})");
  REQUIRE(error.has_value());
  CHECK(error->kind == RpcMessage::Kind::error);
  CHECK(error->error_code == -32602);
  CHECK(error->error_message == "bad");

  auto request = parse_message(R"({"jsonrpc":"2.0","id":"abc","method":"ping"})");
  REQUIRE(request.has_value());
  CHECK(request->kind == RpcMessage::Kind::request);
  CHECK(request->id_json == R"("abc")");
  CHECK(request->params_json == "{}");
  CHECK(result_text(request->id_json, "{}") == R"({"id":"abc","jsonrpc":"2.0","result":{}})");

  auto notification = parse_message(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})");
  REQUIRE(notification.has_value());
  CHECK(notification->kind == RpcMessage::Kind::notification);
  CHECK(notification->method == "notifications/tools/list_changed");
}

TEST_CASE("json-rpc: each malformed message is refused with what was wrong", "[mcp]") {
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "not JSON"},
      {"[1,2]", "not a JSON-RPC message"},
      {R"({"id":1,"result":{}})", "not JSON-RPC 2.0"},
      {R"({"jsonrpc":"1.0","id":1,"result":{}})", "not JSON-RPC 2.0"},
      {R"({"jsonrpc":"2.0","method":7})", "\"method\" is not a name"},
      {R"({"jsonrpc":"2.0","method":""})", "\"method\" is not a name"},
      {R"({"jsonrpc":"2.0","method":"x","params":3})", "neither an object nor an array"},
      {R"({"jsonrpc":"2.0","method":"x","id":1.5})", "neither a string nor an integer"},
      {R"({"jsonrpc":"2.0","id":"s","result":{}})", "without the integer \"id\""},
      {R"({"jsonrpc":"2.0","id":1})", "neither or both"},
      {R"({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1}})", "neither or both"},
      {R"({"jsonrpc":"2.0","id":1,"result":[]})", "\"result\" is not an object"},
      {R"({"jsonrpc":"2.0","id":1,"error":{"message":"x"}})", "without an integer \"code\""},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    auto parsed = parse_message(text);
    REQUIRE_FALSE(parsed.has_value());
    CHECK_THAT(parsed.error().message, Catch::Contains(expected));
    CHECK(parsed.error().code == ErrorCode::invalid_input);
  }
}

TEST_CASE("json-rpc: what the client sends is compact JSON, one message a line", "[mcp]") {
  CHECK(request_text(3, "tools/list", R"({"cursor":"c"})") ==
        R"({"id":3,"jsonrpc":"2.0","method":"tools/list","params":{"cursor":"c"}})");
  CHECK(notification_text("notifications/initialized", "{}") ==
        R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  CHECK(error_text("5", -32601, "no") == R"({"error":{"code":-32601,"message":"no"},"id":5,"jsonrpc":"2.0"})");
  // A newline inside a string stays escaped: the line protocol holds.
  CHECK(request_text(1, "x", R"({"a":"line\nbreak"})").find('\n') == std::string::npos);
}

TEST_CASE("canonical json: key order and whitespace do not change the text", "[mcp]") {
  auto a = canonical_json(R"({"b": 1, "a": {"d": [1, 2], "c": null}})");
  auto b = canonical_json(R"({"a":{"c":null,"d":[1,2]},"b":1})");
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(*a == *b);
  CHECK(*a == R"({"a":{"c":null,"d":[1,2]},"b":1})");
  CHECK_FALSE(canonical_json("{").has_value());
}

TEST_CASE("tools page: definitions, the cursor, and a digest that sees every shown field", "[mcp]") {
  const std::string page = R"({"tools":[
    {"name":"read_file","description":"Reads a file","inputSchema":{"type":"object"},
     "annotations":{"readOnlyHint":true},"_meta":{"volatile":1}}],"nextCursor":"next"})";
  auto parsed = parse_tools_page(page);
  REQUIRE(parsed.has_value());
  REQUIRE(parsed->tools.size() == 1);
  const ToolDefinition& tool = parsed->tools[0];
  CHECK(tool.name == "read_file");
  CHECK(tool.description == "Reads a file");
  CHECK(tool.input_schema_json == R"({"type":"object"})");
  CHECK(tool.annotations_json == R"({"readOnlyHint":true})");
  CHECK(tool.output_schema_json.empty());
  CHECK(parsed->next_cursor == "next");
  CHECK(tool.canonical_json ==
        R"({"annotations":{"readOnlyHint":true},"description":"Reads a file","inputSchema":{"type":"object"},)"
        R"("name":"read_file"})");

  auto digest_of = [](const std::string& text) { return parse_tools_page(text)->tools.at(0).digest; };
  const std::string base = R"({"tools":[{"name":"t","description":"d","inputSchema":{"type":"object"}}]})";
  const std::string reordered = R"({"tools":[{"inputSchema":{"type":"object"},"description":"d","name":"t"}]})";
  const std::string described = R"({"tools":[{"name":"t","description":"d!","inputSchema":{"type":"object"}}]})";
  const std::string schema = R"({"tools":[{"name":"t","description":"d","inputSchema":{"type":"array"}}]})";
  const std::string annotated =
      R"({"tools":[{"name":"t","description":"d","inputSchema":{"type":"object"},"annotations":{"x":1}}]})";
  const std::string meta = R"({"tools":[{"name":"t","description":"d","inputSchema":{"type":"object"},"_meta":{}}]})";
  CHECK(digest_of(base) == digest_of(reordered));
  CHECK(digest_of(base) == digest_of(meta));
  CHECK(digest_of(base) != digest_of(described));
  CHECK(digest_of(base) != digest_of(schema));
  CHECK(digest_of(base) != digest_of(annotated));
}

TEST_CASE("tools page: malformed tools are refused, naming the tool", "[mcp]") {
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "without a \"tools\" array"},
      {R"({"tools":[3]})", "tool 1 is not an object"},
      {R"({"tools":[{"inputSchema":{}}]})", "tool 1 has no name"},
      {R"({"tools":[{"name":"a b","inputSchema":{}}]})", "tool 'a b': a name must be 1 to 128"},
      {R"({"tools":[{"name":"ok"}]})", "tool 'ok': \"inputSchema\" is missing or not an object"},
      {R"({"tools":[{"name":"ok","inputSchema":{},"description":5}]})", "tool 'ok': \"description\" is not a string"},
      {R"({"tools":[{"name":"ok","inputSchema":{},"outputSchema":"x"}]})", "\"outputSchema\" is not an object"},
      {R"({"tools":[],"nextCursor":5})", "\"nextCursor\" is not a string"},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    auto parsed = parse_tools_page(text);
    REQUIRE_FALSE(parsed.has_value());
    CHECK_THAT(parsed.error().message, Catch::Contains(expected));
  }
}

TEST_CASE("tool result: text as text, the rest described, errors flagged", "[mcp]") {
  auto result = render_tool_result(R"({"content":[
      {"type":"text","text":"hello"},
      {"type":"image","mimeType":"image/png","data":"AAAA"},
      {"type":"audio","mimeType":"audio/wav","data":"AAAAAA=="},
      {"type":"resource_link","uri":"file:///a.txt","name":"a","mimeType":"text/plain"},
      {"type":"resource","resource":{"uri":"mem://x","mimeType":"text/plain","text":"12345"}},
      {"type":"hologram"}]})",
                                   1000);
  REQUIRE(result.has_value());
  CHECK_FALSE(result->is_error);
  CHECK(result->text ==
        "hello\n[image: image/png, 3 bytes]\n[audio: audio/wav, 4 bytes]\n"
        "[resource link: file:///a.txt (a), text/plain]\n[resource: mem://x, text/plain, 5 bytes of text]\n"
        "[content of type 'hologram']");

  auto structured = render_tool_result(R"({"content":[],"structuredContent":{"temperature":21}})", 1000);
  REQUIRE(structured.has_value());
  CHECK(structured->text == R"({"temperature":21})");
  // Sent as text too (as the protocol recommends): shown once.
  auto both = render_tool_result(
      R"({"content":[{"type":"text","text":"{\"temperature\":21}"}],"structuredContent":{"temperature":21}})", 1000);
  CHECK(both->text == R"({"temperature":21})");

  auto failed = render_tool_result(R"({"content":[{"type":"text","text":"boom"}],"isError":true})", 1000);
  REQUIRE(failed.has_value());
  CHECK(failed->is_error);

  CHECK_FALSE(render_tool_result(R"({"isError":false})", 1000).has_value());
  CHECK_FALSE(render_tool_result("[]", 1000).has_value());
}

TEST_CASE("tool result: a long result is cut on a UTF-8 boundary with a note", "[mcp]") {
  // "é" is two bytes: a cut at 5 bytes would split the third one.
  auto result = render_tool_result(R"({"content":[{"type":"text","text":"ééééé"}]})", 5);
  REQUIRE(result.has_value());
  CHECK(result->text == "éé\n[... 6 more bytes left out]");
}

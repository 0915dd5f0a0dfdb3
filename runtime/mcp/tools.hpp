// The two things a Model Context Protocol server hands back that matter to
// the gates and the model: its tools' definitions (a tools/list page) and a
// tool call's result. Pure functions over the server's JSON text, which is
// untrusted: every field is checked, nothing is evaluated.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace passepartout::mcp {

// One tool as the server defined it. The JSON texts are the server's, compact.
struct ToolDefinition {
  std::string name;
  std::string title;        // "" when absent
  std::string description;  // "" when absent
  std::string input_schema_json;
  std::string output_schema_json;  // "" when absent
  std::string annotations_json;    // "" when absent
  // The whole definition as canonical JSON (keys sorted, no whitespace), and
  // its SHA-256 in hex: what a pin records. Any change a server makes to what
  // the model is shown (a word of the description, a schema, an annotation)
  // changes the digest.
  std::string canonical_json;
  std::string digest;
};

// One page of tools/list: its tools and the cursor of the next page ("" at the end).
struct ToolsPage {
  std::vector<ToolDefinition> tools;
  std::string next_cursor;
};

// Reads a tools/list result. A tool without a name, with a name that is not
// 1 to 128 of [A-Za-z0-9_.-] (the protocol's rule), or whose inputSchema is
// not an object, is an error naming it.
Result<ToolsPage> parse_tools_page(std::string_view result_json);

// A tool call's result as the model should see it.
struct ToolResult {
  bool is_error = false;  // the server's isError: the tool failed
  // The content: text as text, structured content as JSON, images, audio and
  // resources described (type, size, URI) rather than inlined; at most
  // max_bytes, cut on a UTF-8 boundary with a note.
  std::string text;
  std::string raw_json;  // the whole result, compact, for `mcp probe`
};

// Renders a tools/call result. An answer without a content array (nor
// structuredContent) is an error.
Result<ToolResult> render_tool_result(std::string_view result_json, std::size_t max_bytes);

}  // namespace passepartout::mcp

// Test support for the drivers: decode a response body whole, byte by byte
// and split in two at every offset, and check every way gives the same reply.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.hpp"
#include "providers/driver.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout::testing {

struct Decoded {
  ProviderReply reply;
  std::vector<std::string> pieces;  // the text deltas, in order
  std::string text() const {
    std::string all;
    for (const auto& piece : pieces) all += piece;
    return all;
  }
};

inline Decoded decode_chunks(const Driver& driver, bool stream, const std::vector<std::string_view>& chunks, int status,
                             const HttpHeaders& headers) {
  auto decoder = driver.decoder(stream);
  Decoded decoded;
  const ReplyDecoder::OnText on_text = [&](std::string_view piece) { decoded.pieces.emplace_back(piece); };
  for (std::string_view chunk : chunks) decoder->feed(chunk, on_text);
  decoded.reply = decoder->finish(status, headers);
  return decoded;
}

inline void require_same(const Decoded& a, const Decoded& b) {
  REQUIRE(a.pieces == b.pieces);
  REQUIRE(a.reply.kind == b.reply.kind);
  REQUIRE(a.reply.content == b.reply.content);
  REQUIRE(a.reply.error == b.reply.error);
  REQUIRE(a.reply.failure == b.reply.failure);
  REQUIRE(to_sexp(a.reply.tool_calls) == to_sexp(b.reply.tool_calls));
  REQUIRE(a.reply.usage.input == b.reply.usage.input);
  REQUIRE(a.reply.usage.output == b.reply.usage.output);
}

// Decodes `body` at once, byte by byte, and split in two at every offset;
// REQUIREs the same reply and text deltas every time, each delta valid UTF-8.
inline Decoded decode(const Driver& driver, bool stream, std::string_view body, int status = 200,
                      const HttpHeaders& headers = {}) {
  const Decoded whole = decode_chunks(driver, stream, {body}, status, headers);
  for (const auto& piece : whole.pieces) REQUIRE(is_valid_utf8(piece));
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < body.size(); ++i) bytes.push_back(body.substr(i, 1));
  require_same(decode_chunks(driver, stream, bytes, status, headers), whole);
  for (std::size_t cut = 1; cut < body.size(); ++cut) {
    INFO("split at " << cut);
    require_same(decode_chunks(driver, stream, {body.substr(0, cut), body.substr(cut)}, status, headers), whole);
  }
  return whole;
}

// The tool descriptors most tests offer: read_file(path).
inline Value read_file_tool() {
  return Value::list({Value::plist(
      {{"NAME", Value::string("read_file")},
       {"DESCRIPTION", Value::string("Reads a file")},
       {"PARAMETERS",
        Value::plist({{"TYPE", Value::string("object")},
                      {"PROPERTIES", Value::plist({{"PATH", Value::plist({{"TYPE", Value::string("string")}})}})},
                      {"REQUIRED", Value::list({Value::string("path")})}})}})});
}

// A request whose transcript holds a question, a tool call, its result and
// the model's answer, before the current prompt.
inline ProviderRequest conversation_request() {
  ProviderRequest request;
  request.system_prompt = "You are the Probabilistic engine.";
  request.prompt = "And now?";
  request.tools = read_file_tool();
  Turn question{Turn::Role::user, "Read /tmp/a", {}, {}, {}};
  Turn call{Turn::Role::assistant, "", {{"call_1", "read_file", "{\"path\":\"/tmp/a\"}"}}, {}, {}};
  Turn result{Turn::Role::tool, "hello", {}, "call_1", "read_file"};
  Turn answer{Turn::Role::assistant, "It says hello.", {}, {}, {}};
  request.transcript = {question, call, result, answer};
  return request;
}

inline EndpointSettings settings_for(std::string name, std::string base_url, std::string key) {
  EndpointSettings settings;
  settings.name = std::move(name);
  settings.base_url = std::move(base_url);
  settings.model = "test-model";
  settings.api_key = std::move(key);
  return settings;
}

inline std::string header(const HttpCall& call, std::string_view name) {
  const std::string* value = find_header(call.headers, name);
  return value == nullptr ? std::string("<absent>") : *value;
}

}  // namespace passepartout::testing

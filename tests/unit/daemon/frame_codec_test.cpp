// Tests for the frame codec: encoding (code-point lengths, upper-case hex,
// limits, sanitising) and the incremental decoder fed whole, byte by byte
// and in chunks, with every kind of malformed frame.
#include <catch2/catch.hpp>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "daemon/frame_codec.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"
#include "value/value_access.hpp"

using passepartout::ErrorCode;
using passepartout::FrameCodec;
using passepartout::FrameDecoder;
using passepartout::FrameError;
using passepartout::FrameErrorKind;
using passepartout::FrameLimits;
using passepartout::kMaxFrameCodePoints;
using passepartout::read_sexp;
using passepartout::to_sexp;
using passepartout::Value;

namespace {

Value parse(std::string_view text) {
  auto value = read_sexp(text);
  REQUIRE(value.has_value());
  return *value;
}

std::string encode_ok(const Value& message, FrameLimits limits = {}) {
  auto frame = FrameCodec(limits).encode(message);
  if (!frame) INFO("error: " << frame.error().message);
  REQUIRE(frame.has_value());
  return *frame;
}

// The payload of the frame for `message`, without its length prefix.
std::string payload_of(const Value& message) { return encode_ok(message).substr(6); }

struct Decoded {
  std::vector<std::string> messages;  // printed, for easy comparison
  std::optional<FrameError> error;
  bool in_frame = false;
};

Decoded decode_in_chunks(std::string_view bytes, std::size_t chunk, const FrameLimits& limits, bool finish) {
  FrameDecoder decoder(limits);
  for (std::size_t at = 0; at < bytes.size(); at += chunk) {
    if (!decoder.feed(bytes.substr(at, chunk))) break;
  }
  if (finish) decoder.finish();
  Decoded out;
  out.in_frame = decoder.in_frame();
  while (auto message = decoder.next()) out.messages.push_back(to_sexp(*message));
  out.error = decoder.error();
  return out;
}

// Decodes `bytes` whole, byte by byte and in chunks of several sizes; every
// split must give the same messages and the same error. Returns that result.
Decoded decode(std::string_view bytes, const FrameLimits& limits = {}, bool finish = false) {
  const Decoded whole = decode_in_chunks(bytes, bytes.empty() ? 1 : bytes.size(), limits, finish);
  for (const std::size_t chunk : {1UL, 2UL, 3UL, 5UL, 7UL, 64UL}) {
    const Decoded split = decode_in_chunks(bytes, chunk, limits, finish);
    INFO("chunk size " << chunk);
    CHECK(split.messages == whole.messages);
    REQUIRE(split.error.has_value() == whole.error.has_value());
    if (whole.error) {
      CHECK(split.error->kind == whole.error->kind);
      CHECK(split.error->message == whole.error->message);
    }
  }
  return whole;
}

FrameErrorKind error_kind(std::string_view bytes, const FrameLimits& limits = {}, bool finish = false) {
  const Decoded decoded = decode(bytes, limits, finish);
  INFO("decoding: " << bytes);
  REQUIRE(decoded.error.has_value());
  return decoded.error->kind;
}

std::string error_message(std::string_view bytes, const FrameLimits& limits = {}, bool finish = false) {
  const Decoded decoded = decode(bytes, limits, finish);
  REQUIRE(decoded.error.has_value());
  return decoded.error->message;
}

}  // namespace

// --- encoding ---------------------------------------------------------------------

TEST_CASE("codec frames the 44-character test message as 00002C", "[daemon]") {
  const std::string frame = encode_ok(parse("(:type :event :payload (:action :handshake))"));
  CHECK(frame == "00002C(:TYPE :EVENT :PAYLOAD (:ACTION :HANDSHAKE))");
}

TEST_CASE("codec counts the payload length in code points, not bytes", "[daemon]") {
  const std::string frame = encode_ok(Value::plist({{"TEXT", Value::string("naïve café")}}));
  // 20 code points, 22 bytes.
  CHECK(frame == "000014(:TEXT \"naïve café\")");
  CHECK(encode_ok(Value::string("🙂")).substr(0, 6) == "000003");
}

TEST_CASE("codec counts code points wherever the non-ASCII text is", "[daemon]") {
  const std::string plain(30, 'x');
  // Only ASCII: as many code points as bytes.
  const std::string ascii_frame = encode_ok(Value::plist({{"TEXT", Value::string(plain)}}));
  CHECK(ascii_frame.substr(0, 6) == "000028");  // 40 bytes: (:TEXT "<30>")
  // A preprinted list (a gate trace) with accents in its text: 12 code points, 14 bytes.
  const Value trace = passepartout::preprint(Value::list({Value::string("\xC3\xA9t\xC3\xA9")}));
  CHECK(encode_ok(Value::plist({{"T", trace}})) == "00000C(:T (\"\xC3\xA9t\xC3\xA9\"))");
  // In a long string with an escape (37 code points), and in a keyword written in bars.
  CHECK(encode_ok(Value::list({Value::string(plain + "\"\xC3\xA9")})).substr(0, 6) == "000025");
  CHECK(encode_ok(Value::keyword("\xC3\xA9")) == "000004:|\xC3\xA9|");
}

TEST_CASE("codec writes the length in upper-case hexadecimal", "[daemon]") {
  const std::string frame = encode_ok(Value::string(std::string(0xABC - 2, 'x')));
  CHECK(frame.substr(0, 6) == "000ABC");
}

TEST_CASE("codec refuses a payload over the configured limit and writes nothing", "[daemon]") {
  FrameLimits limits;
  limits.max_payload_code_points = 10;
  const FrameCodec codec(limits);
  CHECK(codec.encode(Value::string("12345678")).has_value());  // 10 with the quotes
  std::string out = "kept";
  auto refused = codec.encode_into(Value::string("123456789"), out);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::limit_exceeded);
  CHECK(refused.error().message == "frame payload is 11 code points, the limit is 10");
  CHECK(out == "kept");
}

TEST_CASE("codec never frames more than 0xFFFFFF code points, whatever the limit says", "[daemon]") {
  FrameLimits limits;
  limits.max_payload_code_points = 64 * 1024 * 1024;
  CHECK(limits.effective_max_payload() == kMaxFrameCodePoints);
  const FrameCodec codec(limits);
  auto largest = codec.encode(Value::string(std::string(kMaxFrameCodePoints - 2, 'a')));
  REQUIRE(largest.has_value());
  CHECK(largest->substr(0, 6) == "FFFFFF");
  auto over = codec.encode(Value::string(std::string(kMaxFrameCodePoints - 1, 'a')));
  REQUIRE_FALSE(over.has_value());
  CHECK(over.error().code == ErrorCode::limit_exceeded);
}

TEST_CASE("codec frames printed payload text as it is", "[daemon]") {
  std::string out;
  REQUIRE(FrameCodec().frame_payload("(:A \"é\")", out).has_value());
  CHECK(out == "000008(:A \"é\")");
  auto invalid = FrameCodec().frame_payload("(\xFF)", out);
  REQUIRE_FALSE(invalid.has_value());
  CHECK(invalid.error().code == ErrorCode::invalid_input);
  CHECK(out == "000008(:A \"é\")");
}

// --- sanitising -------------------------------------------------------------------

TEST_CASE("encoding removes reply-stream, socket and stream keys at every plist level", "[daemon]") {
  const Value message = parse(
      "(:TYPE :EVENT :META (:SOURCE :TUI :REPLY-STREAM 7) :SOCKET 3 "
      ":PAYLOAD (:TEXT \"x\" :stream (1 2) :NESTED (:SOCKET :S :KEEP 1)))");
  CHECK(payload_of(message) == "(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:TEXT \"x\" :NESTED (:KEEP 1)))");
  CHECK(encode_ok(parse("(:A 1 :REPLY-STREAM 2)")) == "000006(:A 1)");
}

TEST_CASE("a preprinted gate trace is framed from its text, and one holding an unsent key is cleaned", "[daemon]") {
  using passepartout::ValueAccess;
  using passepartout::detail::keyword_mark;
  // Marked as a gate trace entry is (its keywords), but holding another text: the frame shows which was used.
  const Value entry = parse("(:GATE \"g\" :VERSION \"1.0.0\" :RESULT :PASSED)");
  std::uint64_t marks = 0;
  for (const char* key :
       {"GATE", "VERSION", "RESULT", "PASSED", "REASON", "REWRITTEN", "BLOCKED", "FAILED", "APPROVAL"}) {
    marks |= keyword_mark(key);
  }
  const Value trace = ValueAccess::preprinted_list(entry, "(:FROM-TEXT)", marks);
  CHECK(payload_of(parse("(:TYPE :REQUEST)").with("GATE-TRACE", trace)) == "(:TYPE :REQUEST :GATE-TRACE (:FROM-TEXT))");

  const Value with_socket = parse("(:SOCKET 3 :KEEP 1)");
  const Value marked = ValueAccess::preprinted_list(with_socket, "(:SOCKET 3 :KEEP 1)", keyword_mark("SOCKET"));
  CHECK(payload_of(parse("(:A 1)").with("B", marked)) == "(:A 1 :B (:KEEP 1))");
}

TEST_CASE("encoding leaves ordinary lists their length (no trailing NIL)", "[daemon]") {
  CHECK(payload_of(parse("(:X (1 2 3))")) == "(:X (1 2 3))");
  CHECK(payload_of(parse("(\"a\" \"b\" \"c\")")) == "(\"a\" \"b\" \"c\")");
  // Odd length: not a plist, so :STREAM here is an element, not a key.
  CHECK(payload_of(parse("(:A 1 :STREAM)")) == "(:A 1 :STREAM)");
  CHECK(payload_of(parse("(1 :STREAM 2 3)")) == "(1 :STREAM 2 3)");
  // A non-keyword at an even position: not a plist either.
  CHECK(payload_of(parse("(:STREAM 1 2 3)")) == "(:STREAM 1 2 3)");
}

TEST_CASE("encoding cleans plists inside ordinary lists, and an emptied plist is NIL", "[daemon]") {
  const Value trace = parse("(:GATE-TRACE ((:GATE \"a\" :STREAM 1) (:GATE \"b\")) :ARGS (1 (:SOCKET 2 :Y 3) 4))");
  CHECK(payload_of(trace) == "(:GATE-TRACE ((:GATE \"a\") (:GATE \"b\")) :ARGS (1 (:Y 3) 4))");
  CHECK(encode_ok(parse("(:STREAM 1)")) == "000003NIL");
  CHECK(payload_of(parse("(:A (:STREAM 1 :SOCKET 2) :B 2)")) == "(:A NIL :B 2)");
  CHECK(payload_of(parse("(:STREAM 1 :A 2)")) == "(:A 2)");
}

TEST_CASE("encoding cleans plists nested deeper than the printer recurses", "[daemon]") {
  std::string deep = "(:STREAM 0 :X 1)";
  std::string expected = "(:X 1)";
  for (int i = 0; i < 200; ++i) {
    deep = "(:SOCKET " + std::to_string(i) + " :A " + deep + ")";
    expected = "(:A " + expected + ")";
  }
  CHECK(payload_of(parse(deep)) == expected);
  CHECK(payload_of(parse("(:A " + std::string(100, '(') + ":STREAM 1" + std::string(100, ')') + ")")) ==
        "(:A " + std::string(99, '(') + "NIL" + std::string(99, ')') + ")");
}

// --- decoding ---------------------------------------------------------------------

TEST_CASE("decoder reads a frame however the bytes are split", "[daemon]") {
  const Decoded decoded = decode("00002C(:TYPE :EVENT :PAYLOAD (:ACTION :HANDSHAKE))");
  REQUIRE_FALSE(decoded.error.has_value());
  CHECK(decoded.messages == std::vector<std::string>{"(:TYPE :EVENT :PAYLOAD (:ACTION :HANDSHAKE))"});
  CHECK_FALSE(decoded.in_frame);
}

TEST_CASE("decoder reads back-to-back frames and whitespace between them", "[daemon]") {
  const Decoded decoded = decode("000003(a)000003(b) \r\n\t000001c\n");
  REQUIRE_FALSE(decoded.error.has_value());
  CHECK(decoded.messages == std::vector<std::string>{"(A)", "(B)", "C"});
}

TEST_CASE("decoder accepts lower-case hex, a leading '+' and trailing spaces in the prefix", "[daemon]") {
  const std::string payload = "(:TYPE :EVENT :PAYLOAD (:ACTION :HANDSHAKE))";
  for (const std::string prefix : {"00002c", "+0002C", "+0002c", "2C    ", "2c\t\r\n ", "+2C   "}) {
    INFO("prefix " << prefix);
    const Decoded decoded = decode(prefix + payload);
    REQUIRE_FALSE(decoded.error.has_value());
    CHECK(decoded.messages.size() == 1);
  }
}

TEST_CASE("decoder counts code points, as a Lisp peer does", "[daemon]") {
  const Decoded decoded = decode("000014(:TEXT \"naïve café\")");
  REQUIRE_FALSE(decoded.error.has_value());
  CHECK(decoded.messages == std::vector<std::string>{"(:TEXT \"naïve café\")"});

  // The same frame with the byte count waits for two more characters that never come.
  const Decoded byte_count = decode("000016(:TEXT \"naïve café\")");
  CHECK(byte_count.messages.empty());
  CHECK(byte_count.in_frame);
  CHECK(error_kind("000016(:TEXT \"naïve café\")", {}, true) == FrameErrorKind::truncated);
}

TEST_CASE("decoder counts a 4-byte character as one code point", "[daemon]") {
  const Decoded decoded = decode("000003\"🙂\"000001x");
  REQUIRE_FALSE(decoded.error.has_value());
  CHECK(decoded.messages == std::vector<std::string>{"\"🙂\"", "X"});
}

TEST_CASE("decoder ignores what follows the first datum inside a payload", "[daemon]") {
  const Decoded decoded = decode("00000C(a) junk #.x000003(b)");
  REQUIRE_FALSE(decoded.error.has_value());
  CHECK(decoded.messages == std::vector<std::string>{"(A)", "(B)"});
}

TEST_CASE("decoder returns a payload that is not a list as it is", "[daemon]") {
  CHECK(decode("00000242").messages == std::vector<std::string>{"42"});
}

TEST_CASE("decoder accepts 4096 whitespace characters before a frame and refuses the 4097th", "[daemon]") {
  const std::string frame = "000003(a)";
  CHECK(decode(std::string(4096, ' ') + frame).messages.size() == 1);
  CHECK(decode(std::string(2048, '\n') + std::string(2048, '\t') + frame).messages.size() == 1);
  CHECK(error_kind(std::string(4097, ' ') + frame) == FrameErrorKind::whitespace_flood);
  CHECK(error_message(std::string(4097, '\r')) == "byte 4096: more than 4096 whitespace characters before a frame");
  // The count starts again before each frame.
  CHECK(decode(frame + std::string(4096, ' ') + frame + std::string(4096, ' ') + frame).messages.size() == 3);
}

TEST_CASE("decoder refuses a prefix that is not a hexadecimal length", "[daemon]") {
  CHECK(error_kind("00G02C(a)") == FrameErrorKind::bad_prefix);
  CHECK(error_message("00G02C(a)") ==
        "byte 2: frame prefix \"00G\" is not a length (expected 6 hexadecimal digits, optionally after '+')");
  CHECK(error_kind("-0002C") == FrameErrorKind::bad_prefix);
  CHECK(error_kind("++002C") == FrameErrorKind::bad_prefix);
  CHECK(error_kind("+ 002C") == FrameErrorKind::bad_prefix);
  CHECK(error_kind("0 002C") == FrameErrorKind::bad_prefix);
  CHECK(error_kind("0x002C") == FrameErrorKind::bad_prefix);
  CHECK(error_kind("(:TYPE :EVENT)") == FrameErrorKind::bad_prefix);
  CHECK(error_message("00\xC3\xA9"
                      "00") ==
        "byte 2: frame prefix \"00\\xC3\" is not a length (expected 6 hexadecimal digits, optionally after '+')");
}

TEST_CASE("decoder refuses a bad prefix at its first wrong character", "[daemon]") {
  FrameDecoder decoder;
  CHECK(decoder.feed("0"));
  CHECK_FALSE(decoder.feed("G"));
  REQUIRE(decoder.error().has_value());
  CHECK(decoder.error()->kind == FrameErrorKind::bad_prefix);
  CHECK_FALSE(decoder.feed("000003(a)"));  // the first error is final
  CHECK_FALSE(decoder.next().has_value());
}

TEST_CASE("decoder refuses an announced length over the limit before reading the payload", "[daemon]") {
  FrameLimits limits;
  limits.max_payload_code_points = 100;
  // 100 is allowed (that payload, all blank, is then unreadable); 101 is not.
  CHECK(error_kind("000064" + std::string(100, ' '), limits) == FrameErrorKind::unreadable_payload);
  CHECK(error_kind("000065", limits) == FrameErrorKind::too_large);
  CHECK(error_message("  000065", limits) == "byte 2: frame announces 101 code points, the limit is 100");
  // The default limit is 1 MiB of code points; the prefix alone is enough to refuse.
  FrameDecoder decoder;
  CHECK_FALSE(decoder.feed("FFFFFF"));
  REQUIRE(decoder.error().has_value());
  CHECK(decoder.error()->kind == FrameErrorKind::too_large);
  CHECK(decoder.error()->message == "byte 0: frame announces 16777215 code points, the limit is 1048576");
}

TEST_CASE("decoder reports a truncated frame when the stream ends inside it", "[daemon]") {
  CHECK(error_kind("00002C(:TYPE :EVENT", {}, true) == FrameErrorKind::truncated);
  CHECK(error_message("00002C(:TYPE :EVENT", {}, true) ==
        "byte 19: the stream ended after 13 of 44 payload code points");
  CHECK(error_message("000", {}, true) == "byte 3: the stream ended after 3 of 6 frame prefix characters");
  // Between frames (even after whitespace) the end of the stream is no error.
  const Decoded clean = decode("000003(a)  \n", {}, true);
  CHECK_FALSE(clean.error.has_value());
  CHECK(clean.messages.size() == 1);
}

TEST_CASE("decoder refuses a frame whose code-point count cuts a character in two", "[daemon]") {
  // One code point announced, but the payload is 'é' split: 0xC3 then a new frame's '0'.
  CHECK(error_kind("000001\xC3"
                   "000001a") == FrameErrorKind::invalid_utf8);
}

TEST_CASE("decoder refuses read-time evaluation in a payload", "[daemon]") {
  CHECK(error_kind("00000E(#.(run \"rm\"))") == FrameErrorKind::unreadable_payload);
  CHECK(error_message("00000E(#.(run \"rm\"))") ==
        "frame payload at byte 6 is no readable s-expression: byte 1: found '#.', but '#' reader macros are not "
        "supported");
  CHECK(error_kind("000002#.") == FrameErrorKind::unreadable_payload);
}

TEST_CASE("decoder refuses payloads the reader cannot read", "[daemon]") {
  CHECK(error_kind("000000") == FrameErrorKind::unreadable_payload);
  CHECK(error_kind("000003   ") == FrameErrorKind::unreadable_payload);
  CHECK(error_kind("000004(a b") == FrameErrorKind::unreadable_payload);
  CHECK(error_kind("000002'x") == FrameErrorKind::unreadable_payload);
}

TEST_CASE("decoder refuses invalid UTF-8 at the offending byte", "[daemon]") {
  CHECK(error_kind("000003\"\xFF\"") == FrameErrorKind::invalid_utf8);
  CHECK(error_message("000003\"\xFF\"") == "byte 7: invalid UTF-8 in the frame payload (byte 0xFF)");
  CHECK(error_kind("000003\"\xC0\x80\"") == FrameErrorKind::invalid_utf8);          // overlong
  CHECK(error_kind("000003\"\xED\xA0\x80\"") == FrameErrorKind::invalid_utf8);      // surrogate
  CHECK(error_kind("000003\"\xF4\x90\x80\x80\"") == FrameErrorKind::invalid_utf8);  // above U+10FFFF
  CHECK(error_kind("000003\"\x80\"") == FrameErrorKind::invalid_utf8);              // lone continuation
  CHECK(error_message("000004\"\xC3(\"") ==
        "byte 7: invalid UTF-8 in the frame payload (sequence starting with 0xC3, then 0x28)");
}

TEST_CASE("decoder refuses nesting deeper than the limit", "[daemon]") {
  FrameLimits limits;
  limits.max_depth = 4;
  CHECK(decode("000009((((a))))", limits).messages.size() == 1);
  const std::string deep = "00000B(((((a)))))";
  CHECK(error_kind(deep, limits) == FrameErrorKind::too_deep);
}

TEST_CASE("decoder keeps the messages completed before an error", "[daemon]") {
  const Decoded decoded = decode("000003(a)zzz");
  CHECK(decoded.messages == std::vector<std::string>{"(A)"});
  REQUIRE(decoded.error.has_value());
  CHECK(decoded.error->kind == FrameErrorKind::bad_prefix);
}

TEST_CASE("decoder reads back what the codec writes, in random pieces", "[daemon]") {
  std::mt19937 rng(20240516);
  const std::vector<std::string> texts = {
      "plain", "naïve café", "日本語のテキスト", "🙂🙃 emoji", "quote \" and \\", "tab\tnewline\n", ""};
  std::string stream;
  std::vector<std::string> expected;
  for (int i = 0; i < 200; ++i) {
    const Value message =
        Value::plist({{"TYPE", Value::keyword("EVENT")},
                      {"PAYLOAD", Value::plist({{"TEXT", Value::string(texts[rng() % texts.size()])},
                                                {"N", Value::integer(static_cast<std::int64_t>(rng() % 100000))}})}});
    stream += encode_ok(message);
    if (rng() % 3 == 0) stream += "\n";
    expected.push_back(to_sexp(message));
  }
  FrameDecoder decoder;
  std::vector<std::string> got;
  for (std::size_t at = 0; at < stream.size();) {
    const std::size_t piece = 1 + rng() % 97;
    REQUIRE(decoder.feed(std::string_view(stream).substr(at, piece)));
    at += piece;
    while (auto message = decoder.next()) got.push_back(to_sexp(*message));
  }
  CHECK(decoder.finish());
  CHECK(got == expected);
}

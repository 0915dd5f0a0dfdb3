// Tests for the Value codec: round trips that leave every Value as the
// s-expression reader would build it, the exact bytes of the format, the
// precise error for each way untrusted bytes can be wrong, the limits, and
// random and mutated bytes that must never crash or be half accepted.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"
#include "value/value_access.hpp"
#include "value/value_codec.hpp"

using passepartout::decode;
using passepartout::DecodeLimits;
using passepartout::encode;
using passepartout::encode_message;
using passepartout::ErrorCode;
using passepartout::Kind;
using passepartout::read_sexp;
using passepartout::to_sexp;
using passepartout::Value;
using passepartout::ValueAccess;
using passepartout::ValueDecoder;

namespace {

std::string message_of(const Value& v) {
  std::string out;
  encode_message(v, out);
  return out;
}

std::string bytes(std::initializer_list<unsigned> list) {
  std::string out;
  for (const unsigned b : list) out.push_back(static_cast<char>(b));
  return out;
}

// Whether `a` and `b` are the same tree down to what equality does not look
// at: float bits (so -0.0 and NaN count) and keywords' plain-name marks.
bool identical(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::real: {
      const double x = a.as_float();
      const double y = b.as_float();
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    case Kind::keyword:
      return a.text() == b.text() && ValueAccess::is_plain_keyword(a) == ValueAccess::is_plain_keyword(b);
    case Kind::list: {
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (!identical(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    default:
      return a == b;
  }
}

Value decoded(const std::string& message) {
  auto result = decode(message);
  if (!result) INFO("error: " << result.error().message);
  REQUIRE(result.has_value());
  return *result;
}

std::string error_of(const std::string& message, const DecodeLimits& limits = {}) {
  auto result = decode(message, limits);
  REQUIRE_FALSE(result.has_value());
  return result.error().message;
}

ErrorCode code_of(const std::string& message, const DecodeLimits& limits = {}) {
  auto result = decode(message, limits);
  REQUIRE_FALSE(result.has_value());
  return result.error().code;
}

// The texts whose Values the round trips start from: the wire's message
// shapes, every kind, edge values.
const std::vector<std::string_view> kTexts = {
    "NIL",
    "T",
    "0",
    "-1",
    "9223372036854775807",
    "-9223372036854775808",
    "63",
    "64",
    "-65",
    "8191",
    "8192",
    "1.5",
    "-0.0",
    "0.1d0",
    "1.7976931348623157d308",
    "4.9406564584124654d-324",
    "\"\"",
    "\"hi\"",
    "\"na\\\"me \\\\ with \\\" quotes\"",
    "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 and a text longer than one hundred and twenty-eight bytes, so that "
    "its length takes two bytes of varint, which the decoder must read right\"",
    "\"line\nbreak\ttab\"",
    ":A",
    ":TYPE",
    ":REJECTION-TRACE-OF-SOME-LENGTH",
    ":|mixed Case|",
    ":||",
    ":|a:b|",
    ":\xc3\xa9t\xc3\xa9",
    "foo",
    "|foo|",
    "||",
    "|NIL|",
    "|T|",
    "|12|",
    "\xce\xbb",
    "(1)",
    "(NIL)",
    "(NIL NIL)",
    "(() (()) ((())))",
    "((((((((((1))))))))))",
    "(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hi\"))",
    "(:TYPE :REQUEST :TARGET :CLI :PAYLOAD (:ACTION :MESSAGE :TEXT \"hello\" :EXPLANATION \"a greeting for the "
    "user\"))",
    "(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"s-4f2a9c\") :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"Please look "
    "at the build log\") :DEPTH 0)",
    "((:GATE \"pass-gate-1\" :VERSION \"1.0.0\" :RESULT :PASSED) (:GATE \"pass-gate-0\" :VERSION \"1.0.0\" "
    ":RESULT :BLOCKED :REASON \"no\"))",
    "(:TYPE :RESPONSE :PAYLOAD (:APPROVED-ACTION (:ACTION :TOOL-CALL :TOOL \"shell\" :ARGS (:COMMAND \"ls -l\")) "
    ":SCORES (0.5 -2 1.0d20 3/4)))",
};

}  // namespace

TEST_CASE("codec round trips leave every Value as the reader builds it from its printed text", "[value][codec]") {
  for (const std::string_view text : kTexts) {
    INFO("value: " << text);
    auto read = read_sexp(text);
    REQUIRE(read.has_value());
    const Value& v = *read;
    const Value back = decoded(message_of(v));
    CHECK(to_sexp(back) == to_sexp(v));
    CHECK(back == v);
    CHECK(identical(back, v));
    // And the same as what the reader makes of the printed form.
    auto reread = read_sexp(to_sexp(v));
    REQUIRE(reread.has_value());
    CHECK(identical(back, *reread));
    // Encoding the decoded value gives the same bytes (one encoding per value).
    CHECK(message_of(back) == message_of(v));
  }
}

TEST_CASE("codec round trips Values built by the constructors, floats bit for bit", "[value][codec]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Value> values = {
      Value::real(-0.0),
      Value::real(inf),
      Value::real(-inf),
      Value::real(nan),
      Value::real(std::numeric_limits<double>::denorm_min()),
      Value::integer(std::numeric_limits<std::int64_t>::min()),
      Value::integer(std::numeric_limits<std::int64_t>::max()),
      Value::symbol("lower case symbol"),
      Value::keyword("payload"),
      Value::string(std::string(100000, 'x')),
      Value::list({Value::list({Value::nil(), Value::t()}), Value::string("\xe2\x82\xac"), Value::symbol("")}),
      Value::plist({{"type", Value::keyword("event")}, {"payload", Value::plist({{"text", Value::string("hi")}})}}),
  };
  for (const Value& v : values) {
    INFO("value: " << to_sexp(v));
    const Value back = decoded(message_of(v));
    CHECK(identical(back, v));
    CHECK(to_sexp(back) == to_sexp(v));
  }
  CHECK(std::signbit(decoded(message_of(Value::real(-0.0))).as_float()));
  CHECK(std::isnan(decoded(message_of(Value::real(nan))).as_float()));
}

TEST_CASE("codec writes the documented bytes", "[value][codec]") {
  // The header's example: (:A -1 "é").
  CHECK(message_of(*read_sexp("(:A -1 \"\xc3\xa9\")")) ==
        bytes({0x01, 0x07, 0x03, 0x05, 0x01, 'A', 0x02, 0x01, 0x04, 0x02, 0xC3, 0xA9}));
  CHECK(message_of(Value()) == bytes({0x01, 0x00}));
  CHECK(message_of(Value::t()) == bytes({0x01, 0x01}));
  // Zig-zag, then LEB128.
  CHECK(message_of(Value::integer(0)) == bytes({0x01, 0x02, 0x00}));
  CHECK(message_of(Value::integer(1)) == bytes({0x01, 0x02, 0x02}));
  CHECK(message_of(Value::integer(-2)) == bytes({0x01, 0x02, 0x03}));
  CHECK(message_of(Value::integer(64)) == bytes({0x01, 0x02, 0x80, 0x01}));
  CHECK(message_of(Value::integer(std::numeric_limits<std::int64_t>::min())) ==
        bytes({0x01, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  // Doubles little-endian.
  CHECK(message_of(Value::real(1.0)) == bytes({0x01, 0x03, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F}));
  CHECK(message_of(Value::real(-0.0)) == bytes({0x01, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x80}));
  CHECK(message_of(Value::symbol("ab")) == bytes({0x01, 0x06, 0x02, 'a', 'b'}));
  // encode() alone writes no version byte and appends.
  std::string out = "x";
  encode(Value::keyword("K"), out);
  CHECK(out == bytes({'x', 0x05, 0x01, 'K'}));
}

TEST_CASE("codec keeps keywords' plain-name marks as the reader sets them", "[value][codec]") {
  const Value plain = decoded(bytes({0x01, 0x05, 0x04, 'T', 'Y', 'P', 'E'}));
  CHECK(ValueAccess::is_plain_keyword(plain));
  CHECK(plain == Value::keyword("TYPE"));
  const Value spaced = decoded(bytes({0x01, 0x05, 0x03, 'A', ' ', 'B'}));
  CHECK_FALSE(ValueAccess::is_plain_keyword(spaced));
  CHECK(to_sexp(spaced) == ":|A B|");
}

TEST_CASE("codec decoder reports each malformed input with its byte offset", "[value][codec]") {
  CHECK(error_of("") == "byte 0: input ends, expected the version byte 0x01");
  CHECK(error_of(bytes({0x02, 0x00})) == "byte 0: version 0x02, but this decoder reads version 0x01");
  CHECK(error_of(bytes({0x01})) == "byte 1: input ends, expected a value");
  CHECK(error_of(bytes({0x01, 0x08})) == "byte 1: unknown tag 0x08, expected 0x00 to 0x07");
  CHECK(error_of(bytes({0x01, 0x07, 0x02, 0x00, 0xFF})) == "byte 4: unknown tag 0xFF, expected 0x00 to 0x07");
  CHECK(error_of(bytes({0x01, 0x00, 0x00})) == "byte 2: 1 bytes after the value, expected the end of the message");
  // Varints: truncated, overlong, past 64 bits.
  CHECK(error_of(bytes({0x01, 0x02})) == "byte 2: input ends inside a varint, expected an integer");
  CHECK(error_of(bytes({0x01, 0x02, 0x80, 0x80})) == "byte 2: input ends inside a varint, expected an integer");
  CHECK(error_of(bytes({0x01, 0x02, 0x80, 0x00})) ==
        "byte 2: a varint with a redundant zero byte (not its shortest form), expected an integer");
  CHECK(error_of(bytes({0x01, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02})) ==
        "byte 2: a varint of more than 64 bits, expected an integer");
  // A tenth byte that would continue (found by value_codec_fuzz: the next group would be shifted past 64 bits).
  CHECK(error_of(bytes({0x01, 0x04, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x00})) ==
        "byte 2: a varint of more than 64 bits, expected a string's byte length");
  CHECK(error_of(bytes({0x01, 0x03, 0, 0, 0})) == "byte 1: input ends after 3 bytes, expected a float of 8 bytes");
  // Lengths and counts past the end of the bytes.
  CHECK(error_of(bytes({0x01, 0x04, 0x05, 'a', 'b'})) == "byte 1: a string of 5 bytes, but only 2 bytes follow");
  CHECK(error_of(bytes({0x01, 0x04})) == "byte 2: input ends inside a varint, expected a string's byte length");
  CHECK(error_of(bytes({0x01, 0x07, 0x02, 0x04, 0x00})) ==
        "byte 5: input ends inside a list (started at byte 1), expected 1 more elements");
  // A count is checked against the bytes that follow (one at least per element) when it is read.
  CHECK(error_of(bytes({0x01, 0x07, 0x03, 0x00, 0x00})) == "byte 1: a list of 3 elements, but only 2 bytes follow");
  CHECK(error_of(bytes({0x01, 0x07, 0x05, 0x00})) == "byte 1: a list of 5 elements, but only 1 bytes follow");
  CHECK(error_of(bytes({0x01, 0x07, 0x00})) ==
        "byte 1: a list of 0 elements, expected NIL's tag 0x00 for the empty list");
}

TEST_CASE("codec decoder refuses a claimed length before allocating for it", "[value][codec]") {
  // A list of 2^31 - 1 elements and a string of 2^62 bytes, each claimed in
  // a few bytes: refused from the count, with nothing allocated for it.
  CHECK(error_of(bytes({0x01, 0x07, 0xFF, 0xFF, 0xFF, 0xFF, 0x07, 0x00})) ==
        "byte 1: a list of 2147483647 elements, but only 1 bytes follow");
  CHECK(error_of(bytes({0x01, 0x04, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40})) ==
        "byte 1: a string of 4611686018427387904 bytes, but only 0 bytes follow");
  CHECK(code_of(bytes({0x01, 0x06, 0xFF, 0x01})) == ErrorCode::invalid_input);
}

TEST_CASE("codec decoder refuses text the reader would not build", "[value][codec]") {
  CHECK(error_of(bytes({0x01, 0x04, 0x03, 'a', 0xC3, 0x28})) ==
        "byte 4: invalid UTF-8 sequence starting with 0xC3 in a string (which starts at byte 1)");
  CHECK(error_of(bytes({0x01, 0x06, 0x01, 0xFF})) ==
        "byte 3: invalid UTF-8 sequence starting with 0xFF in a symbol (which starts at byte 1)");
  // An overlong encoding of '/' and a surrogate.
  CHECK(error_of(bytes({0x01, 0x05, 0x02, 0xC0, 0xAF})) ==
        "byte 3: invalid UTF-8 sequence starting with 0xC0 in a keyword (which starts at byte 1)");
  CHECK(error_of(bytes({0x01, 0x04, 0x03, 0xED, 0xA0, 0x80})) ==
        "byte 3: invalid UTF-8 sequence starting with 0xED in a string (which starts at byte 1)");
  CHECK(error_of(bytes({0x01, 0x05, 0x03, 'A', 'b', 'C'})) ==
        "byte 4: the lower-case letter 'b' in a keyword's name (which starts at byte 1), but keyword names are "
        "upper-case");
  // Symbols keep their case, as |foo| does.
  CHECK(decoded(bytes({0x01, 0x06, 0x03, 'f', 'o', 'o'})) == Value::symbol("foo"));
}

TEST_CASE("codec decoder enforces the caller's limits as limit_exceeded", "[value][codec]") {
  const Value deep = *read_sexp("((((1))))");
  const std::string deep_bytes = message_of(deep);
  DecodeLimits limits;
  limits.max_depth = 3;
  CHECK(error_of(deep_bytes, limits) == "byte 7: nesting deeper than 3");
  CHECK(code_of(deep_bytes, limits) == ErrorCode::limit_exceeded);
  limits.max_depth = 4;
  CHECK(decode(deep_bytes, limits).has_value());

  const std::string wide = message_of(*read_sexp("(1 2 3 4)"));
  limits = {};
  limits.max_nodes = 4;
  CHECK(error_of(wide, limits) == "byte 1: a list of 4 elements, which makes more than 4 nodes in one value");
  CHECK(code_of(wide, limits) == ErrorCode::limit_exceeded);
  limits.max_nodes = 5;
  CHECK(decode(wide, limits).has_value());

  const std::string text = message_of(Value::string("0123456789"));  // tag, length, 10 bytes
  limits = {};
  limits.max_bytes = 11;
  CHECK(error_of(text, limits) == "byte 1: the value is longer than 11 bytes (it started at byte 1)");
  CHECK(code_of(text, limits) == ErrorCode::limit_exceeded);
  limits.max_bytes = 12;
  CHECK(decode(text, limits).has_value());
  // A list whose elements run past max_bytes is refused where it crosses it.
  limits.max_bytes = 4;
  CHECK(error_of(wide, limits) == "byte 1: the value is longer than 4 bytes (it started at byte 1)");

  // No depth overflows the decoder's stack, and the default limit applies.
  std::string very_deep = bytes({0x01});
  for (int i = 0; i < 100000; ++i) very_deep += bytes({0x07, 0x01});
  very_deep += bytes({0x00});
  CHECK(error_of(very_deep) == "byte 513: nesting deeper than 256");
}

TEST_CASE("codec carries several values in one frame and says where each ends", "[value][codec]") {
  std::string frame;
  frame.push_back(static_cast<char>(passepartout::kValueCodecVersion));
  const Value action = *read_sexp("(:ACTION :MESSAGE :TEXT \"hello\")");
  const Value signal = *read_sexp("(:TYPE :EVENT :PAYLOAD (:TEXT \"hi\"))");
  encode(action, frame);
  const std::size_t second = frame.size();
  encode(signal, frame);
  frame.push_back(static_cast<char>(0x09));  // a bad third value

  ValueDecoder decoder(frame);
  REQUIRE(decoder.read_version().has_value());
  auto first = decoder.next();
  REQUIRE(first.has_value());
  CHECK(*first == action);
  CHECK(decoder.offset() == second);
  auto next = decoder.next();
  REQUIRE(next.has_value());
  CHECK(*next == signal);
  CHECK(decoder.offset() == frame.size() - 1);
  auto bad = decoder.next();
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message ==
        "byte " + std::to_string(frame.size() - 1) + ": unknown tag 0x09, expected 0x00 to 0x07");
  CHECK(decoder.offset() == frame.size() - 1);
  CHECK_FALSE(decoder.at_end());
}

TEST_CASE("codec encodes lists nested deeper than its fixed stack", "[value][codec]") {
  Value v = Value::integer(7);
  for (int i = 0; i < 1000; ++i) v = Value::list({v});
  DecodeLimits limits;
  limits.max_depth = 1000;
  auto back = decode(message_of(v), limits);
  REQUIRE(back.has_value());
  CHECK(*back == v);
}

TEST_CASE("codec decoder survives random and mutated bytes (fixed seed)", "[value][codec]") {
  std::mt19937 rng(20261128);
  std::vector<std::string> seeds;
  for (const std::string_view text : kTexts) seeds.push_back(message_of(*read_sexp(text)));
  DecodeLimits limits;
  limits.max_depth = 32;
  limits.max_nodes = 4096;
  limits.max_bytes = 4096;
  std::size_t accepted = 0;
  std::size_t refused = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::string input;
    if (iteration % 4 == 0) {
      const std::size_t size = rng() % 64;
      for (std::size_t i = 0; i < size; ++i) input.push_back(static_cast<char>(rng() % 10 < 7 ? rng() % 9 : rng()));
      input.insert(input.begin(), static_cast<char>(passepartout::kValueCodecVersion));
    } else {
      input = seeds[rng() % seeds.size()];
      const unsigned mutations = 1 + rng() % 4;
      for (unsigned m = 0; m < mutations && !input.empty(); ++m) {
        const std::size_t at = rng() % input.size();
        switch (rng() % 4) {
          case 0:
            input[at] = static_cast<char>(rng());
            break;
          case 1:
            input[at] = static_cast<char>(static_cast<unsigned char>(input[at]) ^ (1U << (rng() % 8)));
            break;
          case 2:
            input.resize(at);
            break;
          default:
            input.insert(at, 1, static_cast<char>(rng() % 9));
            break;
        }
      }
    }
    auto result = decode(input, limits);
    if (!result) {
      ++refused;
      const std::string& message = result.error().message;
      INFO("input of " << input.size() << " bytes: " << message);
      REQUIRE(message.rfind("byte ", 0) == 0);
      REQUIRE(std::stoul(message.substr(5)) <= input.size());
      continue;
    }
    ++accepted;
    // Whatever is accepted is canonical, and is what the reader builds from its printed form.
    REQUIRE(message_of(*result) == input);
    auto reread = read_sexp(to_sexp(*result));
    REQUIRE(reread.has_value());
    REQUIRE(to_sexp(*reread) == to_sexp(*result));
  }
  // Both paths were exercised.
  CHECK(accepted > 100);
  CHECK(refused > 100);
}

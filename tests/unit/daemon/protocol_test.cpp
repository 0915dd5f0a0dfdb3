// Tests for the protocol messages: the exact shapes the daemon sends and the
// classifiers for what it receives (keys compared ignoring case).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/frame_codec.hpp"
#include "daemon/protocol.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;

namespace {

Value parse(std::string_view text) {
  auto value = read_sexp(text);
  REQUIRE(value.has_value());
  return *value;
}

}  // namespace

TEST_CASE("handshake frames exactly as the Lisp daemon's", "[daemon]") {
  const std::vector<std::string> capabilities = {"AUTH", "org-ast"};
  const Value hello = make_handshake("0.2.0", capabilities);
  auto frame = FrameCodec().encode(hello);
  REQUIRE(frame.has_value());
  CHECK(*frame ==
        "00005C(:TYPE :EVENT :PAYLOAD (:ACTION :HANDSHAKE :VERSION \"0.2.0\" :CAPABILITIES (:AUTH :ORG-AST)))");
  CHECK(is_handshake(hello));
  CHECK(is_handshake(parse("(:type :event :payload (:action :handshake))")));
  CHECK_FALSE(is_handshake(parse("(:TYPE :EVENT :PAYLOAD (:ACTION :MESSAGE))")));
}

TEST_CASE("health response carries the status keyword and whether a check ran", "[daemon]") {
  CHECK(to_sexp(make_health_response({"healthy", true})) == "(:TYPE :HEALTH-RESPONSE :STATUS :HEALTHY :CHECKED-P T)");
  CHECK(to_sexp(make_health_response({})) == "(:TYPE :HEALTH-RESPONSE :STATUS :UNKNOWN :CHECKED-P NIL)");
  CHECK(to_sexp(make_health_response({"", false})) == "(:TYPE :HEALTH-RESPONSE :STATUS :UNKNOWN :CHECKED-P NIL)");
  CHECK(is_health_response(make_health_response({})));
}

TEST_CASE("health checks are recognised whatever the case of their keys", "[daemon]") {
  CHECK(is_health_check(parse("(:TYPE :HEALTH-CHECK)")));
  CHECK(is_health_check(parse("(:type :health-check)")));
  CHECK(is_health_check(parse("(:|type| :health-check)")));
  CHECK_FALSE(is_health_check(parse("(:TYPE :EVENT)")));
  CHECK_FALSE(is_health_check(parse("42")));
  CHECK_FALSE(is_health_check(parse("(:TYPE)")));
}

TEST_CASE("stream chunks carry their text under the payload", "[daemon]") {
  const Value chunk = make_stream_chunk("del\"ta é");
  CHECK(to_sexp(chunk) == "(:TYPE :STREAM-CHUNK :PAYLOAD (:TEXT \"del\\\"ta é\"))");
  CHECK(is_stream_chunk(chunk));
  CHECK(message_type(chunk) == "STREAM-CHUNK");
}

TEST_CASE("ok responses carry a message and any extra payload keys", "[daemon]") {
  CHECK(to_sexp(make_ok_response("done")) == "(:TYPE :RESPONSE :STATUS :OK :PAYLOAD (:MESSAGE \"done\"))");
  const Value ok = make_ok_response("loaded", Value::plist({{"COUNT", Value::integer(3)}}));
  CHECK(to_sexp(ok) == "(:TYPE :RESPONSE :STATUS :OK :PAYLOAD (:MESSAGE \"loaded\" :COUNT 3))");
  CHECK(is_ok_response(ok));
  CHECK_FALSE(is_error_response(ok));
  CHECK(error_response_code(ok).empty());
}

TEST_CASE("error responses carry a message and a code", "[daemon]") {
  const Value error = make_error_response(wire_error::kBadFrame, "byte 0: bad");
  CHECK(to_sexp(error) == "(:TYPE :RESPONSE :STATUS :ERROR :PAYLOAD (:MESSAGE \"byte 0: bad\" :CODE :BAD-FRAME))");
  CHECK(is_error_response(error));
  CHECK(error_response_code(error) == "BAD-FRAME");
  CHECK(is_error_response(parse("(:type :response :status :error)")));
}

TEST_CASE("error responses replace bytes that are not UTF-8", "[daemon]") {
  const Value error = make_error_response("X", "bad \xFF byte \xC3");
  CHECK(error.path({"PAYLOAD", "MESSAGE"}).text() == "bad ? byte ?");
}

TEST_CASE("frame errors map to BAD-FRAME, oversized frames to FRAME-TOO-LARGE", "[daemon]") {
  CHECK(error_response_code(make_frame_error_response({FrameErrorKind::bad_prefix, "m"})) == "BAD-FRAME");
  CHECK(error_response_code(make_frame_error_response({FrameErrorKind::unreadable_payload, "m"})) == "BAD-FRAME");
  CHECK(error_response_code(make_frame_error_response({FrameErrorKind::too_large, "m"})) == "FRAME-TOO-LARGE");
  CHECK(make_frame_error_response({FrameErrorKind::truncated, "the message"}).path({"PAYLOAD", "MESSAGE"}) ==
        Value::string("the message"));
}

TEST_CASE("message type and auth token are read from the top level", "[daemon]") {
  const Value request = parse("(:type :request :auth \"tok\" :payload (:auth \"inner\"))");
  CHECK(message_type(request) == "REQUEST");
  REQUIRE(auth_token(request).has_value());
  CHECK(*auth_token(request) == "tok");
  CHECK_FALSE(auth_token(parse("(:TYPE :REQUEST :AUTH :TOK)")).has_value());
  CHECK_FALSE(auth_token(parse("(:TYPE :REQUEST)")).has_value());
  CHECK(message_type(parse("(:TYPE \"EVENT\")")).empty());
  CHECK(message_type(parse("7")).empty());
}

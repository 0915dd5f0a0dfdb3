// Gate decision records: secrets masked, only verifications that did not simply pass.
#include <catch2/catch.hpp>

#include "pipeline/gate_log.hpp"
#include "pipeline/signal.hpp"
#include "support/sexp.hpp"

namespace passepartout {

TEST_CASE("mask_secrets hides credentials of the usual shapes and leaves ordinary text", "[pipeline][gates]") {
  CHECK(mask_secrets("key sk-proj-abcdefghijklmnop1234 leaked") == "key [MASKED] leaked");
  CHECK(mask_secrets("token ghp_0123456789abcdefghijABCDEFGHIJ") == "token [MASKED]");
  CHECK(mask_secrets("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x") == "Authorization: [MASKED]");
  CHECK(mask_secrets("aws AKIAABCDEFGHIJKLMNOP here") == "aws [MASKED] here");
  CHECK(mask_secrets("export PASSWORD=hunter2 && ls") == "export [MASKED] && ls");
  CHECK(mask_secrets("api_key: 'abc123'") == "[MASKED]");
  CHECK(mask_secrets("sha 0123456789abcdef0123456789abcdef01") == "sha [MASKED]");
  CHECK(mask_secrets("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----") == "[MASKED]");
  const std::string ordinary = "Command 'rm -rf /' deletes /home/user/projects/passepartout/build: blocked";
  CHECK(mask_secrets(ordinary) == ordinary);
}

TEST_CASE("action_digest is stable and tells actions apart", "[pipeline][gates]") {
  const Value a = testing::sexp("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"ls\"))");
  const Value b = testing::sexp("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"ls -l\"))");
  CHECK(action_digest(a).size() == 16);
  CHECK(action_digest(a) == action_digest(testing::sexp("(:type :request :target :shell :payload (:cmd \"ls\"))")));
  CHECK(action_digest(a) != action_digest(b));
}

TEST_CASE("signals count by a bounded set of sensors: unknown ones as other, none without a sensor",
          "[pipeline][metrics]") {
  const auto sensors = counted_sensors();
  auto name = [&](std::string_view text) { return sensors[counted_sensor_of(testing::sexp(text))]; };
  CHECK(name("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hi\"))") == "user-input");
  CHECK(name("(:TYPE :EVENT :PAYLOAD (:SENSOR :HEARTBEAT))") == "heartbeat");
  CHECK(name("(:TYPE :EVENT :PAYLOAD (:SENSOR :SOMETHING-NEW))") == "other");
  CHECK(name("(:TYPE :EVENT :PAYLOAD (:SENSOR \"USER-INPUT\"))") == "none");  // a string is no sensor keyword
  CHECK(name("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"ls\"))") == "none");
  CHECK(sensors.back() == "other");
}

TEST_CASE("verifications are counted for every stage and outcome, zeros included", "[pipeline][metrics]") {
  const auto tallies = verifications_counted();
  CHECK(tallies.size() == 3 * 3);
  CHECK(tallies.front().stage == "reason");
  CHECK(tallies.front().outcome == "passed");
}

}  // namespace passepartout

// The host's credential rule (seed I1 step 5, I6): an action carrying a
// configured provider key is blocked before any gate, whichever skills are
// loaded; the key is masked wherever text is logged or sent to a model.
#include <catch2/catch.hpp>

#include <string>

#include "pipeline/credential_rule.hpp"
#include "pipeline/gate_log.hpp"
#include "pipeline/transcript.hpp"
#include "pipeline/verifier.hpp"
#include "skills/registry.hpp"
#include "support/sexp.hpp"
#include "value/sexp_printer.hpp"

using namespace passepartout;
using passepartout::testing::sexp;

namespace {

constexpr std::string_view kKey = "local-key-0123456789";

// Sets the keys for one test and forgets them after (the set is process-wide).
struct WithKeys {
  explicit WithKeys(std::vector<KnownCredential> keys) { KnownCredentials::set(std::move(keys)); }
  ~WithKeys() { KnownCredentials::set({}); }
  WithKeys(const WithKeys&) = delete;
  WithKeys& operator=(const WithKeys&) = delete;
};

}  // namespace

TEST_CASE("keys are found in any string of an action, keywords and symbols too", "[credentials]") {
  const WithKeys keys({{std::string(kKey), "LOCAL_KEY"}, {"short", "TOO_SHORT"}});
  CHECK_FALSE(KnownCredentials::empty());
  const std::string* origin =
      KnownCredentials::found_in(sexp(R"((:TYPE :REQUEST :PAYLOAD (:CMD ("curl" "-H" "x: local-key-0123456789"))))"));
  REQUIRE(origin != nullptr);
  CHECK(*origin == "LOCAL_KEY");
  CHECK(KnownCredentials::found_in(sexp("(:A |local-key-0123456789|)")) != nullptr);
  CHECK(KnownCredentials::found_in(sexp(R"((:TEXT "local-key-012345678"))")) == nullptr);  // one character short
  CHECK(KnownCredentials::found_in(sexp(R"((:TEXT "a short word"))")) == nullptr);  // under 8 characters: not kept
}

TEST_CASE("keys are masked whole, every occurrence, the longer of two first", "[credentials]") {
  const WithKeys keys({{"abcdefgh", "A"}, {"abcdefgh-and-more", "B"}});
  std::string text = "x abcdefgh-and-more y abcdefgh z abcdefgh";
  CHECK(KnownCredentials::mask(text));
  CHECK(text == "x [MASKED] y [MASKED] z [MASKED]");
  CHECK(mask_secrets("token from B: abcdefgh-and-more") == "token from B: [MASKED]");
  std::string same = "nothing here";
  CHECK_FALSE(KnownCredentials::mask(same));
}

TEST_CASE("with no key configured nothing is found and nothing masked", "[credentials]") {
  KnownCredentials::set({});
  CHECK(KnownCredentials::empty());
  CHECK(KnownCredentials::found_in(Value::string(kKey)) == nullptr);
  std::string text(kKey);
  CHECK_FALSE(KnownCredentials::mask(text));
  CHECK(text == kKey);
}

TEST_CASE("the credential rule blocks before any gate, with a host entry in the trace", "[credentials]") {
  const WithKeys keys({{std::string(kKey), "LOCAL_KEY"}});
  Registry registry;
  const auto snapshot = registry.snapshot();
  const Value signal = sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hi\"))");

  const Verification blocked = Verifier::verify(
      *snapshot, sexp(R"((:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:ACTION :MESSAGE :TEXT "key: local-key-0123456789")))"),
      signal);
  CHECK(blocked.outcome == VerifyOutcome::blocked);
  REQUIRE(blocked.trace.size() == 1);
  CHECK(blocked.trace[0].name() == kCredentialRuleName);
  CHECK(blocked.trace[0].version() == kGuardRuleVersion);
  CHECK(blocked.trace[0].result == GateResult::blocked);
  const std::string shown = to_sexp(blocked.to_value());
  CHECK(shown.find(":GATE \"credential-rule\" :VERSION \"host\" :RESULT :BLOCKED") != std::string::npos);
  CHECK(shown.find("LOCAL_KEY") != std::string::npos);
  CHECK(shown.find(kKey) == std::string::npos);

  const Verification passed = Verifier::verify(
      *snapshot, sexp(R"((:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:ACTION :MESSAGE :TEXT "no key here")))"), signal);
  CHECK(passed.outcome == VerifyOutcome::passed);
}

TEST_CASE("a transcript masks keys, cuts long turns and never splits a call from its result", "[transcript]") {
  const WithKeys keys({{std::string(kKey), "LOCAL_KEY"}});
  Transcript transcript;
  transcript.add_user("use local-key-0123456789");
  CHECK(transcript.turns().back().text == "use [MASKED]");
  transcript.add_assistant("", {ToolCall{"c1", "read", R"({"key":"local-key-0123456789"})"}});
  CHECK(transcript.turns().back().tool_calls[0].arguments == R"({"key":"[MASKED]"})");
  REQUIRE(transcript.unanswered_calls().size() == 1);
  transcript.add_tool_result(ToolCall{"c1", "read", "{}"}, std::string(Transcript::kMaxTurnChars + 10, 'y'));
  CHECK(transcript.unanswered_calls().empty());
  CHECK(transcript.turns().back().text.size() < Transcript::kMaxTurnChars + 64);
  CHECK(transcript.turns().back().text.find("10 more bytes left out") != std::string::npos);

  transcript.begin_signal();
  transcript.add_user("the current turn");
  transcript.trim(1);  // nothing fits: everything before the current signal goes, whole
  REQUIRE(transcript.turns().size() == 1);
  CHECK(transcript.turns()[0].text == "the current turn");
  CHECK(transcript.tokens() == Transcript::estimate_tokens(transcript.turns()[0]));
}

TEST_CASE("trimming drops an assistant turn with its results and starts again at a user turn", "[transcript]") {
  Transcript transcript;
  transcript.add_user("first");
  transcript.add_assistant("", {ToolCall{"c1", "t", "{}"}, ToolCall{"c2", "t", "{}"}});
  transcript.add_tool_result(ToolCall{"c1", "t", "{}"}, "r1");
  transcript.add_tool_result(ToolCall{"c2", "t", "{}"}, "r2");
  transcript.add_assistant("answer", {});
  transcript.add_user("second");
  transcript.add_assistant("second answer", {});
  transcript.begin_signal();
  transcript.add_user("third");
  const std::size_t keep = Transcript::estimate_tokens(transcript.turns()[5]) +
                           Transcript::estimate_tokens(transcript.turns()[6]) +
                           Transcript::estimate_tokens(transcript.turns()[7]);
  transcript.trim(keep);
  REQUIRE(transcript.turns().size() == 3);
  CHECK(transcript.turns()[0].text == "second");
  CHECK(transcript.turns()[2].text == "third");
}

TEST_CASE("a long turn is cut on a UTF-8 boundary", "[transcript]") {
  std::string text(Transcript::kMaxTurnChars - 1, 'a');
  text += "\xC3\xA9";  // é across the cut
  text += "tail";
  const std::string cut = bounded_turn_text(text);
  CHECK(cut.substr(0, Transcript::kMaxTurnChars - 1) == std::string(Transcript::kMaxTurnChars - 1, 'a'));
  CHECK(cut[Transcript::kMaxTurnChars - 1] == '\n');  // the é is left out whole
}

TEST_CASE("streamed text is masked whatever the split of a key across pieces", "[credentials]") {
  const WithKeys keys({{std::string(kKey), "LOCAL_KEY"}});
  const std::string text = "before local-key-0123456789 middle \xC3\xA9t\xC3\xA9 local-key-0123456789";
  for (std::size_t cut = 1; cut < text.size(); ++cut) {
    CredentialStreamMask stream;
    std::string out;
    const auto emit = [&](std::string_view piece) {
      CHECK(piece.find(kKey) == std::string_view::npos);
      out += piece;
    };
    stream.feed(std::string_view(text).substr(0, cut), emit);
    stream.feed(std::string_view(text).substr(cut), emit);
    stream.flush(emit);
    CHECK(out == "before [MASKED] middle \xC3\xA9t\xC3\xA9 [MASKED]");
  }
}

TEST_CASE("streamed text that cannot begin a key passes at once, an end that could waits for the next piece",
          "[credentials]") {
  const WithKeys keys({{std::string(kKey), "LOCAL_KEY"}});
  CredentialStreamMask stream;
  std::vector<std::string> out;
  const auto emit = [&](std::string_view piece) { out.emplace_back(piece); };
  stream.feed("Hello there, ", emit);
  CHECK(out == std::vector<std::string>{"Hello there, "});
  stream.feed("the key is local-", emit);  // "local-" may begin the key
  CHECK(out.back() == "the key is ");
  stream.feed("kettle.", emit);  // it did not
  CHECK(out.back() == "local-kettle.");
  stream.flush(emit);
  CHECK(out.size() == 3);
}

TEST_CASE("with no key configured streamed pieces pass at once, unchanged", "[credentials]") {
  KnownCredentials::set({});
  CredentialStreamMask stream;
  std::vector<std::string> out;
  stream.feed("abc", [&](std::string_view piece) { out.emplace_back(piece); });
  stream.feed("def", [&](std::string_view piece) { out.emplace_back(piece); });
  CHECK(out == std::vector<std::string>{"abc", "def"});
}

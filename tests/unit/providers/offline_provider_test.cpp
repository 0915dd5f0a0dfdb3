// The offline provider: an immediate, honest answer saying no model is reachable.
#include <catch2/catch.hpp>

#include <string>

#include "pipeline/response_parser.hpp"
#include "providers/cascade.hpp"
#include "providers/offline_provider.hpp"

using namespace passepartout;

TEST_CASE("the offline provider answers at once that no model is reachable and what to use instead",
          "[providers][offline]") {
  OfflineProvider provider;
  CHECK(provider.name() == "offline");
  bool answered = false;
  ProviderReply reply;
  ProviderRequest request;
  request.prompt = "what time is it?";
  provider.complete(std::move(request), [&](ProviderReply r) {
    answered = true;
    reply = std::move(r);
  });
  REQUIRE(answered);  // before complete() returned
  REQUIRE(reply.kind == ProviderReply::Kind::content);
  CHECK(reply.content.find("No language model is reachable") != std::string::npos);
  CHECK(reply.content.find("--script FILE") != std::string::npos);
  CHECK(reply.content.find("scripted provider") != std::string::npos);
  // It names nothing this daemon would not use.
  CHECK(reply.content.find("PROVIDER_CASCADE") == std::string::npos);
  CHECK(reply.content.find("_API_KEY") == std::string::npos);

  SECTION("it reaches the user as a message") {
    Value action = parse_response(reply);
    CHECK(action.path({"PAYLOAD", "ACTION"}).is_keyword("MESSAGE"));
    CHECK(action.path({"PAYLOAD", "TEXT"}).text() == OfflineProvider::kReply);
  }
  SECTION("as the last provider of a cascade it answers when the others fail") {
    Cascade cascade({std::make_shared<OfflineProvider>()});
    bool done = false;
    cascade.call({}, [&](CascadeOutcome outcome) {
      done = true;
      CHECK(outcome.provider == "offline");
      CHECK(outcome.reply.content == OfflineProvider::kReply);
    });
    CHECK(done);
  }
}

// The scripted provider: rules (first match wins, failures, tool calls,
// streaming, delays on a real pool), hit counters, and located script errors.
#include <re2/re2.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/executor.hpp"
#include "providers/cascade.hpp"
#include "providers/scripted_provider.hpp"
#include "support/async_wait.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"

using namespace passepartout;
using passepartout::testing::Awaited;
using passepartout::testing::CountDown;
using passepartout::testing::TempDir;

namespace {

ScriptedScript script(std::string_view yaml) {
  auto parsed = ScriptedScript::parse(yaml);
  INFO(yaml);
  if (!parsed) INFO(parsed.error().message);
  REQUIRE(parsed.has_value());
  return std::move(*parsed);
}

std::string script_error(std::string_view yaml) {
  auto parsed = ScriptedScript::parse(yaml);
  INFO(yaml);
  REQUIRE_FALSE(parsed.has_value());
  CHECK(parsed.error().code != ErrorCode::failed);
  return parsed.error().message;
}

struct Answer {
  ProviderReply reply;
  bool inline_answer = false;                   // completed before complete() returned
  std::thread::id thread;                       // where the completion ran
  std::vector<std::string> chunks;              // what on_chunk received first
  std::chrono::steady_clock::duration after{};  // from the call to the completion
};

// Asks `provider` and waits for its answer.
Answer ask(Provider& provider, std::string prompt, bool want_chunks = false) {
  auto chunks = std::make_shared<std::vector<std::string>>();
  ProviderRequest request;
  request.prompt = std::move(prompt);
  if (want_chunks) request.on_chunk = [chunks](std::string_view chunk) { chunks->emplace_back(chunk); };
  Awaited<Answer> answer;
  std::atomic<bool> returned{false};
  const auto start = std::chrono::steady_clock::now();
  provider.complete(std::move(request), [&, chunks](ProviderReply reply) {
    answer.set(Answer{std::move(reply), !returned.load(), std::this_thread::get_id(), *chunks,
                      std::chrono::steady_clock::now() - start});
  });
  returned = true;
  auto result = answer.wait();
  REQUIRE(result.has_value());
  CHECK(answer.times_set() == 1);
  return std::move(*result);
}

constexpr std::string_view kGreetings = R"(
rules:
  - match: '(?i)\bhello\b'
    reply: Hi there!
  - match: hello
    reply: never reached
  - match: weather
    reply: sunny
)";

}  // namespace

TEST_CASE("the first matching rule answers, and hits are counted per rule", "[providers][scripted]") {
  ScriptedProvider provider(script(kGreetings));
  CHECK(provider.name() == "scripted");
  REQUIRE(provider.rules().size() == 3);
  CHECK(provider.rules()[0].line == 3);

  Answer hello = ask(provider, "well, Hello world");
  REQUIRE(hello.reply.ok());
  CHECK(hello.reply.content == "Hi there!");
  CHECK(hello.inline_answer);
  CHECK(ask(provider, "hello").reply.content == "Hi there!");
  CHECK(ask(provider, "what is the weather like?").reply.content == "sunny");
  CHECK(provider.hits(0) == 2);
  CHECK(provider.hits(1) == 0);
  CHECK(provider.hits(2) == 1);
  CHECK(provider.hits(99) == 0);
  CHECK(provider.misses() == 0);
}

TEST_CASE("a prompt no rule matches is the failure 'no scripted rule matches'", "[providers][scripted]") {
  ScriptedProvider provider(script(kGreetings));
  Answer answer = ask(provider, "goodbye");
  CHECK_FALSE(answer.reply.ok());
  CHECK(answer.reply.error == "no scripted rule matches");
  CHECK(provider.misses() == 1);
}

TEST_CASE("a plain-text pattern matches where its text occurs, as the regex would", "[providers][scripted]") {
  ScriptedProvider provider(script(R"(
rules:
  - match: "build fail"
    reply: plain
  - match: "café"
    reply: accented
  - match: 'a.c'
    reply: regex
)"));
  REQUIRE(provider.rules().size() == 3);
  CHECK(provider.rules()[0].plain_text);
  CHECK(provider.rules()[1].plain_text);
  CHECK_FALSE(provider.rules()[2].plain_text);  // '.' is a metacharacter: searched by RE2
  CHECK(ask(provider, "why did the build fail?").reply.content == "plain");
  CHECK(ask(provider, "Why did the Build Fail?").reply.content != "plain");  // case counts, as in RE2
  CHECK(ask(provider, "a café near here").reply.content == "accented");
  CHECK(ask(provider, "xabcx").reply.content == "regex");
  CHECK(ask(provider, "xa-cx").reply.content == "regex");
  // The text search gives RE2's own verdict on these prompts.
  for (const std::string prompt : {"build fail", "build  fail", "", "café", "cafe", "caf", "a\nc"}) {
    for (const ScriptedRule& rule : provider.rules()) {
      if (!rule.plain_text) continue;
      INFO(rule.pattern << " on " << prompt);
      CHECK((prompt.find(rule.pattern) != std::string::npos) == RE2::PartialMatch(prompt, *rule.regex));
    }
  }
}

TEST_CASE("a failing rule answers with a failure carrying its reply", "[providers][scripted]") {
  ScriptedProvider provider(script(R"(
rules:
  - match: outage
    fail: true
    reply: simulated outage
  - match: silent
    fail: true
)"));
  Answer outage = ask(provider, "cause an outage");
  CHECK_FALSE(outage.reply.ok());
  CHECK(outage.reply.error == "simulated outage");
  CHECK(ask(provider, "silent").reply.error == "scripted failure (rule at line 6)");
}

TEST_CASE("a tool-call rule answers with one tool call", "[providers][scripted]") {
  ScriptedProvider provider(script(R"(
rules:
  - match: list
    tool_call:
      name: shell
      arguments: {cmd: ls -la, depth: 2, verbose: true, ratio: 0.5, quoted: "42", none: ~,
                  paths: [a, b], nested: {key: value}}
  - match: json
    tool_call: {name: write, arguments: '{"path": "/tmp/x", "content": "hi"}'}
)"));
  Answer list = ask(provider, "list files");
  REQUIRE(list.reply.kind == ProviderReply::Kind::tool_calls);
  CHECK(to_sexp(list.reply.tool_calls) ==
        R"(((:NAME "shell" :ARGUMENTS (:CMD "ls -la" :DEPTH 2 :VERBOSE T :RATIO 0.5 :QUOTED "42" :NONE NIL )"
        R"(:PATHS ("a" "b") :NESTED (:KEY "value")))))");
  Answer json = ask(provider, "json please");
  REQUIRE(json.reply.kind == ProviderReply::Kind::tool_calls);
  CHECK(json.reply.tool_calls.items()[0].at("ARGUMENTS") == Value::string(R"({"path": "/tmp/x", "content": "hi"})"));
}

TEST_CASE("a streaming rule sends chunks before it completes", "[providers][scripted]") {
  ScriptedProvider provider(script(R"(
rules:
  - match: story
    stream: true
    reply: "Once upon a time, in a land of ünïcödé, a cascade answered."
)"));
  Answer answer = ask(provider, "tell a story", true);
  REQUIRE(answer.reply.ok());
  CHECK(answer.chunks.size() > 1);
  std::string joined;
  for (const std::string& chunk : answer.chunks) joined += chunk;
  CHECK(joined == answer.reply.content);
  SECTION("without a chunk receiver it just completes") {
    CHECK(ask(provider, "story").reply.content == answer.reply.content);
  }
}

TEST_CASE("a delayed rule answers later from the executor, without blocking the caller",
          "[providers][scripted][concurrency]") {
  ThreadPool pool(2);
  ScriptedProvider provider(script(R"(
rules:
  - match: slow
    reply: worth the wait
    delay_ms: 40
    stream: true
)"),
                            &pool);
  Answer answer = ask(provider, "slow one", true);
  REQUIRE(answer.reply.ok());
  CHECK(answer.reply.content == "worth the wait");
  CHECK_FALSE(answer.inline_answer);
  CHECK(answer.thread != std::this_thread::get_id());
  CHECK(answer.after >= std::chrono::milliseconds(40));
  CHECK_FALSE(answer.chunks.empty());
}

TEST_CASE("a delayed rule without an executor fails and says why", "[providers][scripted]") {
  ScriptedProvider provider(script("rules: [{match: x, reply: y, delay_ms: 5}]"));
  Answer answer = ask(provider, "x");
  CHECK_FALSE(answer.reply.ok());
  CHECK(answer.reply.error ==
        "the scripted rule at line 1 waits delay_ms, but this provider was created without an executor");
}

TEST_CASE("a delayed rule still answers after the provider is gone", "[providers][scripted][concurrency]") {
  ThreadPool pool(1);
  Awaited<ProviderReply> reply;
  {
    ScriptedProvider provider(script("rules: [{match: x, reply: late, delay_ms: 10}]"), &pool);
    ProviderRequest request;
    request.prompt = "x";
    provider.complete(std::move(request), [&](ProviderReply r) { reply.set(std::move(r)); });
  }
  auto result = reply.wait();
  REQUIRE(result.has_value());
  CHECK(result->content == "late");
}

TEST_CASE("a scripted provider behind a cascade, with a failing rule first", "[providers][scripted]") {
  auto broken =
      std::make_shared<ScriptedProvider>(script("rules: [{match: '', fail: true, reply: 503}]"), nullptr, "broken");
  auto good = std::make_shared<ScriptedProvider>(script(kGreetings));
  Cascade cascade({broken, good});
  Awaited<CascadeOutcome> outcome;
  ProviderRequest request;
  request.prompt = "hello";
  cascade.call(std::move(request), [&](CascadeOutcome o) { outcome.set(std::move(o)); });
  auto result = outcome.wait();
  REQUIRE(result.has_value());
  CHECK(result->reply.content == "Hi there!");
  CHECK(result->provider == "scripted");
  REQUIRE(result->failures.size() == 1);
  CHECK(result->failures[0].provider == "broken");
  CHECK(result->failures[0].message == "503");
}

TEST_CASE("hit counters stay exact under concurrent requests", "[providers][scripted][concurrency]") {
  ScriptedProvider provider(script(kGreetings));
  constexpr int kThreads = 4;
  constexpr int kCalls = 500;
  CountDown answered(kThreads * kCalls * 2);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        for (const char* prompt : {"hello", "rain"}) {
          ProviderRequest request;
          request.prompt = prompt;
          provider.complete(std::move(request), [&](ProviderReply) { answered.arrive(); });
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  REQUIRE(answered.wait());
  CHECK(provider.hits(0) == kThreads * kCalls);
  CHECK(provider.misses() == kThreads * kCalls);
}

TEST_CASE("a bare list of rules is a script too", "[providers][scripted]") {
  ScriptedProvider provider(script("- {match: a, reply: b}\n- {match: c, reply: d}\n"));
  CHECK(ask(provider, "c").reply.content == "d");
  CHECK(ScriptedScript::parse("rules:\n").value().rules.empty());
}

TEST_CASE("script errors name the line, the column and what to do", "[providers][scripted]") {
  SECTION("YAML syntax") {
    CHECK(script_error("rules:\n  - match: [unclosed\n").rfind("<string>:3:1: YAML syntax error: ", 0) == 0);
  }
  SECTION("an unknown key, with a suggestion") {
    CHECK(script_error("rules:\n  - match: a\n    rply: b\n") ==
          "<string>:3:5: unknown key 'rply' in rule 1; did you mean 'reply'?\n"
          "<string>:2:5: rule 1 gives no answer: add 'reply' (the text to return), 'tool_call', or 'fail: true'");
  }
  SECTION("an unknown top-level key") {
    CHECK(script_error("rules: []\nmodel: x\n") == "<string>:2:1: unknown key 'model'; allowed keys are rules");
  }
  SECTION("wrong types") {
    const std::string message = script_error(R"(rules:
  - match: a
    reply: b
    delay_ms: soon
    fail: maybe
  - match: [x]
    reply: {a: b}
)");
    CHECK(message ==
          "<string>:4:15: 'delay_ms' must be a whole number of milliseconds from 0 to 3600000, found 'soon'\n"
          "<string>:5:11: 'fail' must be true or false, found 'maybe'\n"
          "<string>:6:12: 'match' must be text such as '(?i)hello', found a list\n"
          "<string>:7:12: 'reply' must be text such as 'Hello!', found a map");
  }
  SECTION("an invalid regular expression") {
    const std::string message = script_error("rules:\n  - match: '(unclosed'\n    reply: x\n");
    CHECK(message.rfind("<string>:2:12: invalid regular expression '(unclosed': missing ): ", 0) == 0);
    CHECK(message.find("RE2 syntax") != std::string::npos);
  }
  SECTION("a rule without match, and one that is not a map") {
    CHECK(script_error("rules:\n  - reply: x\n  - just text\n") ==
          "<string>:2:5: rule 1 has no 'match': add the regular expression to search in the prompt ('' matches "
          "every prompt)\n"
          "<string>:3:5: rule 2 must be a map such as {match: hello, reply: Hi}, found 'just text'");
  }
  SECTION("answers that contradict each other") {
    CHECK(script_error("rules:\n  - match: a\n    reply: b\n    tool_call: {name: shell}\n") ==
          "<string>:3:5: rule 1 has both 'reply' and 'tool_call'; a rule answers with one of them");
    CHECK(script_error("rules:\n  - match: a\n    fail: true\n    stream: true\n") ==
          "<string>:4:5: rule 1 both fails and streams; remove 'stream' or 'fail'");
  }
  SECTION("a tool call without a name") {
    CHECK(script_error("rules:\n  - match: a\n    tool_call: {arguments: {x: 1}}\n") ==
          "<string>:3:16: 'tool_call' has no 'name': add the tool to call, such as 'name: shell'");
  }
  SECTION("a duplicate key") {
    CHECK(script_error("rules:\n  - match: a\n    reply: b\n    reply: c\n") ==
          "<string>:4:5: duplicate key 'reply' in rule 1 (first given at line 3); keep one");
  }
  SECTION("empty, scalar and multi-document scripts") {
    CHECK(script_error("") ==
          "<string>:1:1: the script is empty; add rules such as 'rules: [{match: hello, reply: Hi}]'");
    CHECK(script_error("hello") ==
          "<string>:1:1: a script must be a map such as 'rules: [{match: hello, reply: Hi}]', found 'hello'");
    CHECK(script_error("rules: []\n---\nrules: []\n").rfind("<string>:3:1: a script holds one YAML document", 0) == 0);
  }
  SECTION("invalid UTF-8") {
    CHECK(script_error("rules:\n  - match: a\n    reply: \xff\n") ==
          "<string>:3:12: the script is not valid UTF-8; save it as UTF-8");
  }
}

TEST_CASE("a script loads from a file, and its errors name the file", "[providers][scripted]") {
  TempDir dir;
  const auto good = dir.path() / "good.yaml";
  const auto bad = dir.path() / "bad.yaml";
  std::ofstream(good) << kGreetings;
  std::ofstream(bad) << "rules:\n  - match: a\n    delay_ms: -1\n    reply: b\n";

  auto loaded = ScriptedScript::load(good);
  REQUIRE(loaded.has_value());
  CHECK(loaded->rules.size() == 3);

  auto failed = ScriptedScript::load(bad);
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().message.rfind(bad.string() + ":3:15: 'delay_ms' must be", 0) == 0);

  auto missing = ScriptedScript::load(dir.path() / "missing.yaml");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::not_found);
}

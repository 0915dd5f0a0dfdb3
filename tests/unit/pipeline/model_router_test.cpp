// The model router in the loop (seed D3, ABI 1.4): the bundled model-router
// routes by sensor, prompt size, tools offered and the client's model; a
// private prompt goes to local providers only — a remote one is never called,
// the call fails when no local one answers, and the session stays local-only
// under any router or none; a router that throws, answers garbage or stalls
// fails only that provider; and the router swapped while chats run.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/model_routing.hpp"
#include "pipeline/signal.hpp"
#include "support/held_gate.hpp"
#include "unit/pipeline/pipeline_rig.hpp"

namespace passepartout {
namespace {

using namespace std::chrono_literals;
using testing::Rig;
using testing::SkillSpec;

// A provider that records the model of each call it gets and answers
// "from <name>", or fails when told to.
class Endpoint final : public Provider {
 public:
  Endpoint(std::string name, bool local) : name_(std::move(name)), local_(local) {}
  std::string_view name() const noexcept override { return name_; }
  std::string_view default_model() const noexcept override { return "default-model"; }
  bool is_local() const noexcept override { return local_; }
  void complete(const ProviderRequest& request, ProviderCompletion done) override {
    {
      std::lock_guard lock(mutex_);
      models_.push_back(request.model);
    }
    if (failing_.load()) {
      done(ProviderReply::failed("down", FailureClass::transport));
      return;
    }
    done(ProviderReply::text("from " + name_));
  }
  void set_failing(bool failing) { failing_.store(failing); }
  std::vector<std::string> models() const {
    std::lock_guard lock(mutex_);
    return models_;
  }
  std::size_t calls() const { return models().size(); }

 private:
  std::string name_;
  bool local_;
  std::atomic<bool> failing_{false};
  mutable std::mutex mutex_;
  std::vector<std::string> models_;
};

struct RouterRig {
  Rig rig;
  std::shared_ptr<Endpoint> remote = std::make_shared<Endpoint>("remote", false);
  std::shared_ptr<Endpoint> local = std::make_shared<Endpoint>("local", true);

  explicit RouterRig(std::vector<SkillSpec> skills) : rig(std::move(skills), {}) {
    rig.cascade.add(remote);  // asked first
    rig.cascade.add(local);
  }
  // The text the chat answered with.
  std::string chat(Value signal) {
    auto sink = std::make_shared<testing::RecordingSink>();
    rig.run(std::move(signal), sink);
    std::string out;
    for (const std::string& m : sink->printed()) out += m + "\n";
    return out;
  }
};

SkillSpec router(const std::string& config) { return SkillSpec{"model-router", 0, "config:\n" + config, true}; }

Value with_meta(Value signal, std::string_view key, Value value) {
  const Value meta = signal.at("META").with(key, std::move(value));
  return signal.with("META", meta);
}

TEST_CASE("model-router routes by sensor, prompt size, tools offered and the client's model", "[pipeline][router]") {
  SECTION("by sensor: a chat message goes to a small model, user input keeps the default") {
    RouterRig r({router("  routes:\n    - {name: small, sensor: [chat-message], models: {remote: tiny-1b}}\n")});
    Value chat = user_input_signal("hello", "s1");
    chat = chat.with("PAYLOAD", chat.at("PAYLOAD").with("SENSOR", Value::keyword("CHAT-MESSAGE")));
    r.chat(chat);
    r.chat(user_input_signal("hello", "s1"));
    CHECK(r.remote->models() == std::vector<std::string>{"tiny-1b", ""});
  }
  SECTION("by the estimated size of the prompt") {
    RouterRig r(
        {router("  routes:\n    - {name: long, min_prompt_tokens: 2000, skip: [remote]}\n"
                "    - {name: short, models: {remote: small-model}}\n")});
    r.chat(user_input_signal("hello", "s1"));
    r.chat(user_input_signal(std::string(10000, 'x'), "s2"));
    CHECK(r.remote->models() == std::vector<std::string>{"small-model"});
    CHECK(r.local->models() == std::vector<std::string>{""});  // the long one, at its default
  }
  SECTION("by whether tools are offered") {
    RouterRig no_tools({router("  routes:\n    - {tools: true, models: {remote: tool-model}}\n")});
    no_tools.chat(user_input_signal("hello", "s1"));
    CHECK(no_tools.remote->models() == std::vector<std::string>{""});
    RouterRig tools({router("  routes:\n    - {tools: true, models: {remote: tool-model}}\n"),
                     {"tool-permissions", 0, {}, true},
                     {"file-tools", 0, {}, true}});
    tools.chat(user_input_signal("hello", "s1"));
    CHECK(tools.remote->models() == std::vector<std::string>{"tool-model"});
  }
  SECTION("by the model the client asked for, when a route allows it") {
    RouterRig r({router("  routes:\n    - {client_model: [\"gpt-4o*\"], only: [remote]}\n")});
    r.chat(with_meta(user_input_signal("hello", "s1"), "MODEL", Value::string("gpt-4o-mini")));
    r.chat(with_meta(user_input_signal("hello", "s2"), "MODEL", Value::string("some-other")));
    CHECK(r.remote->models() == std::vector<std::string>{"gpt-4o-mini", ""});
    CHECK(r.local->calls() == 0);
  }
  SECTION("a skipped provider's reason is in the log, the seed's 'filtered' line with it") {
    RouterRig r({router("  routes:\n    - {name: nothing-remote, skip: [remote]}\n")});
    CHECK(r.chat(user_input_signal("hello", "s1")).find("from local") != std::string::npos);
    CHECK(r.remote->calls() == 0);
    CHECK(r.rig.logged("Skipping remote (filtered: skipped by model-router@1.0.0: route nothing-remote)"));
  }
}

TEST_CASE("a private prompt goes to local providers only, fails closed, and the session stays local-only",
          "[pipeline][router][privacy]") {
  RouterRig r({router("  privacy_tags: [\"@personal\"]\n  private_patterns: ['\\b\\d{3}-\\d{2}-\\d{4}\\b']\n")});
  SECTION("a privacy tag: the remote provider is never called, the local one answers") {
    const std::string shown = r.chat(user_input_signal("what did I note under @Personal yesterday?", "s1"));
    CHECK(shown.find("from local") != std::string::npos);
    CHECK(r.remote->calls() == 0);
    CHECK(r.rig.pipeline->local_only_sessions().size() == 1);
    const auto marked = r.rig.pipeline->local_only_sessions().list();
    REQUIRE(marked.size() == 1);
    CHECK(marked[0].session == "s1");
    CHECK(marked[0].reason == "private data (the privacy tag @personal)");
    CHECK(marked[0].marked_by == "model-router@1.0.0");
    // Sticky: a later turn with nothing private still stays here.
    r.chat(user_input_signal("and the weather?", "s1"));
    CHECK(r.remote->calls() == 0);
    CHECK(r.local->calls() == 2);
    // Another session is not affected.
    r.chat(user_input_signal("the weather?", "s2"));
    CHECK(r.remote->calls() == 1);
  }
  SECTION("a private pattern, with the local provider down: the call fails, nothing goes remote") {
    r.local->set_failing(true);
    const std::string shown = r.chat(user_input_signal("my number is 078-05-1120", "s1"));
    CHECK(shown.find(std::string(Cascade::kExhausted)) != std::string::npos);
    CHECK(r.remote->calls() == 0);
    CHECK(r.local->calls() >= 1);
    CHECK(r.rig.logged("the private pattern"));
    CHECK_FALSE(r.rig.logged("078-05-1120"));  // the reason names the pattern, never the data
  }
  SECTION("a :TAGS entry of the signal carrying the tag") {
    Value signal = user_input_signal("summarise this", "s1");
    signal = signal.with("PAYLOAD", signal.at("PAYLOAD").with("TAGS", Value::list({Value::string("work@personal")})));
    r.chat(signal);
    CHECK(r.remote->calls() == 0);
    CHECK(r.rig.pipeline->local_only_sessions().size() == 1);
  }
}

TEST_CASE("a local-only session stays local with no router loaded", "[pipeline][router][privacy]") {
  RouterRig r({router("  privacy_tags: [\"@personal\"]\n")});
  r.chat(user_input_signal("about @personal things", "s1"));
  REQUIRE(r.rig.pipeline->local_only_sessions().size() == 1);
  r.rig.registry.publish({});  // every skill gone, the router with them
  r.chat(user_input_signal("hello again", "s1"));
  CHECK(r.remote->calls() == 0);
  r.local->set_failing(true);
  CHECK(r.chat(user_input_signal("and again", "s1")).find(std::string(Cascade::kExhausted)) != std::string::npos);
  CHECK(r.remote->calls() == 0);
  CHECK(r.rig.logged("the session is local-only"));
}

TEST_CASE("a router that throws or answers garbage fails only that provider, named in the log", "[pipeline][router]") {
  SECTION("throws") {
    RouterRig r({{"router-skill", 10, "config: {throw-for: remote}\n"}});
    CHECK(r.chat(user_input_signal("hello", "s1")).find("from local") != std::string::npos);
    CHECK(r.remote->calls() == 0);
    CHECK(r.local->models() == std::vector<std::string>{"routed-local"});
    CHECK(r.rig.logged("the model router router-skill@1.0.0 failed for remote, which is not called: "));
    CHECK(r.rig.logged("the router failed on purpose"));
  }
  SECTION("answers use without a model") {
    RouterRig r({{"router-skill", 10, "config: {garbage-for: remote}\n"}});
    CHECK(r.chat(user_input_signal("hello", "s1")).find("from local") != std::string::npos);
    CHECK(r.remote->calls() == 0);
    CHECK(r.rig.logged("select_model chose an empty model"));
  }
  SECTION("the router of highest priority decides") {
    RouterRig r({{"router-skill", 20, "config: {skip-for: remote}\n"}, router("  routes: []\n")});
    r.chat(user_input_signal("hello", "s1"));
    CHECK(r.remote->calls() == 0);
    CHECK(r.rig.logged("skipped by router-skill@1.0.0: not this one"));
  }
}

TEST_CASE("a router that stalls past its budget fails that provider", "[pipeline][router]") {
  testing::HeldGate held;
  const std::string config = "gate_timeout: 100ms\nconfig: { hold-for: remote, until-file: \"" + held.release.string() +
                             "\", spinning-file: \"" + held.calls.string() + "\" }\n";
  RouterRig r({{"router-skill", 10, config}});
  std::string shown;
  CHECK(held.verify_when_late([&] { shown = r.chat(user_input_signal("hello", "s1")); }));
  CHECK(shown.find("from local") != std::string::npos);
  CHECK(r.remote->calls() == 0);
  CHECK(r.rig.logged("took longer than its budget of 100 ms"));
}

TEST_CASE("the router hot-swapped while chats run: every chat is answered, by one router or the other",
          "[pipeline][router][concurrency]") {
  RouterRig r({router("  routes:\n    - {models: {remote: model-a}}\n")});
  // A second generation of the same skill, routing elsewhere.
  Rig other({router("  routes:\n    - {models: {remote: model-b}}\n")}, {});
  const auto a = r.rig.registry.snapshot();
  const auto b = other.registry.snapshot();
  std::vector<std::shared_ptr<const Slot>> slots_a(a->slots().begin(), a->slots().end());
  std::vector<std::shared_ptr<const Slot>> slots_b(b->slots().begin(), b->slots().end());
  std::atomic<bool> done{false};
  std::thread swapper([&] {
    for (int i = 0; !done.load(); ++i) {
      r.rig.registry.publish(i % 2 == 0 ? slots_b : slots_a);
      std::this_thread::yield();
    }
  });
  constexpr int kChats = 60;
  std::atomic<int> answered{0};
  std::vector<std::thread> chats;
  for (int t = 0; t < 2; ++t) {
    chats.emplace_back([&, t] {
      for (int i = 0; i < kChats / 2; ++i) {
        auto promise = std::make_shared<std::promise<LoopReport>>();
        auto future = promise->get_future();
        r.rig.pipeline->inject(user_input_signal("hello", "s" + std::to_string(t)), nullptr,
                               [promise](LoopReport report) { promise->set_value(std::move(report)); });
        if (future.wait_for(20s) == std::future_status::ready) ++answered;
      }
    });
  }
  for (auto& chat : chats) chat.join();
  done.store(true);
  swapper.join();
  r.rig.registry.publish(slots_a);
  CHECK(answered.load() == kChats);
  const auto models = r.remote->models();
  CHECK(models.size() == static_cast<std::size_t>(kChats));
  for (const std::string& model : models) CHECK((model == "model-a" || model == "model-b"));
}

}  // namespace
}  // namespace passepartout

namespace passepartout {
namespace {

// Why model-router refuses to load with `config` (the config lines).
std::string refusal(const std::string& config) {
  testing::SkillFixtures fixtures;
  const auto file = std::filesystem::path(PP_MANIFEST_DIR) / "model-router.yaml";
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto manifest = SkillManifest::parse(text.substr(0, text.find("\nconfig:") + 1) + "config:\n" + config, file);
  REQUIRE(manifest.has_value());
  fixtures.install_library("model-router", PP_PLUGIN_DIR);
  std::vector<SkillManifest> manifests;
  manifests.push_back(std::move(*manifest));
  BootResult boot = boot_skills(std::move(manifests), fixtures.loader());
  REQUIRE(boot.disabled.size() == 1);
  return boot.disabled[0].reason;
}

TEST_CASE("model-router refuses a config it cannot follow, naming the key", "[pipeline][router]") {
  CHECK_THAT(refusal("  routes:\n    - {name: x, sensors: [tool-output]}\n"),
             Catch::Contains("config routes[0].sensors: not a route key (name, sensor,"));
  CHECK_THAT(refusal("  routes:\n    - {models: {openai: 42}}\n"),
             Catch::Contains("config routes[0].models.openai: expected a model's name, got 42"));
  CHECK_THAT(refusal("  private_patterns: ['(unclosed']\n"),
             Catch::Contains("pattern 'the private pattern '(unclosed'': invalid regex"));
  CHECK_THAT(refusal("  routes: [42]\n"), Catch::Contains("config routes[0]: expected a map such as"));
}

}  // namespace
}  // namespace passepartout

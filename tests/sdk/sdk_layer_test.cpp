// The SDK's C++ layer and the fixture libraries, exercised through the C ABI
// against a stub host: verdict conversion, exceptions at the boundary, override
// detection, ValueRef reading and building, and every fixture's behaviour.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "passepartout/skill.hpp"
#include "stub_host.hpp"

namespace {

using passepartout::Action;
using passepartout::Context;
using passepartout::LogLevel;
using passepartout::Signal;
using passepartout::ValueKind;
using passepartout::ValueRef;
using passepartout::Verdict;

// --- driving a table like the host does ----------------------------------------

// One instance of a table's skill, created with `config` and destroyed at scope exit.
class Instance {
 public:
  Instance(const pp_skill_api* api, const pp_value* config) : api_(api) {
    instance_ = api_->create(&stub::host(), &self_, config, &create_call_);
  }
  ~Instance() { destroy(); }
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  void* get() const { return instance_; }
  // Destroys the instance now, as the host does on unload.
  void destroy() {
    if (instance_ != nullptr) api_->destroy(instance_);
    instance_ = nullptr;
  }
  const std::string& create_error() const { return create_call_.error; }
  pp_self& self() { return self_; }

  // Runs the gate in `call` (which owns what it builds), on a zero-filled verdict.
  pp_status gate(pp_call& call, const pp_value* action, const pp_value* signal, pp_verdict& verdict) {
    verdict = pp_verdict{};
    return api_->gate(instance_, &call, action, signal, &verdict);
  }

 private:
  const pp_skill_api* api_;
  pp_self self_;
  pp_call create_call_;
  void* instance_ = nullptr;
};

// A library opened the way the loader opens it.
class Library {
 public:
  explicit Library(const std::string& file) {
    handle_ = dlopen((std::string(PP_FIXTURE_DIR) + "/" + file).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) error_ = dlerror();
  }
  static Library at(const std::string& path) {
    Library library;
    library.handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library.handle_ == nullptr) library.error_ = dlerror();
    return library;
  }
  Library(Library&& other) noexcept : handle_(other.handle_), error_(std::move(other.error_)) {
    other.handle_ = nullptr;
  }
  Library& operator=(Library&&) = delete;
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }

  bool loaded() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  const pp_skill_api* api() const {
    if (handle_ == nullptr) return nullptr;
    auto* entry = reinterpret_cast<pp_skill_entry_fn>(dlsym(handle_, PP_ENTRY_SYMBOL));
    return entry != nullptr ? entry() : nullptr;
  }

 private:
  Library() = default;
  void* handle_ = nullptr;
  std::string error_;
};

std::string text_of(const pp_value* v) {
  size_t len = 0;
  const char* bytes = stub::host().text(v, &len);
  return std::string(bytes, len);
}

// --- skills defined in the test, exported through their tables -----------------------

// Decides by the action's :DECIDE keyword; logs and reads config in its constructor.
class Decider final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "decider";
  static constexpr const char kVersion[] = "3.2.1";

  explicit Decider(const ValueRef& config)
      : label_(config.get("label").text()), from_accessor_(this->config().get("LABEL").text()) {
    log_info("created " + std::string(label_));
    log(LogLevel::debug, "debug line");
  }
  ~Decider() override { log_warn("destroyed"); }

  Verdict gate(const Action& action, const Signal& /*signal*/) override {
    const ValueRef decide = action.get("DECIDE");
    if (decide.is_keyword("block")) return Verdict::block("no " + std::string(label_));
    if (decide.is_keyword("warn")) return Verdict::block("careful", LogLevel::warn);
    if (decide.is_keyword("info")) return Verdict::block("mild", LogLevel::info);
    if (decide.is_keyword("approve")) return Verdict::approval("ask");
    if (decide.is_keyword("approve-other")) {
      return Verdict::approval("ask about this", action.with("DRY-RUN", action.context().t()));
    }
    if (decide.is_keyword("rewrite")) return Verdict::rewrite(action.with("N", action.context().integer(7)));
    if (decide.is_keyword("rewrite-nothing")) return Verdict::rewrite(ValueRef());
    if (decide.is_keyword("bad-reason")) return Verdict::block("\xff\xfe");
    if (decide.is_keyword("throw")) throw std::runtime_error("decider exploded");
    if (decide.is_keyword("throw-int")) throw 42;
    return Verdict::pass();
  }

  std::string_view label() const { return label_; }
  std::string_view from_accessor() const { return from_accessor_; }

 private:
  std::string_view label_;
  std::string_view from_accessor_;
};

// Default-constructible; every other hook; state counts swaps.
class Stateful final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "stateful";
  static constexpr const char kVersion[] = "1.0.0";

  bool trigger(const Signal& signal) override {
    if (signal.get("PAYLOAD").get("TEXT").text() == "boom") throw std::logic_error("trigger exploded");
    return signal.get("PAYLOAD").get("SENSOR").is_keyword(":user-input");
  }
  std::optional<std::string> prompt(const Signal& signal) override {
    const std::string_view text = signal.get("PAYLOAD").get("TEXT").text();
    if (text.empty()) return std::nullopt;
    if (text == "bad") return std::string("\xc3");
    return "prompt: " + std::string(text);
  }
  void self_test() override {
    if (generation_ < 0) throw std::runtime_error("self test failed");
  }
  ValueRef export_state(Context& ctx) override {
    return ctx.plist({{"GENERATION", ctx.integer(generation_ + 1)}, {"NOTE", ctx.string("hi")}});
  }
  void import_state(const ValueRef& state) override {
    if (!state.get("GENERATION").is_integer()) throw std::invalid_argument("no :GENERATION");
    generation_ = state.get("GENERATION").as_integer();
  }

  std::int64_t generation_ = 0;
};

class ThrowsInConstructor final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "throws";
  static constexpr const char kVersion[] = "1.0.0";
  ThrowsInConstructor() {
    log_error("about to fail");
    throw std::runtime_error("no database");
  }
};

constexpr pp_skill_api kDecider = passepartout::sdk_detail::skill_table<Decider>();
constexpr pp_skill_api kStateful = passepartout::sdk_detail::skill_table<Stateful>();
constexpr pp_skill_api kThrows = passepartout::sdk_detail::skill_table<ThrowsInConstructor>();

const pp_value* action_deciding(pp_call& call, const char* decision) {
  return stub::plist(call, {{"TOOL", stub::string(call, "shell")}, {"DECIDE", stub::keyword(call, decision)}});
}

}  // namespace

// --- the table -----------------------------------------------------------------------

TEST_CASE("the table carries the ABI version, name, version and only the overridden hooks", "[sdk]") {
  CHECK(kDecider.struct_size == sizeof(pp_skill_api));
  CHECK(kDecider.abi_major == PP_ABI_MAJOR);
  CHECK(kDecider.abi_minor == PP_ABI_MINOR);
  CHECK(std::string(kDecider.name) == "decider");
  CHECK(std::string(kDecider.version) == "3.2.1");
  CHECK(kDecider.gate != nullptr);
  CHECK(kDecider.trigger == nullptr);
  CHECK(kDecider.prompt == nullptr);
  CHECK(kDecider.self_test == nullptr);
  CHECK(kStateful.gate == nullptr);
  CHECK(kStateful.trigger != nullptr);
  CHECK(kStateful.import_state != nullptr);
}

// --- create and destroy ------------------------------------------------------------

TEST_CASE("create hands the config to the constructor, which can log and read config()", "[sdk]") {
  pp_call arena;
  const pp_value* config = stub::plist(arena, {{"LABEL", stub::string(arena, "alpha")}});
  Instance instance(&kDecider, config);
  REQUIRE(instance.get() != nullptr);
  const auto* decider = static_cast<const Decider*>(instance.get());
  CHECK(decider->label() == "alpha");
  CHECK(decider->from_accessor() == "alpha");
  CHECK(instance.self().logged(PP_LOG_INFO, "created alpha"));
  CHECK(instance.self().logged(PP_LOG_DEBUG, "debug line"));
  CHECK(passepartout::sdk_detail::current_creation == nullptr);

  instance.destroy();
  CHECK(instance.self().logged(PP_LOG_WARN, "destroyed"));
}

TEST_CASE("a constructor that throws makes create return NULL with the reason", "[sdk]") {
  Instance instance(&kThrows, nullptr);
  CHECK(instance.get() == nullptr);
  CHECK(instance.create_error() == "no database");
  CHECK(instance.self().logged(PP_LOG_ERROR, "about to fail"));
  CHECK(passepartout::sdk_detail::current_creation == nullptr);
}

TEST_CASE("create refuses a host table of another major version", "[sdk]") {
  pp_host_api old_host = stub::host();
  old_host.abi_major = 2;
  pp_self self;
  pp_call call;
  CHECK(kStateful.create(&old_host, &self, nullptr, &call) == nullptr);
  CHECK(call.error == "passepartout SDK: the host table is not ABI 1.x");
  CHECK(kStateful.create(nullptr, &self, nullptr, &call) == nullptr);
}

// --- gate verdicts -------------------------------------------------------------------

TEST_CASE("gate verdicts cross the boundary as pp_verdict", "[sdk]") {
  pp_call arena;
  Instance instance(&kDecider, stub::plist(arena, {{"LABEL", stub::string(arena, "beta")}}));
  REQUIRE(instance.get() != nullptr);
  pp_call call;
  pp_verdict verdict{};

  SECTION("pass") {
    CHECK(instance.gate(call, action_deciding(arena, "pass"), nullptr, verdict) == PP_OK);
    CHECK(verdict.kind == PP_VERDICT_PASS);
    CHECK(verdict.reason == nullptr);
    CHECK(call.built.empty());  // a pass builds nothing
  }
  SECTION("block at error level") {
    CHECK(instance.gate(call, action_deciding(arena, "block"), nullptr, verdict) == PP_OK);
    CHECK(verdict.kind == PP_VERDICT_BLOCK);
    CHECK(verdict.level == PP_LOG_ERROR);
    CHECK(text_of(verdict.reason) == "no beta");
  }
  SECTION("block at warn level, and info reported as warn") {
    CHECK(instance.gate(call, action_deciding(arena, "warn"), nullptr, verdict) == PP_OK);
    CHECK(verdict.level == PP_LOG_WARN);
    CHECK(text_of(verdict.reason) == "careful");
    CHECK(instance.gate(call, action_deciding(arena, "info"), nullptr, verdict) == PP_OK);
    CHECK(verdict.kind == PP_VERDICT_BLOCK);
    CHECK(verdict.level == PP_LOG_WARN);
  }
  SECTION("approval of the proposed action") {
    CHECK(instance.gate(call, action_deciding(arena, "approve"), nullptr, verdict) == PP_OK);
    CHECK(verdict.kind == PP_VERDICT_APPROVAL);
    CHECK(verdict.action == nullptr);
    CHECK(text_of(verdict.reason) == "ask");
  }
  SECTION("approval of another action") {
    CHECK(instance.gate(call, action_deciding(arena, "approve-other"), nullptr, verdict) == PP_OK);
    CHECK(verdict.kind == PP_VERDICT_APPROVAL);
    CHECK(stub::print(verdict.action) == "(:TOOL \"shell\" :DECIDE :APPROVE-OTHER :DRY-RUN T)");
  }
  SECTION("rewrite") {
    CHECK(instance.gate(call, action_deciding(arena, "rewrite"), nullptr, verdict) == PP_OK);
    CHECK(verdict.kind == PP_VERDICT_REWRITE);
    CHECK(stub::print(verdict.action) == "(:TOOL \"shell\" :DECIDE :REWRITE :N 7)");
  }
  SECTION("a rewrite without an action fails") {
    CHECK(instance.gate(call, action_deciding(arena, "rewrite-nothing"), nullptr, verdict) == PP_ERROR);
    CHECK(call.error == "passepartout: Verdict::rewrite needs an action");
  }
  SECTION("a reason that is not UTF-8 fails") {
    CHECK(instance.gate(call, action_deciding(arena, "bad-reason"), nullptr, verdict) == PP_ERROR);
    CHECK(call.error == "passepartout: the verdict's reason is not valid UTF-8");
  }
  SECTION("an exception fails the gate with its message") {
    CHECK(instance.gate(call, action_deciding(arena, "throw"), nullptr, verdict) == PP_ERROR);
    CHECK(call.error == "decider exploded");
  }
  SECTION("anything else thrown fails the gate as an unknown exception") {
    CHECK(instance.gate(call, action_deciding(arena, "throw-int"), nullptr, verdict) == PP_ERROR);
    CHECK(call.error == "unknown exception");
  }
}

// --- the other hooks -----------------------------------------------------------------

TEST_CASE("trigger, prompt, self_test and state hooks convert their results", "[sdk]") {
  Instance instance(&kStateful, nullptr);
  REQUIRE(instance.get() != nullptr);
  pp_call call;
  auto signal = [&call](const char* text) {
    return stub::plist(call, {{"TYPE", stub::keyword(call, "EVENT")},
                              {"PAYLOAD", stub::plist(call, {{"SENSOR", stub::keyword(call, "USER-INPUT")},
                                                             {"TEXT", stub::string(call, text)}})}});
  };

  SECTION("trigger") {
    std::int32_t triggered = -1;
    CHECK(kStateful.trigger(instance.get(), &call, signal("hello"), &triggered) == PP_OK);
    CHECK(triggered == 1);
    CHECK(kStateful.trigger(instance.get(), &call, nullptr, &triggered) == PP_OK);
    CHECK(triggered == 0);
    CHECK(kStateful.trigger(instance.get(), &call, signal("boom"), &triggered) == PP_ERROR);
    CHECK(triggered == 0);
    CHECK(call.error == "trigger exploded");
  }
  SECTION("prompt") {
    const pp_value* prompt = nullptr;
    CHECK(kStateful.prompt(instance.get(), &call, signal("rain?"), &prompt) == PP_OK);
    CHECK(text_of(prompt) == "prompt: rain?");
    CHECK(kStateful.prompt(instance.get(), &call, signal(""), &prompt) == PP_OK);
    CHECK(prompt == nullptr);
    CHECK(kStateful.prompt(instance.get(), &call, signal("bad"), &prompt) == PP_ERROR);
    CHECK(prompt == nullptr);
    CHECK(call.error == "passepartout: the prompt is not valid UTF-8");
  }
  SECTION("self_test") {
    CHECK(kStateful.self_test(instance.get(), &call) == PP_OK);
    static_cast<Stateful*>(instance.get())->generation_ = -1;
    CHECK(kStateful.self_test(instance.get(), &call) == PP_ERROR);
    CHECK(call.error == "self test failed");
  }
  SECTION("state hand-over") {
    const pp_value* state = nullptr;
    CHECK(kStateful.export_state(instance.get(), &call, &state) == PP_OK);
    CHECK(stub::print(state) == "(:GENERATION 1 :NOTE \"hi\")");
    Instance next(&kStateful, nullptr);
    CHECK(kStateful.import_state(next.get(), &call, state) == PP_OK);
    CHECK(static_cast<Stateful*>(next.get())->generation_ == 1);
    CHECK(kStateful.import_state(next.get(), &call, nullptr) == PP_ERROR);
    CHECK(call.error == "no :GENERATION");
  }
}

// --- ValueRef and Context ------------------------------------------------------------

TEST_CASE("ValueRef reads values through the host", "[sdk]") {
  pp_call call;
  const pp_host_api* host = &stub::host();
  const pp_value* items =
      stub::list(call, {stub::integer(call, 1), stub::string(call, "two"), stub::keyword(call, "three")});
  const ValueRef action(
      host, &call,
      stub::plist(call, {{"TOOL", stub::string(call, "shell")}, {"ARGS", items}, {"EMPTY", stub::nil(call)}}));
  CHECK(action.kind() == ValueKind::list);
  CHECK(action.is_list());
  CHECK(action.get("tool").text() == "shell");
  CHECK(action.get(":TOOL").is_string());
  CHECK(action.has("EMPTY"));
  CHECK_FALSE(action.get("EMPTY"));
  CHECK_FALSE(action.has("MISSING"));
  CHECK(action.get("MISSING").is_nil());
  CHECK(action.get("MISSING").get("DEEPER").text().empty());
  CHECK(action.get("ARGS").size() == 3);
  CHECK(action.get("ARGS")[0].as_integer() == 1);
  CHECK(action.get("ARGS")[0].as_float() == 1.0);
  CHECK(action.get("ARGS")[2].is_keyword("Three"));
  CHECK(action.get("ARGS")[2].is_keyword(":THREE"));
  CHECK_FALSE(action.get("ARGS")[1].is_keyword("two"));
  CHECK(action.get("ARGS")[3].is_nil());
  CHECK(action.get("ARGS")[3].handle() == nullptr);

  std::vector<std::string> printed;
  for (const ValueRef item : action.get("ARGS")) printed.push_back(item.print());
  CHECK(printed == std::vector<std::string>{"1", "\"two\"", ":THREE"});
  int count = 0;
  for (const ValueRef item : action.get("MISSING")) {
    static_cast<void>(item);
    ++count;
  }
  CHECK(count == 0);

  const ValueRef nothing;
  CHECK(nothing.is_nil());
  CHECK(nothing.size() == 0);
  CHECK(nothing.text().empty());
  CHECK(nothing.get("X").is_nil());
  CHECK_THROWS_AS(nothing.context(), std::logic_error);
}

TEST_CASE("Context builds values in the call and throws when the host refuses", "[sdk]") {
  pp_call call;
  const Context ctx(&stub::host(), &call);
  const ValueRef plist = ctx.plist({{"TEXT", ctx.string("x")},
                                    {"N", ctx.integer(-3)},
                                    {"F", ctx.real(0.5)},
                                    {"OK", ctx.boolean(true)},
                                    {"NO", ctx.nil()},
                                    {"SYM", ctx.symbol("foo")},
                                    {"MISSING", ValueRef(&stub::host(), &call, nullptr)},
                                    {"L", ctx.list({ctx.keyword("a"), ctx.list(std::vector<ValueRef>{})})}});
  CHECK(plist.print() == "(:TEXT \"x\" :N -3 :F 0.5 :OK T :NO NIL :SYM foo :MISSING NIL :L (:A NIL))");
  CHECK(plist.get("F").as_float() == 0.5);
  CHECK(plist.get("F").is_float());
  CHECK(plist.with("n", ctx.integer(4)).get("N").as_integer() == 4);
  CHECK(plist.get("N").as_integer() == -3);  // unchanged

  CHECK_THROWS_AS(ctx.string("\xff"), std::invalid_argument);
  CHECK_THROWS_AS(ctx.keyword(""), std::invalid_argument);
  CHECK_THROWS_AS(ctx.symbol(""), std::invalid_argument);
  CHECK_THROWS_AS(ctx.integer(1).with("K", ctx.t()), std::invalid_argument);

  SECTION("a value without a call cannot build, unless the other side has one") {
    const ValueRef read_only(&stub::host(), nullptr, plist.handle());
    CHECK_THROWS_AS(read_only.context(), std::logic_error);
    CHECK_THROWS_AS(read_only.print(), std::logic_error);
    CHECK(read_only.with("EXTRA", ctx.t()).get("EXTRA").is_t());
  }
}

// --- fixture libraries ---------------------------------------------------------------

TEST_CASE("fixture gates give the verdicts their names promise", "[sdk][fixtures]") {
  pp_call arena;
  const pp_value* action = stub::plist(arena, {{"TOOL", stub::string(arena, "shell")}});
  const pp_value* signal = stub::plist(arena, {{"TYPE", stub::keyword(arena, "EVENT")}});

  struct Expectation {
    const char* name;
    pp_status status;
    pp_verdict_kind kind;
    pp_log_level level;
    const char* reason_or_error;
  };
  const Expectation expectations[] = {
      {"block-gate", PP_OK, PP_VERDICT_BLOCK, PP_LOG_ERROR, "blocked by block-gate"},
      {"warn-gate", PP_OK, PP_VERDICT_BLOCK, PP_LOG_WARN, "warned by warn-gate"},
      {"approval-gate", PP_OK, PP_VERDICT_APPROVAL, 0, "approval-gate wants a human"},
      {"throw-gate", PP_ERROR, PP_VERDICT_PASS, 0, "gate exploded"},
      {"garbage-gate", PP_OK, 42, 0, ""},
      {"error-gate", PP_ERROR, PP_VERDICT_PASS, 0, "error-gate says no"},
  };
  for (const Expectation& expected : expectations) {
    INFO(expected.name);
    const Library library("lib" + std::string(expected.name) + ".so");
    REQUIRE(library.loaded());
    const pp_skill_api* api = library.api();
    REQUIRE(api != nullptr);
    CHECK(std::string(api->name) == expected.name);
    CHECK(std::string(api->version) == "1.0.0");
    CHECK(api->trigger == nullptr);
    CHECK(api->prompt == nullptr);
    Instance instance(api, nullptr);
    REQUIRE(instance.get() != nullptr);
    pp_call call;
    pp_verdict verdict{};
    CHECK(instance.gate(call, action, signal, verdict) == expected.status);
    if (expected.status == PP_OK) {
      CHECK(verdict.kind == expected.kind);
      if (expected.kind == PP_VERDICT_BLOCK) CHECK(verdict.level == expected.level);
      CHECK(text_of(verdict.reason) == expected.reason_or_error);
    } else {
      CHECK(call.error == expected.reason_or_error);
    }
  }
}

TEST_CASE("the rewrite fixture stamps the action and the logging fixture logs it", "[sdk][fixtures]") {
  pp_call arena;
  const pp_value* action = stub::plist(arena, {{"TOOL", stub::string(arena, "shell")}});
  const Library rewrite("librewrite-gate.so");
  const Library logging("liblogging-skill.so");
  REQUIRE(rewrite.loaded());
  REQUIRE(logging.loaded());
  Instance rewriter(rewrite.api(), nullptr);
  Instance logger(logging.api(), stub::plist(arena, {{"GREETING", stub::string(arena, "hello")}}));
  REQUIRE(logger.get() != nullptr);
  CHECK(logger.self().logged(PP_LOG_INFO, "logging-skill created with hello"));

  pp_call call;
  pp_verdict verdict{};
  REQUIRE(rewriter.gate(call, action, nullptr, verdict) == PP_OK);
  CHECK(verdict.kind == PP_VERDICT_REWRITE);
  CHECK(stub::print(verdict.action) == "(:TOOL \"shell\" :STAMP \"rewrite-gate\")");
  CHECK(logger.gate(call, verdict.action, nullptr, verdict) == PP_OK);
  CHECK(verdict.kind == PP_VERDICT_PASS);
  CHECK(logger.self().logged(PP_LOG_INFO, "gate saw (:TOOL \"shell\" :STAMP \"rewrite-gate\")"));
}

TEST_CASE("prompt fixtures trigger on weather and name themselves in the prompt", "[sdk][fixtures]") {
  pp_call call;
  auto signal = [&call](const char* text) {
    return stub::plist(call, {{"PAYLOAD", stub::plist(call, {{"TEXT", stub::string(call, text)}})}});
  };
  for (const char* name : {"prompt-a", "prompt-b"}) {
    INFO(name);
    const Library library("lib" + std::string(name) + ".so");
    REQUIRE(library.loaded());
    const pp_skill_api* api = library.api();
    CHECK(std::string(api->name) == name);
    CHECK(api->gate == nullptr);
    Instance instance(api, nullptr);
    std::int32_t triggered = -1;
    CHECK(api->trigger(instance.get(), &call, signal("the weather in Paris"), &triggered) == PP_OK);
    CHECK(triggered == 1);
    CHECK(api->trigger(instance.get(), &call, signal("the news"), &triggered) == PP_OK);
    CHECK(triggered == 0);
    const pp_value* prompt = nullptr;
    CHECK(api->prompt(instance.get(), &call, signal("weather?"), &prompt) == PP_OK);
    CHECK(text_of(prompt) == "prompt from " + std::string(name) + ": weather?");
  }
}

TEST_CASE("the slow fixture sleeps as configured, and create-fails reports its reason", "[sdk][fixtures]") {
  pp_call arena;
  const Library slow("libslow-gate.so");
  REQUIRE(slow.loaded());
  Instance instance(slow.api(), stub::plist(arena, {{"SLEEP-MS", stub::integer(arena, 20)}}));
  pp_call call;
  pp_verdict verdict{};
  const auto start = std::chrono::steady_clock::now();
  CHECK(instance.gate(call, nullptr, nullptr, verdict) == PP_OK);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(20));
  CHECK(verdict.kind == PP_VERDICT_PASS);

  const Library fails("libcreate-fails.so");
  REQUIRE(fails.loaded());
  Instance failed(fails.api(), nullptr);
  CHECK(failed.get() == nullptr);
  CHECK(failed.create_error() == "cannot open the rules database");
}

TEST_CASE("the refused fixtures are refusable for their own reasons", "[sdk][fixtures]") {
  SECTION("ABI and size") {
    const Library major("libabi-major-mismatch.so");
    const Library minor("libnewer-minor.so");
    const Library short_struct("libshort-struct.so");
    REQUIRE(major.api() != nullptr);
    CHECK(major.api()->abi_major == 2);
    REQUIRE(minor.api() != nullptr);
    CHECK(minor.api()->abi_minor == PP_ABI_MINOR + 1);
    REQUIRE(short_struct.api() != nullptr);
    CHECK(short_struct.api()->struct_size == 16);
  }
  SECTION("create-null returns NULL and says nothing") {
    const Library library("libcreate-null.so");
    REQUIRE(library.api() != nullptr);
    Instance instance(library.api(), nullptr);
    CHECK(instance.get() == nullptr);
    CHECK(instance.create_error().empty());
  }
  SECTION("null-hooks has nothing but create and destroy") {
    const Library library("libnull-hooks.so");
    const pp_skill_api* api = library.api();
    REQUIRE(api != nullptr);
    CHECK(api->struct_size == sizeof(pp_skill_api));
    CHECK((api->trigger == nullptr && api->prompt == nullptr && api->gate == nullptr && api->self_test == nullptr &&
           api->export_state == nullptr && api->import_state == nullptr));
    Instance instance(api, nullptr);
    CHECK(instance.get() != nullptr);
  }
  SECTION("no-entry loads but has no entry symbol") {
    const Library library("libno-entry.so");
    REQUIRE(library.loaded());
    CHECK(library.api() == nullptr);
  }
  SECTION("not-elf does not load") {
    const Library library("libnot-elf.so");
    CHECK_FALSE(library.loaded());
    CHECK_FALSE(library.error().empty());
  }
}

TEST_CASE("a skill written in plain C works through the same table", "[sdk]") {
  const Library library = Library::at(PP_SDK_C_SKILL);
  REQUIRE(library.loaded());
  const pp_skill_api* api = library.api();
  REQUIRE(api != nullptr);
  CHECK(std::string(api->name) == "plain-c-skill");
  CHECK(api->self_test == nullptr);

  pp_call arena;
  Instance instance(api, stub::plist(arena, {{"FORBIDDEN", stub::string(arena, "shell")}}));
  REQUIRE(instance.get() != nullptr);
  CHECK(instance.self().logged(PP_LOG_INFO, "plain-c-skill created"));
  pp_call call;
  pp_verdict verdict{};
  CHECK(instance.gate(call, stub::plist(arena, {{"TOOL", stub::string(arena, "shell")}}), nullptr, verdict) == PP_OK);
  CHECK(verdict.kind == PP_VERDICT_BLOCK);
  CHECK(text_of(verdict.reason) == "plain-c-skill forbids this tool");
  CHECK(instance.gate(call, stub::plist(arena, {{"TOOL", stub::string(arena, "read")}}), nullptr, verdict) == PP_OK);
  CHECK(verdict.kind == PP_VERDICT_PASS);

  const pp_value* state = nullptr;
  CHECK(api->export_state(instance.get(), &call, &state) == PP_OK);
  CHECK(stub::print(state) == "1");
  CHECK(api->import_state(instance.get(), &call, stub::string(arena, "x")) == PP_ERROR);
  CHECK(call.error == "plain-c-skill expects an integer state");
}

TEST_CASE("ten pass-through gates from real libraries, timed", "[sdk][fixtures]") {
  std::vector<Library> libraries;
  std::vector<std::unique_ptr<Instance>> instances;
  for (int i = 0; i < 10; ++i) {
    libraries.emplace_back("libpass-gate-" + std::to_string(i) + ".so");
    const pp_skill_api* api = libraries.back().api();
    REQUIRE(api != nullptr);
    CHECK(std::string(api->name) == "pass-gate-" + std::to_string(i));
    instances.push_back(std::make_unique<Instance>(api, nullptr));
  }
  pp_call arena;
  const pp_value* action = stub::plist(arena, {{"TOOL", stub::string(arena, "shell")}});
  const int rounds = 100000;
  pp_call call;
  int passed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < rounds; ++round) {
    for (auto& instance : instances) {
      pp_verdict verdict{};
      passed += instance->gate(call, action, nullptr, verdict) == PP_OK && verdict.kind == PP_VERDICT_PASS;
    }
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(passed == rounds * 10);
  CHECK(call.built.empty());
  const double ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
  WARN("10 pass-through gates: " << ns / rounds << " ns per action (stub host, this build's flags)");
}

// --- ABI 1.1: tools, actuators, observe, on_error ------------------------------------

namespace {

using passepartout::ErrorChoice;

// Tools and an actuator whose behaviour the arguments pick; counts observed signals.
class Hands final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "hands";
  static constexpr const char kVersion[] = "1.1.0";
  static constexpr passepartout::ToolSpec kTools[] = {
      {"echo", "Echoes :TEXT", R"({"type": "object", "properties": {"text": {"type": "string"}}})"},
      {"explode", "Throws", nullptr},
      {"count", nullptr, nullptr},
      {"nothing", nullptr, nullptr},
  };
  static constexpr const char* kActuators[] = {"shell", "Notify"};

  ValueRef call_tool(std::string_view tool, const ValueRef& args, const Signal& signal) override {
    const Context ctx = args.context();
    if (tool == "echo") {
      return ctx.plist({{"TOOL", ctx.string(tool)}, {"TEXT", args.get("TEXT")}, {"SIGNAL", signal.get("ID")}});
    }
    if (tool == "explode") throw std::runtime_error("tool exploded: " + std::string(args.get("WHY").text()));
    if (tool == "count") return ctx.integer(observed_);
    return ValueRef();  // "nothing": a default ref reads as NIL
  }

  ValueRef act(std::string_view target, const Action& action, const Signal& /*signal*/) override {
    if (action.has("FAIL")) throw 7;
    return action.with("DONE-BY", action.context().string(target));
  }

  void observe(const Signal& signal) override {
    if (signal.has("BOOM")) throw std::logic_error("observe exploded");
    ++observed_;
  }

  ErrorChoice on_error(const Signal& /*signal*/, const ValueRef& error) override {
    const ValueRef message = error.get("MESSAGE");
    if (message.is_keyword("skip")) return ErrorChoice::skip();
    if (message.is_keyword("fallback")) return ErrorChoice::fallback("try again: " + std::string(message.text()));
    if (message.is_keyword("bad-fallback")) return ErrorChoice::fallback("\xff");
    if (message.is_keyword("abort")) return ErrorChoice::abort();
    if (message.is_keyword("throw")) throw std::runtime_error("policy exploded");
    return ErrorChoice::standard();
  }

 private:
  std::int64_t observed_ = 0;  // the tests call from one thread
};

constexpr pp_skill_api kHands = passepartout::sdk_detail::skill_table<Hands>();

}  // namespace

TEST_CASE("the table lists the tools and actuators a skill declares, with its 1.1 hooks", "[sdk]") {
  CHECK(kHands.struct_size == PP_SKILL_API_SIZE_1_4);
  CHECK(kHands.abi_minor == PP_ABI_MINOR);
  REQUIRE(kHands.tool_count == 4);
  CHECK(std::string(kHands.tools[0].name) == "echo");
  CHECK(std::string(kHands.tools[0].description) == "Echoes :TEXT");
  CHECK(kHands.tools[2].description == nullptr);
  CHECK(kHands.tools[1].parameters == nullptr);
  REQUIRE(kHands.actuator_count == 2);
  CHECK(std::string(kHands.actuators[1]) == "Notify");
  CHECK(kHands.call_tool != nullptr);
  CHECK(kHands.act != nullptr);
  CHECK(kHands.observe != nullptr);
  CHECK(kHands.error_policy != nullptr);
  // A 1.0-style skill has none of them.
  CHECK(kDecider.tools == nullptr);
  CHECK(kDecider.tool_count == 0);
  CHECK(kDecider.call_tool == nullptr);
  CHECK(kDecider.actuators == nullptr);
  CHECK(kDecider.act == nullptr);
  CHECK(kDecider.observe == nullptr);
  CHECK(kDecider.error_policy == nullptr);
}

TEST_CASE("call_tool runs the named tool, and an exception fails it with its what()", "[sdk]") {
  pp_call arena;
  Instance instance(&kHands, nullptr);
  REQUIRE(instance.get() != nullptr);
  const pp_value* signal = stub::plist(arena, {{"ID", stub::integer(arena, 42)}});
  pp_call call;
  const pp_value* result = nullptr;

  SECTION("a result built in the call") {
    const pp_value* args = stub::plist(arena, {{"TEXT", stub::string(arena, "hi")}});
    CHECK(kHands.call_tool(instance.get(), &call, 0, args, signal, &result) == PP_OK);
    CHECK(stub::print(result) == "(:TOOL \"echo\" :TEXT \"hi\" :SIGNAL 42)");
  }
  SECTION("an exception") {
    const pp_value* args = stub::plist(arena, {{"WHY", stub::string(arena, "on purpose")}});
    CHECK(kHands.call_tool(instance.get(), &call, 1, args, signal, &result) == PP_ERROR);
    CHECK(call.error == "tool exploded: on purpose");
    CHECK(result == nullptr);
  }
  SECTION("a default ref is a NULL result, which the host reads as NIL") {
    result = signal;
    CHECK(kHands.call_tool(instance.get(), &call, 3, nullptr, signal, &result) == PP_OK);
    CHECK(result == nullptr);
  }
  SECTION("an index past the tools fails without calling the skill") {
    CHECK(kHands.call_tool(instance.get(), &call, 4, nullptr, signal, &result) == PP_ERROR);
    CHECK(call.error == "passepartout: the host asked for a tool the skill does not offer");
  }
}

TEST_CASE("act carries out the action for the named target, anything thrown fails it", "[sdk]") {
  pp_call arena;
  Instance instance(&kHands, nullptr);
  pp_call call;
  const pp_value* result = nullptr;
  const pp_value* action = stub::plist(arena, {{"TARGET", stub::keyword(arena, "NOTIFY")}});
  CHECK(kHands.act(instance.get(), &call, 1, action, nullptr, &result) == PP_OK);
  CHECK(stub::print(result) == "(:TARGET :NOTIFY :DONE-BY \"Notify\")");

  const pp_value* failing = stub::plist(arena, {{"FAIL", stub::keyword(arena, "T")}});
  CHECK(kHands.act(instance.get(), &call, 0, failing, nullptr, &result) == PP_ERROR);
  CHECK(call.error == "unknown exception");
  CHECK(kHands.act(instance.get(), &call, 2, action, nullptr, &result) == PP_ERROR);
  CHECK(call.error == "passepartout: the host asked for an actuator the skill does not serve");
}

TEST_CASE("observe reaches the skill and reports what it throws", "[sdk]") {
  pp_call arena;
  Instance instance(&kHands, nullptr);
  pp_call call;
  const pp_value* heartbeat = stub::plist(arena, {{"SENSOR", stub::keyword(arena, "HEARTBEAT")}});
  CHECK(kHands.observe(instance.get(), &call, heartbeat) == PP_OK);
  CHECK(kHands.observe(instance.get(), &call, heartbeat) == PP_OK);
  const pp_value* result = nullptr;
  CHECK(kHands.call_tool(instance.get(), &call, 2, nullptr, nullptr, &result) == PP_OK);
  CHECK(stub::print(result) == "2");
  CHECK(kHands.observe(instance.get(), &call, stub::plist(arena, {{"BOOM", stub::keyword(arena, "T")}})) == PP_ERROR);
  CHECK(call.error == "observe exploded");
}

TEST_CASE("on_error's choice crosses as pp_error_choice", "[sdk]") {
  pp_call arena;
  Instance instance(&kHands, nullptr);
  auto choose = [&](const char* message, pp_call& call, pp_error_choice& choice) {
    choice = pp_error_choice{};
    const pp_value* error = stub::plist(arena, {{"MESSAGE", stub::keyword(arena, message)}});
    return kHands.error_policy(instance.get(), &call, nullptr, error, &choice);
  };
  pp_call call;
  pp_error_choice choice{};

  CHECK(choose("skip", call, choice) == PP_OK);
  CHECK(choice.kind == PP_ERROR_SKIP);
  CHECK(choice.text == nullptr);
  CHECK(choose("fallback", call, choice) == PP_OK);
  CHECK(choice.kind == PP_ERROR_FALLBACK);
  CHECK(text_of(choice.text) == "try again: FALLBACK");
  CHECK(choose("abort", call, choice) == PP_OK);
  CHECK(choice.kind == PP_ERROR_ABORT);
  CHECK(choose("other", call, choice) == PP_OK);
  CHECK(choice.kind == PP_ERROR_DEFAULT);
  CHECK(choose("throw", call, choice) == PP_ERROR);
  CHECK(choice.kind == PP_ERROR_DEFAULT);
  CHECK(call.error == "policy exploded");
  CHECK(choose("bad-fallback", call, choice) == PP_ERROR);
  CHECK(choice.kind == PP_ERROR_DEFAULT);
  CHECK(choice.text == nullptr);
  CHECK(call.error == "passepartout: the fallback text is not valid UTF-8");
}

TEST_CASE("the toolbox fixture offers its tools and actuator through the C table", "[sdk][fixtures]") {
  const Library library("libtoolbox-a.so");
  REQUIRE(library.loaded());
  const pp_skill_api* api = library.api();
  REQUIRE(api != nullptr);
  CHECK(api->struct_size == PP_SKILL_API_SIZE_1_4);
  REQUIRE(api->tool_count == 3);
  CHECK(std::string(api->tools[0].name) == "echo-args");
  REQUIRE(api->actuator_count == 1);
  CHECK(std::string(api->actuators[0]) == "Recorder");

  pp_call arena;
  Instance instance(api, nullptr);
  REQUIRE(instance.get() != nullptr);
  pp_call call;
  const pp_value* result = nullptr;
  CHECK(api->call_tool(instance.get(), &call, 1, nullptr, nullptr, &result) == PP_ERROR);
  CHECK(call.error == "the toolbox tool failed on purpose");
  const pp_value* action = stub::plist(arena, {{"TARGET", stub::keyword(arena, "RECORDER")}});
  CHECK(api->act(instance.get(), &call, 0, action, nullptr, &result) == PP_OK);
  CHECK(stub::print(result) == "(:RECORDED (:TARGET :RECORDER) :TARGET \"Recorder\" :SKILL \"toolbox-a\")");
}

TEST_CASE("the ABI 1.0 fixture's table ends where ABI 1.0 ended", "[sdk][fixtures]") {
  const Library library("liblegacy-1-0.so");
  REQUIRE(library.loaded());
  const pp_skill_api* api = library.api();
  REQUIRE(api != nullptr);
  CHECK(api->abi_minor == 0);
  CHECK(api->struct_size == PP_SKILL_API_SIZE_1_0);
}

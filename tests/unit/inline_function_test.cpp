// InlineFunction: small callables kept inside, large ones on the heap, and the
// std::function behaviour the executor and the providers rely on.
#include "base/inline_function.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <memory>
#include <string>
#include <utility>

using passepartout::InlineFunction;

namespace {

// A step's closure as the pipeline posts it: two shared_ptrs and a 16-byte value.
struct StepSized {
  std::shared_ptr<int> self;
  std::shared_ptr<int> inner;
  std::array<char, 16> value{};
  void operator()() const { ++*self; }
};

struct Big {
  std::shared_ptr<int> count;
  std::array<char, 200> payload{};
  void operator()() const { ++*count; }
};

}  // namespace

TEST_CASE("InlineFunction keeps a step's closure inside and a large one on the heap", "[inline_function]") {
  STATIC_REQUIRE(InlineFunction<void()>::stores_inline<StepSized>());
  STATIC_REQUIRE_FALSE(InlineFunction<void()>::stores_inline<Big>());
  STATIC_REQUIRE(sizeof(InlineFunction<void()>) <= 64);

  auto calls = std::make_shared<int>(0);
  InlineFunction<void()> small = StepSized{calls, calls, {}};
  InlineFunction<void()> large = Big{calls, {}};
  small();
  large();
  CHECK(*calls == 2);
}

TEST_CASE("InlineFunction copies, moves and destroys its callable exactly once each way", "[inline_function]") {
  for (const bool big : {false, true}) {
    INFO((big ? "on the heap" : "inside"));
    auto calls = std::make_shared<int>(0);
    {
      InlineFunction<void()> f;
      CHECK_FALSE(f);
      CHECK(f == nullptr);
      if (big) {
        f = Big{calls, {}};
      } else {
        f = StepSized{calls, nullptr, {}};
      }
      CHECK(f);
      CHECK(calls.use_count() == 2);

      InlineFunction<void()> copy = f;  // a second callable holding the count
      CHECK(calls.use_count() == 3);
      InlineFunction<void()> moved = std::move(f);
      CHECK_FALSE(f);  // NOLINT(bugprone-use-after-move): moved-from is empty, as std::function
      CHECK(calls.use_count() == 3);
      moved();
      copy();
      CHECK(*calls == 2);

      copy = moved;  // the old callable is destroyed, the new one copied
      CHECK(calls.use_count() == 3);
      copy = nullptr;
      CHECK(calls.use_count() == 2);
      copy = std::move(moved);
      CHECK(calls.use_count() == 2);
      copy();
      CHECK(*calls == 3);
    }
    CHECK(calls.use_count() == 1);  // nothing leaked
  }
}

TEST_CASE("InlineFunction passes arguments through and returns results", "[inline_function]") {
  InlineFunction<std::string(std::string, int)> f = [](std::string text, int times) {
    std::string out;
    for (int i = 0; i < times; ++i) out += text;
    return out;
  };
  CHECK(f("ab", 3) == "ababab");

  auto owned = std::make_unique<int>(7);
  InlineFunction<int(std::unique_ptr<int>)> take = [](std::unique_ptr<int> p) { return *p; };
  CHECK(take(std::move(owned)) == 7);

  int (*const none)() = nullptr;
  InlineFunction<int()> from_null = none;
  CHECK_FALSE(from_null);  // a null function pointer makes an empty one, as in std::function
}

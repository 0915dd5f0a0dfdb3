// The control thread: a skill's hook running on it is readable from another
// thread (so shutdown can name a stuck create or state import), and waiting
// for it to be idle is bounded.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <string_view>
#include <vector>

#include "base/crash_context.hpp"
#include "skills/control_thread.hpp"

using namespace passepartout;
using namespace std::chrono_literals;

namespace {

bool lists(const std::vector<RunningHookOf>& running, const RunningSkill& skill) {
  return std::any_of(running.begin(), running.end(), [&](const RunningHookOf& r) { return r.running.skill == &skill; });
}

}  // namespace

TEST_CASE("a hook held on the control thread is named with its thread, which is busy until the hook returns",
          "[skills][concurrency]") {
  static const RunningSkill kSkill{"held-create", "2.0.0", ""};
  ControlThread control;
  CHECK(control.wait_idle_until(std::chrono::steady_clock::now()));

  std::promise<void> entered;
  std::promise<void> leave;
  std::shared_future<void> left = leave.get_future().share();
  control.post([&entered, left] {
    const HookScope scope(kSkill, "create");
    entered.set_value();
    left.wait();
  });
  REQUIRE(entered.get_future().wait_for(30s) == std::future_status::ready);

  CHECK_FALSE(control.wait_idle_until(std::chrono::steady_clock::now() + 50ms));
  const std::vector<RunningHookOf> running = running_hooks();
  const auto mine =
      std::find_if(running.begin(), running.end(), [](const RunningHookOf& r) { return r.running.skill == &kSkill; });
  REQUIRE(mine != running.end());
  CHECK(std::string_view(mine->role) == "the control");  // "on the control thread"
  CHECK(std::string_view(mine->running.hook) == "create");

  leave.set_value();
  CHECK(control.wait_idle_until(std::chrono::steady_clock::now() + 30s));
  CHECK_FALSE(lists(running_hooks(), kSkill));
}

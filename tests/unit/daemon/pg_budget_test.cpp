// The budget's caps across a fleet, against a real PostgreSQL 15: three
// nodes (each its own ledger and connection) reserving at once never pass a
// cap; a cap one node spent refuses the others; a node's holds left by a
// killed run are counted once, at their worst case, when it starts again;
// while the database is away a call is refused, fail closed.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/pg_budget.hpp"
#include "providers/budget.hpp"
#include "store/pg_client.hpp"
#include "store/pg_schema.hpp"
#include "support/pg_test_client.hpp"
#include "support/postgres_cluster.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::migrated_client;
using passepartout::testing::TempDir;

namespace {

constexpr std::int64_t kThursday = 1796293800000;  // 2026-12-03T10:30:00Z

// A daily cap of `limit` tokens, on a node's own ledger, shared through `client`.
std::shared_ptr<Budget> fleet_budget(const TempDir& dir, PgClient& client, const std::string& node, double limit) {
  BudgetCap cap;
  cap.unit = BudgetUnit::tokens;
  cap.limit = limit;
  cap.name = "daily_tokens";
  BudgetConfig config;
  config.caps = {cap};
  auto budget = Budget::open(dir.path() / "usage.sqlite3", std::move(config), PriceTable{});
  REQUIRE(budget.has_value());
  (*budget)->share(make_pg_shared_caps(client, node));
  return *budget;
}

BudgetCall call_of(std::int64_t input, std::int64_t output) {
  return BudgetCall{"openai", "gpt-x", {}, false, input, output};
}

TokenUsage usage(std::int64_t input, std::int64_t output) {
  TokenUsage used;
  used.input = input;
  used.output = output;
  return used;
}

// The fleet's count of the daily cap on kThursday: spent, reserved, and the holds left.
struct Count {
  double spent = 0;
  double reserved = 0;
  std::int64_t holds = 0;
};
Count count_of(const std::string& conninfo) {
  const PgOutcome outcome = testing::run_batch(
      conninfo, {{"SELECT coalesce(sum(spent), 0) AS spent, coalesce(sum(reserved), 0) AS reserved FROM "
                  "passepartout_budget WHERE cap = 'daily_tokens'",
                  {}},
                 {"SELECT count(*) AS n FROM passepartout_budget_holds", {}}});
  REQUIRE(outcome.ok());
  Count count;
  count.spent = std::stod(std::string(*outcome.results[0].at(0, "spent")));
  count.reserved = std::stod(std::string(*outcome.results[0].at(0, "reserved")));
  count.holds = std::stoll(std::string(*outcome.results[1].at(0, "n")));
  return count;
}

}  // namespace

TEST_CASE("1,000 reservations from three nodes at once never pass the fleet's cap", "[budget][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string conninfo = cluster.conninfo(cluster.create_database());
  constexpr int kNodes = 3;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 84;  // 1,008 reservations in all
  std::vector<std::unique_ptr<testing::PgLoop>> loops;
  std::vector<std::unique_ptr<PgClient>> clients;
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::shared_ptr<Budget>> budgets;
  // Every node starts cold, its own count empty: only the fleet's count knows.
  for (int i = 0; i < kNodes; ++i) {
    loops.push_back(std::make_unique<testing::PgLoop>());
    clients.push_back(migrated_client(*loops.back(), conninfo));
    dirs.push_back(std::make_unique<TempDir>());
    budgets.push_back(fleet_budget(*dirs.back(), *clients.back(), "node-" + std::to_string(i), 10'000));
  }
  std::atomic<int> settled{0}, released{0}, refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kNodes * kThreads; ++i) {
    threads.emplace_back([&, budget = budgets[static_cast<std::size_t>(i % kNodes)], i] {
      for (int j = 0; j < kPerThread; ++j) {
        Budget::Reservation reservation;
        if (budget->reserve(call_of(50, 50), reservation, kThursday)) {
          ++refused;
          continue;
        }
        if ((i + j) % 7 == 0) {  // some fail before they cost anything
          budget->release(reservation);
          ++released;
        } else {
          budget->settle(reservation, usage(50, 50));
          ++settled;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(settled + released + refused == kNodes * kThreads * kPerThread);
  // Every settled call spent its worst case: exactly what fits, never more.
  CHECK(settled == 100);
  const Count count = count_of(conninfo);
  CHECK(count.spent == Approx(10'000));
  CHECK(count.reserved == Approx(0).margin(1e-9));
  CHECK(count.holds == 0);
}

TEST_CASE("a cap one node has spent refuses the others, naming the fleet", "[budget][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string conninfo = cluster.conninfo(cluster.create_database());
  testing::PgLoop loop;
  auto client_a = migrated_client(loop, conninfo);
  auto client_b = migrated_client(loop, conninfo);
  TempDir dir_a, dir_b;
  auto a = fleet_budget(dir_a, *client_a, "node-a", 1000);
  auto b = fleet_budget(dir_b, *client_b, "node-b", 1000);
  Budget::Reservation spent;
  REQUIRE_FALSE(a->reserve(call_of(400, 500), spent, kThursday));
  a->settle(spent, usage(400, 500));

  Budget::Reservation held;
  const auto refusal = b->reserve(call_of(100, 100), held, kThursday);
  REQUIRE(refusal.has_value());
  CHECK_FALSE(held);
  CHECK(refusal->cap == "daily_tokens");
  CHECK(refusal->remaining == Approx(100));
  CHECK(refusal->requested == Approx(200));
  CHECK(refusal->message ==
        "Budget exhausted across the fleet: 100 tokens remaining, 200 tokens requested (cap "
        "daily_tokens, resets 2026-12-04T00:00:00Z)");
  // Node B's own count holds nothing of the refused call.
  CHECK(b->report(kThursday).caps[0].reserved == Approx(0).margin(1e-9));
  CHECK(b->report(kThursday).in_flight == 0);
  Budget::Reservation fits;
  CHECK_FALSE(b->reserve(call_of(50, 50), fits, kThursday));
  b->release(fits);
  CHECK(count_of(conninfo).spent == Approx(900));
}

TEST_CASE("a node's holds left by a killed run are counted once, at their worst case, when it starts again",
          "[budget][postgres]") {
  auto& cluster = testing::shared_postgres();
  const std::string conninfo = cluster.conninfo(cluster.create_database());
  testing::PgLoop loop;
  auto client = migrated_client(loop, conninfo);
  const std::vector<SharedCaps::Hold> holds{{"daily_tokens", "", 1796256000000, 300, 1000}};
  {
    auto first_run = make_pg_shared_caps(*client, "node-a");
    auto reserved = first_run->reserve("call-1", holds);
    REQUIRE(reserved.has_value());
    REQUIRE_FALSE(reserved->has_value());
    // The process dies here: neither settled nor released.
  }
  CHECK(count_of(conninfo).reserved == Approx(300));
  auto other_node = make_pg_shared_caps(*client, "node-b");  // another node's start changes nothing
  CHECK(count_of(conninfo).holds == 1);
  auto second_run = make_pg_shared_caps(*client, "node-a");
  Count count = count_of(conninfo);
  CHECK(count.spent == Approx(300));
  CHECK(count.reserved == Approx(0).margin(1e-9));
  CHECK(count.holds == 0);
  // Its settlement, should it come late, is not counted again.
  second_run->settle("call-1", holds, {200});
  CHECK(count_of(conninfo).spent == Approx(300));
}

TEST_CASE("while the state database is away a call is refused, fail closed, and served once it is back",
          "[budget][postgres]") {
  testing::PostgresCluster cluster;
  const std::string conninfo = cluster.conninfo(cluster.create_database());
  testing::PgLoop loop;
  auto client = migrated_client(loop, conninfo);
  TempDir dir;
  auto budget = fleet_budget(dir, *client, "node-a", 1000);
  cluster.stop();
  Budget::Reservation refused;
  const auto refusal = budget->reserve(call_of(10, 10), refused, kThursday);
  REQUIRE(refusal.has_value());
  CHECK_FALSE(refused);
  CHECK(refusal->cap == "fleet");
  CHECK(refusal->message.starts_with(
      "Budget cannot reach the fleet's count, so the call is refused: the state database is unreachable ("));
  CHECK(budget->report(kThursday).in_flight == 0);

  std::promise<void> reconnected;
  client->on_connected([&reconnected, once = std::make_shared<std::once_flag>()] {
    std::call_once(*once, [&reconnected] { reconnected.set_value(); });
  });
  cluster.start();
  REQUIRE(reconnected.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  Budget::Reservation served;
  CHECK_FALSE(budget->reserve(call_of(10, 10), served, kThursday));
  budget->settle(served, usage(10, 10));
  CHECK(count_of(conninfo).spent == Approx(20));
}

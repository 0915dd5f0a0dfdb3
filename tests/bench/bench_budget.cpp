// The budget's cost on every model call: one reservation against two caps
// (a daily dollar cap and a session token cap) and its settlement, each a
// write to the SQLite ledger in WAL mode, as a call makes them. The median
// of many; the ledger is in a temporary folder on the machine's disk.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <vector>

#include "bench_caps.hpp"
#include "providers/budget.hpp"

namespace {

using namespace passepartout;
using Clock = std::chrono::steady_clock;

constexpr int kWarmup = 2000;
constexpr int kCalls = 20000;

void BM_BudgetReserve(benchmark::State& state) {
  for (auto _ : state) {
    std::random_device random;
    const auto dir = std::filesystem::temp_directory_path() / ("passepartout-bench-budget-" + std::to_string(random()));
    {
      const BudgetConfig config = bench::daily_and_session_caps();
      auto budget = Budget::open(usage_file(dir), config, PriceTable::builtin());
      if (!budget) {
        state.SkipWithError(budget.error().message.c_str());
        return;
      }
      const BudgetCall call{"openai", "gpt-4o-mini", "bench-session", false, 1200, 1024};
      TokenUsage usage;
      usage.input = 1200;
      usage.cached_input = 1024;
      usage.output = 80;
      std::vector<double> ns;
      ns.reserve(kCalls);
      Budget::Reservation reservation;
      for (int i = 0; i < kWarmup + kCalls; ++i) {
        const auto start = Clock::now();
        if ((*budget)->reserve(call, reservation)) {
          state.SkipWithError("a reservation was refused");
          return;
        }
        (*budget)->settle(reservation, usage);
        const auto took = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
        if (i >= kWarmup) ns.push_back(took);
      }
      std::sort(ns.begin(), ns.end());
      state.counters["budget_reserve_ns"] = ns[ns.size() / 2];
      state.counters["budget_reserve_p99_ns"] = ns[ns.size() * 99 / 100];
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

}  // namespace

BENCHMARK(BM_BudgetReserve)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

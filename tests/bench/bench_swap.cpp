// Hot swap under load: swap latency (request to published), and what swapping
// every millisecond costs the signals verifying meanwhile.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "pipeline/verifier.hpp"
#include "skills/skill_host.hpp"
#include "value/sexp_reader.hpp"

namespace {
namespace fs = std::filesystem;
using namespace passepartout;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "bench_swap: %s\n", message.c_str());
  std::exit(1);
}

struct SwapWorld {
  fs::path root;
  std::unique_ptr<SkillHost> host;
  SkillManifest v1, v2;

  SwapWorld() {
    std::random_device random;
    root = fs::temp_directory_path() / ("passepartout-bench-" + std::to_string(random()));
    fs::create_directories(root / "manifests");
    fs::create_directories(root / "plugins");
    for (auto lib : {"libecho-v1.so", "libecho-v2.so"}) {
      fs::copy_file(fs::path(PP_FIXTURE_DIR) / lib, root / "plugins" / lib);
    }
    std::ofstream(root / "manifests" / "echo.yaml")
        << "name: echo\nversion: 1.0.0\nlibrary: libecho-v1.so\nabi: 1\nisolation: in-process\n";
    // Changes are kept in memory here: the audit's fsync comes after publication
    // and is not part of the figure, but it would pace the swaps.
    auto created =
        SkillHost::create(SkillHostOptions{root / "manifests", root / "plugins", {}, false, root / "workspace", {}});
    if (!created) die(created.error().message);
    host = std::move(*created);
    if (!host->boot("bench").all_loaded()) die("echo did not load");
    v1 = parse("name: echo\nversion: 1.0.0\nlibrary: libecho-v1.so\nabi: 1\nisolation: in-process\n");
    v2 = parse("name: echo\nversion: 2.0.0\nlibrary: libecho-v2.so\nabi: 1\nisolation: in-process\n");
  }
  ~SwapWorld() {
    host.reset();
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  SkillManifest parse(const std::string& yaml) {
    auto m = SkillManifest::parse(yaml, root / "manifests" / "echo.yaml");
    if (!m) die(m.error().message);
    return *m;
  }
};

const Value& signal() {
  static const Value s = *read_sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hi\"))");
  return s;
}
const Value& action() {
  static const Value a =
      *read_sexp("(:TYPE :REQUEST :PAYLOAD (:ACTION :MESSAGE :TEXT \"hello\" :EXPLANATION \"a greeting\"))");
  return a;
}

// Verifies until told to stop, taking a snapshot per signal as the pipeline does.
struct Verifiers {
  std::atomic<bool> stop{false};
  std::atomic<long> done{0};
  std::atomic<long> lost{0};
  std::thread thread;

  explicit Verifiers(SkillHost& host) {
    thread = std::thread([this, &host] {
      Verification v;
      long local = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        auto snapshot = host.snapshot();
        Verifier::verify(*snapshot, action(), signal(), v);
        auto stamps = v.action.at("STAMPS").items();
        if (v.outcome != VerifyOutcome::passed || stamps.size() != 1) lost.fetch_add(1, std::memory_order_relaxed);
        if (++local % 64 == 0) done.store(local, std::memory_order_relaxed);
      }
      done.store(local, std::memory_order_relaxed);
    });
  }
  void finish() {
    stop = true;
    thread.join();
  }
};

double rate(long operations, Clock::duration elapsed) {
  return static_cast<double>(operations) / std::chrono::duration<double>(elapsed).count();
}

// What a swap costs the other core no matter what the swap does: loading and
// unloading a library changes this process's page tables three times (its
// data page copied on write, RELRO protected, the unmap; three remote flushes
// per swap with the tlb:tlb_flush tracepoint), and each change makes the
// kernel interrupt every other core running the process to flush its TLB.
// This does only that, three times per call: a page mapped, written and
// unmapped (one remote flush each; an mprotect there and back would be two).
void flush_tlbs_three_times() {
  constexpr std::size_t kPage = 4096;
  for (int i = 0; i < 3; ++i) {
    void* page = ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) die("cannot map a page");
    static_cast<volatile char*>(page)[0] = static_cast<char>(i);
    if (::munmap(page, kPage) != 0) die("cannot unmap a page");
  }
}

// Verification throughput is compared in alternating windows of the same run
// (quiet, then swapping every millisecond, then only flushing TLBs as often,
// ten times each) with one verifying thread throughout, so that drift of the
// machine (frequency, other load) affects all alike; each figure is the
// median of its windows. The flushing windows give floor_dip_pct: the dip no
// swap can go below on this machine.
void BM_HotSwap(benchmark::State& state) {
  constexpr int kWindows = 10;
  constexpr int kSwapsPerWindow = 100;
  constexpr int kSwaps = kWindows * kSwapsPerWindow;
  constexpr auto kWindow = std::chrono::milliseconds(kSwapsPerWindow);
  for (auto _ : state) {
    SwapWorld world;
    Verifiers verifiers(*world.host);
    std::vector<double> quiet_rates, swapping_rates, flushing_rates, publish_us;
    publish_us.reserve(kSwaps);
    long failed = 0;
    int swaps = 0;
    // The verification rate while `during` runs, into `rates`.
    const auto measure = [&](std::vector<double>& rates, auto&& during) {
      const long before = verifiers.done.load();
      const auto t0 = Clock::now();
      during();
      rates.push_back(rate(verifiers.done.load() - before, Clock::now() - t0));
    };
    // `action` once per millisecond, kSwapsPerWindow times: one window.
    const auto every_millisecond = [&](auto&& action) {
      auto next = Clock::now();
      for (int i = 0; i < kSwapsPerWindow; ++i) {
        next += std::chrono::milliseconds(1);
        action();
        std::this_thread::sleep_until(next);
      }
    };
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the verifier is up to speed
    for (int w = 0; w < kWindows; ++w) {
      measure(quiet_rates, [&] { std::this_thread::sleep_for(kWindow); });
      measure(swapping_rates, [&] {
        every_millisecond([&] {
          ChangeResult r = world.host->swap(swaps++ % 2 == 0 ? world.v2 : world.v1, "bench");
          if (!r.ok()) ++failed;
          publish_us.push_back(static_cast<double>(r.publish_us));
        });
      });
      measure(flushing_rates, [&] { every_millisecond(flush_tlbs_three_times); });
    }
    verifiers.finish();

    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double base_rate = median(quiet_rates);
    const double loaded_rate = median(swapping_rates);
    const double flushing_rate = median(flushing_rates);
    std::sort(publish_us.begin(), publish_us.end());
    auto at = [&](double q) {
      return publish_us[static_cast<std::size_t>(q * static_cast<double>(publish_us.size() - 1))];
    };
    state.counters["swap_p50_us"] = at(0.50);
    state.counters["swap_p99_us"] = at(0.99);
    state.counters["swaps_under_load"] = static_cast<double>(kSwaps - failed);
    state.counters["lost_signals_during_swaps"] = static_cast<double>(verifiers.lost.load());
    const auto dip_pct = [&](double during) { return std::max(0.0, (base_rate - during) / base_rate * 100.0); };
    state.counters["throughput_dip_pct"] = dip_pct(loaded_rate);
    state.counters["floor_dip_pct"] = dip_pct(flushing_rate);
    state.counters["verify_rate_baseline_per_s"] = base_rate;
    state.counters["verify_rate_swapping_per_s"] = loaded_rate;
  }
}
BENCHMARK(BM_HotSwap)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

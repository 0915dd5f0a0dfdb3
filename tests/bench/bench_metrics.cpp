// The metrics endpoint: how long one GET /metrics of the real daemon, with
// every bundled skill loaded, takes from the client's side (one kept-alive
// connection; the median of many scrapes).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "daemon_process.hpp"
#include "support/http_client.hpp"

namespace {

using namespace passepartout::bench;

constexpr int kWarmup = 20;
constexpr int kScrapes = 200;

void BM_Scrape(benchmark::State& state) {
  for (auto _ : state) {
    Scratch scratch;
    ServerProcess daemon(scratch.root, daemon_args(scratch.root));
    if (daemon.metrics_port() == 0) die("the daemon serves no metrics endpoint:\n" + daemon.log());
    passepartout::testing::HttpConnection connection(daemon.metrics_port());
    if (!connection.connected()) die("cannot connect to the metrics endpoint");
    std::vector<double> ms;
    ms.reserve(kScrapes);
    std::size_t bytes = 0;
    for (int i = 0; i < kWarmup + kScrapes; ++i) {
      const auto start = Clock::now();
      const auto reply = connection.request("GET", "/metrics");
      const auto took = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (reply.status != 200) die("a scrape failed:\n" + daemon.log());
      bytes = reply.body.size();
      if (i >= kWarmup) ms.push_back(took);
    }
    std::sort(ms.begin(), ms.end());
    state.counters["scrape_ms"] = ms[ms.size() / 2];
    state.counters["scrape_p99_ms"] = ms[ms.size() * 99 / 100];
    state.counters["scrape_bytes"] = static_cast<double>(bytes);
    if (!daemon.stop()) die("the daemon did not stop cleanly on SIGTERM:\n" + daemon.log());
  }
}

}  // namespace

BENCHMARK(BM_Scrape)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

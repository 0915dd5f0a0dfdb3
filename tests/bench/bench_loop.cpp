// The whole loop: user-input signals perceived, reasoned (prompt assembly,
// the scripted provider answering at once, parsing, every gate), acted on by
// the :TUI actuator, and the reply framed into a sink that drops it.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench_gates.hpp"
#include "daemon/frame_codec.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/pipeline.hpp"
#include "providers/cascade.hpp"
#include "providers/scripted_provider.hpp"

namespace {
using namespace passepartout;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& message) { bench::die("bench_loop", message); }

// Frames every reply as the daemon would, then drops it.
class NullFramingSink final : public ReplySink {
 public:
  void send(const Value& message) override {
    thread_local std::string buffer;
    buffer.clear();
    if (!codec_.encode_into(message, buffer)) die("a reply could not be framed");
    frames_.fetch_add(1, std::memory_order_relaxed);
  }
  bool is_open() const override { return true; }
  std::uint64_t frames() const { return frames_.load(std::memory_order_relaxed); }

 private:
  FrameCodec codec_;
  std::atomic<std::uint64_t> frames_{0};
};

struct LoopWorld {
  std::unique_ptr<bench::LoadedGates> gates;
  EventLoops pool;  // the pipeline's, as in the daemon
  ThreadPool blocking{1};
  Cascade cascade;
  std::unique_ptr<Pipeline> pipeline;

  LoopWorld(std::size_t threads, bool bundled)
      : gates(bundled ? bench::LoadedGates::bundled() : bench::LoadedGates::pass_through(10)), pool(threads) {
    auto script = ScriptedScript::parse(
        "rules:\n"
        "  - match: \"build\"\n"
        "    reply: '(:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:ACTION :MESSAGE :TEXT \"The linker could not find "
        "libyaml-cpp; install libyaml-cpp-dev.\" :EXPLANATION \"Answering the question about the failed build.\"))'\n",
        "bench-script");
    if (!script) die(script.error().message);
    cascade.add(std::make_shared<ScriptedProvider>(std::move(*script), nullptr, "scripted"));
    PipelineOptions options;  // the daemon's defaults: the prompt's LOGS section shows the last 20 lines
    options.version = "bench";
    pipeline = std::make_unique<Pipeline>(Pipeline::Services{gates->registry, cascade, pool, blocking, nullptr, nullptr},
                                          options);
  }
  ~LoopWorld() {
    pool.stop();
    blocking.stop();
  }
};

// Keeps `window` signals in flight over `sessions` sessions until `total`
// have finished; returns signals per second.
double drive(LoopWorld& world, std::size_t total, std::size_t sessions, std::size_t window) {
  auto sink = std::make_shared<NullFramingSink>();
  std::vector<Value> inputs;
  for (std::size_t s = 0; s < sessions; ++s) {
    inputs.push_back(user_input_signal("why did the build fail?", "session-" + std::to_string(s)));
  }
  std::atomic<std::size_t> started{0};
  std::atomic<std::size_t> finished{0};
  std::atomic<std::size_t> not_answered{0};
  std::mutex mutex;
  std::condition_variable all_done;
  std::function<void(std::size_t)> launch;
  launch = [&](std::size_t session) {
    if (started.fetch_add(1, std::memory_order_relaxed) >= total) return;
    world.pipeline->inject(inputs[session], sink, [&, session](LoopReport report) {
      if (report.stopped_by != "done") not_answered.fetch_add(1, std::memory_order_relaxed);
      if (finished.fetch_add(1, std::memory_order_acq_rel) + 1 == total) {
        std::lock_guard lock(mutex);
        all_done.notify_all();
        return;
      }
      launch(session);
    });
  };
  const auto start = Clock::now();
  for (std::size_t i = 0; i < window; ++i) launch(i % sessions);
  {
    std::unique_lock lock(mutex);
    if (!all_done.wait_for(lock, std::chrono::minutes(5), [&] { return finished.load() >= total; })) {
      die("the loop did not finish");
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (not_answered.load() != 0) die(std::to_string(not_answered.load()) + " signals were not answered");
  if (sink->frames() < total) die("fewer replies than signals");
  return static_cast<double>(total) / seconds;
}

void run_loop(benchmark::State& state, std::size_t threads, bool bundled, const char* key) {
  LoopWorld world(threads, bundled);
  drive(world, 2'000, 64, 256);  // warm up: skills, caches, allocator
  double rate = 0;
  for (auto _ : state) rate = drive(world, 50'000, 64, 256);
  state.counters[key] = rate;
}

void BM_Loop(benchmark::State& state) { run_loop(state, 2, false, "loop_signals_per_s"); }
void BM_Loop1Core(benchmark::State& state) { run_loop(state, 1, false, "loop_signals_per_s_1_core"); }
void BM_LoopBundled(benchmark::State& state) { run_loop(state, 2, true, "loop_bundled_signals_per_s"); }
BENCHMARK(BM_Loop)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Loop1Core)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoopBundled)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

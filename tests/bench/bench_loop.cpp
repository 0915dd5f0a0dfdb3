// The whole loop: user-input signals perceived, reasoned (prompt assembly,
// the scripted provider answering at once, parsing, every gate), acted on by
// the :TUI actuator, and the reply framed into a sink that drops it.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/executor.hpp"
#include "bench_gates.hpp"
#include "daemon/frame_codec.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/pipeline.hpp"
#include "providers/cascade.hpp"
#include "providers/scripted_provider.hpp"

namespace {
using namespace passepartout;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& message) { bench::die("bench_loop", message); }

// Frames every reply as the daemon would, then drops it. One per session, as
// the daemon has one per connection: the threads share no counter.
class alignas(128) NullFramingSink final : public ReplySink {
 public:
  void send(const Value& message) override {
    thread_local std::string buffer;
    buffer.clear();
    thread_local FrameCodec codec;
    if (!codec.encode_into(message, buffer)) die("a reply could not be framed");
    frames_.fetch_add(1, std::memory_order_relaxed);
  }
  bool is_open() const override { return true; }
  std::uint64_t frames() const { return frames_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> frames_{0};
};

struct LoopWorld {
  std::unique_ptr<bench::LoadedGates> gates;
  EventLoops pool;  // the pipeline's, as in the daemon
  ThreadPool blocking{1};
  Cascade cascade;
  std::filesystem::path decisions_dir;  // with a decision log: a temporary folder
  std::unique_ptr<DecisionLog> decisions;
  std::unique_ptr<Pipeline> pipeline;

  // `decision_buffer`: records per thread the decision log holds for its writer.
  // `bundled`: the bundled skills instead of ten pass-through gates;
  // `process_gate`: with them, a pass-through gate in a worker process.
  LoopWorld(std::size_t threads, bool bundled, bool record_decisions = false,
            std::size_t decision_buffer = DecisionLogOptions::kDefaultBuffer, bool process_gate = false)
      : gates(bundled ? bench::LoadedGates::bundled(process_gate) : bench::LoadedGates::pass_through(10)),
        pool(threads) {
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
    if (record_decisions) {  // the daemon's default settings: every decision recorded
      std::string dir = (std::filesystem::temp_directory_path() / "pp-bench-decisions-XXXXXX").string();
      if (::mkdtemp(dir.data()) == nullptr) die("cannot make a temporary folder");
      decisions_dir = dir;
      DecisionLogOptions log_options;
      log_options.folder = decisions_dir;
      log_options.buffer = decision_buffer;
      auto log = DecisionLog::open(log_options);
      if (!log) die(log.error().message);
      decisions = std::move(*log);
    }
    pipeline = std::make_unique<Pipeline>(
        Pipeline::Services{gates->registry, cascade, pool, blocking, nullptr, nullptr, {}, decisions.get()}, options);
  }
  ~LoopWorld() {
    pool.stop();
    blocking.stop();
    pipeline.reset();
    decisions.reset();
    std::error_code ignored;
    if (!decisions_dir.empty()) std::filesystem::remove_all(decisions_dir, ignored);
  }
};

// Keeps `window` signals in flight over `sessions` sessions for `duration`,
// then lets those in flight finish; returns signals per second. Each session
// has its own sink and counters (a session's signals finish one after
// another), so the threads share nothing but a flag read once per signal and
// the count of sessions still running. Working for a time rather than to a
// count keeps both loops busy to the end however the sessions fell to them.
//
// Each session starts from a task on the pool, so that its input, its sink
// and the pipeline's session object are made by the loop that runs it, as a
// daemon's connection is served (and its session made) on one loop. Made one
// after another by the benchmark's thread, the objects of sessions on
// different loops shared cache lines, and the benchmark measured that (on
// one machine about 610,000 signals/s against 790,000 with each loop's
// sessions made by that loop; the README has this one's). Every call uses
// new session ids, so no session made by one loop is later served by the
// other.
double drive(LoopWorld& world, std::chrono::milliseconds duration, std::size_t sessions, std::size_t window) {
  struct alignas(128) Session {
    Value input;
    std::shared_ptr<NullFramingSink> sink;
    std::atomic<std::size_t> in_flight{0};
    std::atomic<std::size_t> finished{0};
    std::atomic<std::size_t> not_answered{0};
  };
  static std::atomic<int> drives{0};
  // Short ids ("d3-s12"), as the daemon's "conn-12": a string kept inline, as
  // a longer id would not be, in the pipeline's copies of it.
  const std::string prefix = "d" + std::to_string(drives.fetch_add(1)) + "-s";
  // What the callbacks share, reached through one pointer: a done callback
  // of a pointer and an index is kept without an allocation, as the
  // daemon's is, so the benchmark's bookkeeping does not weigh on the loop.
  struct Shared {
    LoopWorld& world;
    std::vector<Session> state;
    std::atomic<bool> stop{false};
    std::atomic<std::size_t> sessions_running;
    std::atomic<Clock::rep> last_finish{0};
    std::mutex mutex;
    std::condition_variable all_done;

    Shared(LoopWorld& w, std::size_t sessions) : world(w), state(sessions), sessions_running(sessions) {}

    void launch(std::size_t s) {
      Session& session = state[s];
      session.in_flight.fetch_add(1, std::memory_order_relaxed);
      world.pipeline->inject(session.input, session.sink, [this, s](LoopReport report) { finished(s, report); });
    }

    void finished(std::size_t s, const LoopReport& report) {
      Session& session = state[s];
      if (report.stopped_by != "done") session.not_answered.fetch_add(1, std::memory_order_relaxed);
      session.finished.fetch_add(1, std::memory_order_relaxed);
      if (!stop.load(std::memory_order_relaxed)) launch(s);  // before this one leaves: never 0 while running
      if (session.in_flight.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      last_finish.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
      if (sessions_running.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lock(mutex);
        all_done.notify_all();
      }
    }
  };
  Shared shared(world, sessions);
  std::vector<Session>& state = shared.state;
  const auto start = Clock::now();
  std::atomic<std::size_t> started{0};
  for (std::size_t s = 0; s < sessions; ++s) {
    world.pool.post([&, s] {  // from here: the loops in turn
      state[s].input = user_input_signal("why did the build fail?", prefix + std::to_string(s));
      state[s].sink = std::make_shared<NullFramingSink>();
      for (std::size_t i = s; i < window; i += sessions) shared.launch(s);
      started.fetch_add(1, std::memory_order_release);
    });
  }
  while (started.load(std::memory_order_acquire) < sessions) std::this_thread::yield();
  std::this_thread::sleep_for(duration);
  shared.stop.store(true, std::memory_order_relaxed);
  {
    std::unique_lock lock(shared.mutex);
    if (!shared.all_done.wait_for(lock, std::chrono::minutes(1), [&] { return shared.sessions_running.load() == 0; })) {
      die("the loop did not finish");
    }
  }
  const double seconds =
      std::chrono::duration<double>(Clock::time_point(Clock::duration(shared.last_finish.load())) - start).count();
  std::size_t not_answered = 0;
  std::size_t finished = 0;
  std::size_t frames = 0;
  for (const Session& session : state) {
    not_answered += session.not_answered.load();
    finished += session.finished.load();
    frames += session.sink->frames();
  }
  if (not_answered != 0) die(std::to_string(not_answered) + " signals were not answered");
  if (frames < finished) die("fewer replies than signals");
  return static_cast<double>(finished) / seconds;
}

void run_loop(benchmark::State& state, std::size_t threads, bool bundled, const char* key, bool process_gate = false) {
  LoopWorld world(threads, bundled, false, DecisionLogOptions::kDefaultBuffer, process_gate);
  drive(world, std::chrono::milliseconds(20), 64, 256);  // warm up: skills, caches, allocator
  double rate = 0;
  for (auto _ : state) rate = drive(world, std::chrono::milliseconds(200), 64, 256);
  state.counters[key] = rate;
}

// The same with the decision log on, every decision recorded (two per
// signal: at reasoning and at the last mile), and how many were written and
// dropped (the writer fell behind) during the measured run.
void BM_LoopDecisionLog(benchmark::State& state) {
  LoopWorld world(2, false, true);
  drive(world, std::chrono::milliseconds(20), 64, 256);
  world.decisions->flush();
  double rate = 0;
  std::uint64_t written = 0;
  std::uint64_t dropped = 0;
  for (auto _ : state) {
    const std::uint64_t written_before = world.decisions->written();
    const std::uint64_t dropped_before = world.decisions->dropped();
    rate = drive(world, std::chrono::milliseconds(200), 64, 256);
    dropped = world.decisions->dropped() - dropped_before;  // before the flush: what the buffer could not hold
    world.decisions->flush();
    written = world.decisions->written() - written_before;
  }
  state.counters["loop_signals_per_s_decision_log"] = rate;
  state.counters["decision_log_written"] = static_cast<double>(written);
  state.counters["decision_log_dropped"] = static_cast<double>(dropped);
}

// The kernel's share of the writer's work: the lines the writer wrote in
// `folder` (every file of it) written again to a new file in the writer's
// 256 KiB pieces, in nanoseconds; the floor a writer that prints, masks and
// quotes nothing would still pay.
double write_floor_ns(const std::filesystem::path& folder) {
  std::string bytes;
  for (const auto& file : decision_files_newest_first(folder)) {
    std::ifstream in(file, std::ios::binary);
    bytes.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::filesystem::path copy = folder / "floor.bytes";
  const int fd = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) die("cannot write " + copy.string());
  const auto start = Clock::now();
  for (std::size_t at = 0; at < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + at, std::min<std::size_t>(bytes.size() - at, std::size_t{256} << 10));
    if (n <= 0) die("cannot write " + copy.string());
    at += static_cast<std::size_t>(n);
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
  ::close(fd);
  std::filesystem::remove(copy);
  return ns;
}

// What the decision log's writer costs per decision (printing, masking, JSON,
// the write), alone on a core: the loop's decisions (ten pass-through gates,
// two per signal) captured with the writer held, then written in one flush.
// Its inverse is how many decisions a second one core records whole; under
// a load past that the log drops (decision 0023).
void BM_DecisionLogWriter(benchmark::State& state) {
  constexpr std::size_t kBuffer = std::size_t{1} << 16;  // per thread: every decision of the run is kept
  LoopWorld world(2, false, true, kBuffer);
  double per_decision_ns = 0;
  double floor_ns = 0;
  for (auto _ : state) {
    world.decisions->hold_writer_for_test(true);
    const std::uint64_t written_before = world.decisions->written();
    drive(world, std::chrono::milliseconds(40), 64, 256);
    const auto start = Clock::now();
    world.decisions->hold_writer_for_test(false);
    world.decisions->flush();
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    const std::uint64_t written = world.decisions->written() - written_before;
    if (written == 0) die("the decision log wrote nothing");
    per_decision_ns = ns / static_cast<double>(written);
    floor_ns = write_floor_ns(world.decisions_dir) / static_cast<double>(written);
  }
  state.counters["decision_log_write_ns"] = per_decision_ns;
  state.counters["decision_log_max_per_s"] = 1e9 / per_decision_ns;
  state.counters["decision_log_write_floor_ns"] = floor_ns;
}

void BM_Loop(benchmark::State& state) { run_loop(state, 2, false, "loop_signals_per_s"); }
void BM_Loop1Core(benchmark::State& state) { run_loop(state, 1, false, "loop_signals_per_s_1_core"); }
void BM_LoopBundled(benchmark::State& state) { run_loop(state, 2, true, "loop_bundled_signals_per_s"); }
// The bundled skills and one pass-through gate in a worker process: two
// channel round trips per signal (the reasoning and the last-mile verification).
void BM_LoopBundledOop(benchmark::State& state) { run_loop(state, 2, true, "loop_bundled_oop_signals_per_s", true); }
BENCHMARK(BM_Loop)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoopDecisionLog)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DecisionLogWriter)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Loop1Core)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoopBundled)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoopBundledOop)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

namespace {

// What an event loop costs per task, both loops busy: chains of empty tasks,
// each posting the next on its own loop (the hand-off between the steps of a
// signal, with nothing else). Tasks per second over both loops.
void BM_EventLoopTasks(benchmark::State& state) {
  constexpr int kChains = 64;
  struct alignas(128) Chain {
    EventLoops* loops = nullptr;
    std::atomic<bool>* stop = nullptr;
    std::uint64_t steps = 0;  // written by its loop only
    std::atomic<bool> ended{false};
    void step() {
      ++steps;
      if (!stop->load(std::memory_order_relaxed)) {
        loops->post([this] { step(); });
      } else {
        ended.store(true, std::memory_order_release);
      }
    }
  };
  double rate = 0;
  for (auto _ : state) {
    EventLoops loops(2);
    std::atomic<bool> stop{false};
    std::vector<Chain> chains(kChains);
    for (Chain& chain : chains) {
      chain.loops = &loops;
      chain.stop = &stop;
      loops.post([&chain] { chain.step(); });  // from here: the loops in turn
    }
    const auto start = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop.store(true, std::memory_order_relaxed);
    for (Chain& chain : chains) {
      while (!chain.ended.load(std::memory_order_acquire)) std::this_thread::yield();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::uint64_t steps = 0;
    for (const Chain& chain : chains) steps += chain.steps;
    rate = static_cast<double>(steps) / seconds;
    loops.stop();
  }
  state.counters["event_loop_tasks_per_s"] = rate;
}
BENCHMARK(BM_EventLoopTasks)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// The out-of-process tier against its anchor: the same pass verdict from a
// gate program started per call (fork and exec, the action on its stdin, the
// verdict on its stdout), as policy hooks run elsewhere.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "bench_gates.hpp"
#include "pipeline/verifier.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace {
using namespace passepartout;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& message) { bench::die("bench_isolation", message); }

constexpr int kSpawnCalls = 400;
constexpr int kOopCalls = 20000;

const std::string& action_text() {
  static const std::string text = to_sexp(*read_sexp(
      "(:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:ACTION :MESSAGE :TEXT \"The build failed because the linker could "
      "not find libyaml-cpp.\"))"));
  return text;
}

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t wrote = ::write(fd, bytes.data(), bytes.size());
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) die(std::string("write to the gate program: ") + std::strerror(errno));
    bytes.remove_prefix(static_cast<std::size_t>(wrote));
  }
}

// One decision by a fresh process: fork, exec, hand it the action, read its
// verdict to the end, reap it. Returns the verdict text.
std::string spawn_verdict(const char* program) {
  int to_child[2];
  int from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) die("pipe2 failed");
  const pid_t pid = ::fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {
    if (::dup2(to_child[0], 0) < 0 || ::dup2(from_child[1], 1) < 0) ::_exit(126);
    char* const argv[] = {const_cast<char*>(program), nullptr};
    char* const envp[] = {nullptr};
    ::execve(program, argv, envp);
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  write_all(to_child[1], action_text());
  ::close(to_child[1]);
  std::string verdict;
  char buffer[256];
  for (;;) {
    const ssize_t got = ::read(from_child[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    verdict.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(from_child[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("the gate program failed");
  return verdict;
}

double percentile(std::vector<double>& samples, double q) {
  std::sort(samples.begin(), samples.end());
  return samples[static_cast<std::size_t>(q * static_cast<double>(samples.size() - 1))];
}

void BM_SpawnPerCall(benchmark::State& state) {
  std::vector<double> micros;
  micros.reserve(kSpawnCalls);
  for (auto _ : state) {
    for (int i = 0; i < 20; ++i) spawn_verdict(PP_SPAWN_GATE_EXE);  // warm the page cache and the allocator
    micros.clear();
    for (int i = 0; i < kSpawnCalls; ++i) {
      const auto start = Clock::now();
      const std::string verdict = spawn_verdict(PP_SPAWN_GATE_EXE);
      micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      if (verdict != "(:VERDICT :PASS)\n") die("unexpected verdict '" + verdict + "'");
    }
  }
  state.counters["spawn_per_call_us"] = percentile(micros, 0.50);
  state.counters["spawn_per_call_p99_us"] = percentile(micros, 0.99);
}
BENCHMARK(BM_SpawnPerCall)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The machine's floor for the tier: a round trip of a few bytes between two
// processes over a socket pair, blocking reads, nothing else (no encoding,
// no deadline, no hook). What verify_oop_gate_us adds is ours.
void BM_ProcessRoundTripFloor(benchmark::State& state) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) die("socketpair failed");
  const pid_t pid = ::fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {  // the echo: answers every message until the parent closes
    ::close(pair[0]);
    char message[64];
    for (;;) {
      const ssize_t got = ::read(pair[1], message, sizeof message);
      if (got <= 0 || ::write(pair[1], message, static_cast<std::size_t>(got)) != got) ::_exit(0);
    }
  }
  ::close(pair[1]);
  char message[64] = {};
  const auto round_trip = [&] {
    if (::write(pair[0], message, sizeof message) != static_cast<ssize_t>(sizeof message)) die("write failed");
    std::size_t got = 0;
    while (got < sizeof message) {
      const ssize_t n = ::read(pair[0], message + got, sizeof message - got);
      if (n <= 0) die("the echo process stopped");
      got += static_cast<std::size_t>(n);
    }
  };
  std::vector<double> micros;
  micros.reserve(kOopCalls);
  for (auto _ : state) {
    for (int i = 0; i < 1000; ++i) round_trip();
    micros.clear();
    for (int i = 0; i < kOopCalls; ++i) {
      const auto start = Clock::now();
      round_trip();
      micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
  }
  ::close(pair[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  state.counters["oop_floor_rtt_us"] = percentile(micros, 0.50);
  state.counters["oop_floor_rtt_p99_us"] = percentile(micros, 0.99);
}
BENCHMARK(BM_ProcessRoundTripFloor)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// One verification through one pass-through gate in a worker process: the
// action and the signal encoded, a round trip through the worker's channel,
// the hook, the verdict decoded. Each verification timed on its own.

void BM_VerifyOopGate(benchmark::State& state) {
  auto gates = bench::LoadedGates::pass_through(1, "process");
  auto snapshot = gates->registry.snapshot();
  const Value action = *read_sexp(action_text());
  const Value signal = *read_sexp(
      "(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"s-4f2a9c\") :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"why did "
      "the build fail?\") :DEPTH 0)");
  Verification out;
  std::vector<double> micros;
  micros.reserve(kOopCalls);
  for (auto _ : state) {
    for (int i = 0; i < 1000; ++i) Verifier::verify(*snapshot, action, signal, out);  // warm up
    micros.clear();
    for (int i = 0; i < kOopCalls; ++i) {
      const auto start = Clock::now();
      Verifier::verify(*snapshot, action, signal, out);
      micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      if (out.outcome != VerifyOutcome::passed) die("the gate in its worker did not pass");
    }
  }
  state.counters["verify_oop_gate_us"] = percentile(micros, 0.50);
  state.counters["verify_oop_gate_p99_us"] = percentile(micros, 0.99);
}
BENCHMARK(BM_VerifyOopGate)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

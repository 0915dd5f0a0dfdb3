// The out-of-process tier against its anchor: the same pass verdict from a
// gate program started per call (fork and exec, the action on its stdin, the
// verdict on its stdout), as policy hooks run elsewhere.
#include <benchmark/benchmark.h>

#include <fcntl.h>
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

// One verification through one pass-through gate in a worker process: the
// action and the signal encoded, a round trip through the worker's channel,
// the hook, the verdict decoded. Each verification timed on its own.
constexpr int kOopCalls = 20000;

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

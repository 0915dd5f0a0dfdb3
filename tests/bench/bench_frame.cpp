// Benchmarks of the wire format: reading and printing the payload of a typical
// signal frame (about 220 characters), the path every message takes.
#include <benchmark/benchmark.h>

#include <string>
#include <string_view>

#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace {

constexpr std::string_view kSignal =
    "(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"s-4f2a9c\") :PAYLOAD (:SENSOR :USER-INPUT "
    ":TEXT \"Please look at the build log in ~/work/passepartout and tell me why the last test "
    "run failed, then suggest a fix.\") :DEPTH 0)";

passepartout::Value read_signal() {
  auto value = passepartout::read_sexp(kSignal);
  if (!value) std::abort();
  return *std::move(value);
}

// Read the payload into a Value, then print it into a reused output buffer.
void BM_FrameRoundtrip(benchmark::State& state) {
  std::string out;
  out.reserve(512);
  for (auto _ : state) {
    auto value = passepartout::read_sexp(kSignal);
    out.clear();
    passepartout::print_sexp(*value, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(kSignal.size()));
}
BENCHMARK(BM_FrameRoundtrip);

void BM_ReadSignal(benchmark::State& state) {
  for (auto _ : state) {
    auto value = passepartout::read_sexp(kSignal);
    benchmark::DoNotOptimize(value);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(kSignal.size()));
}
BENCHMARK(BM_ReadSignal);

void BM_PrintSignal(benchmark::State& state) {
  const passepartout::Value value = read_signal();
  std::string out;
  out.reserve(512);
  for (auto _ : state) {
    out.clear();
    passepartout::print_sexp(value, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(kSignal.size()));
}
BENCHMARK(BM_PrintSignal);

// The same round trip returning a fresh string each time, as to_sexp callers do.
void BM_FrameRoundtripFreshString(benchmark::State& state) {
  for (auto _ : state) {
    auto value = passepartout::read_sexp(kSignal);
    std::string out = passepartout::to_sexp(*value);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_FrameRoundtripFreshString);

}  // namespace

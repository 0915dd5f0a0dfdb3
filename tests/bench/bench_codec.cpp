// Benchmarks of the Value codec beside the s-expression printer and reader on
// the same Value: what a gate call sends to a skill's worker process (the
// action under verification and the signal that led to it).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"
#include "value/value_codec.hpp"

namespace {

constexpr std::string_view kGateCall =
    "(:ACTION (:TYPE :REQUEST :TARGET :CLI :PAYLOAD (:ACTION :MESSAGE :TEXT \"The last test run failed in "
    "frame_codec_test: the length prefix counts bytes, not code points.\" :EXPLANATION \"an answer to the "
    "user's question\")) "
    ":SIGNAL (:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"s-4f2a9c\") :PAYLOAD (:SENSOR :USER-INPUT "
    ":TEXT \"Please look at the build log in ~/work/passepartout and tell me why the last test "
    "run failed, then suggest a fix.\") :DEPTH 0))";

passepartout::Value gate_call() {
  auto value = passepartout::read_sexp(kGateCall);
  if (!value) std::abort();
  return *std::move(value);
}

void BM_ValueEncode(benchmark::State& state) {
  const passepartout::Value value = gate_call();
  std::string out;
  out.reserve(1024);
  for (auto _ : state) {
    out.clear();
    passepartout::encode_message(value, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes"] = static_cast<double>(out.size());
}
BENCHMARK(BM_ValueEncode);

void BM_ValueDecode(benchmark::State& state) {
  std::string bytes;
  passepartout::encode_message(gate_call(), bytes);
  for (auto _ : state) {
    auto value = passepartout::decode(bytes);
    benchmark::DoNotOptimize(value);
  }
  state.counters["bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_ValueDecode);

void BM_ValuePrint(benchmark::State& state) {
  const passepartout::Value value = gate_call();
  std::string out;
  out.reserve(1024);
  for (auto _ : state) {
    out.clear();
    passepartout::print_sexp(value, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes"] = static_cast<double>(out.size());
}
BENCHMARK(BM_ValuePrint);

void BM_ValueRead(benchmark::State& state) {
  const std::string text = passepartout::to_sexp(gate_call());
  for (auto _ : state) {
    auto value = passepartout::read_sexp(text);
    benchmark::DoNotOptimize(value);
  }
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_ValueRead);

}  // namespace

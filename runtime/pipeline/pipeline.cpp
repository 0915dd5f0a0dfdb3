// The metabolic loop as continuations: each cycle runs on the executor, hands
// the provider call to the cascade, and goes on from its completion; actuators
// run on the blocking executor and come back the same way. Here: Pipeline's
// own members and the cycle that strings the stages together (perceive.cpp,
// reason.cpp, act.cpp, error_tiers.cpp; sessions.cpp, approved_run.cpp).
#include "pipeline/pipeline.hpp"

#include <array>
#include <cassert>
#include <string>
#include <utility>

#include "pipeline/run.hpp"
#include "pipeline/signal.hpp"

namespace passepartout {

using namespace key_literals;

void Pipeline::Impl::raise_interrupt() noexcept {
  if (interrupt_flag.exchange(true, std::memory_order_acq_rel)) return;
  log_message(LogLevel::warn, kPipelineComponent,
              "METABOLISM: interrupt flag set; every loop stops at its next cycle.");
  cancel_calls_in_flight();  // nobody waits for their answers any more
  if (!services.on_interrupt) return;
  try {
    services.on_interrupt();
  } catch (...) {  // NOLINT(bugprone-empty-catch): the host's callback must not end the loop
  }
}

// --- the loop (F1) -----------------------------------------------------------

void Run::cycle(Value next) {
  const std::int64_t depth = depth_of(next);
  if (depth > options().max_depth) {
    log_message(LogLevel::error, kPipelineComponent, "METABOLISM ERROR: Max recursion depth reached.");
    signal = std::move(next);
    finish("depth");
    return;
  }
  if (pipeline->interrupt_flag.load(std::memory_order_acquire)) {
    log_message(LogLevel::warn, kPipelineComponent, "METABOLISM: Interrupted by shutdown signal.");
    signal = std::move(next);
    finish("interrupt");
    return;
  }
  ++report.cycles;
  pipeline->processed.add(1);
  snapshot = services().registry.snapshot();
  model_proposed = false;
  timed_out_gates.clear();
  signal = perceive(std::move(next));
  if (is_reasoned(signal)) {
    attempt = 0;
    last_rejection = Value();
    reasoning = signal;
    think();
  } else {
    act(Value());
  }
}

namespace {
constexpr std::array<std::string_view, Pipeline::Impl::kOutcomes> kLoopOutcomes{"done", "depth", "interrupt", "error",
                                                                                "skip", "abort", "cancelled", "other"};

std::size_t outcome_index(std::string_view why) noexcept {
  for (std::size_t i = 0; i + 1 < kLoopOutcomes.size(); ++i) {
    if (kLoopOutcomes[i] == why) return i;
  }
  return kLoopOutcomes.size() - 1;
}
}  // namespace

void Run::finish(std::string_view why) {
  report.last_signal = std::move(signal);
  report.stopped_by = why;
  pipeline->finished_loops.add(injected_sensor * Pipeline::Impl::kOutcomes + outcome_index(why));
  if (done) {
    try {
      done(std::move(report));
    } catch (...) {  // NOLINT(bugprone-empty-catch): the caller's callback must not end the loop
    }
  }
  pipeline->finished(session);
}

void Run::next_cycle(Value feedback) {
  if (feedback.is_nil()) {
    finish("done");
    return;
  }
  if (feedback.get("META"_key) == nullptr && signal.get("META"_key) != nullptr) {
    feedback = feedback.with("META"_key, signal.at("META"_key));
  }
  post(shared_from_this(), [this, feedback = std::move(feedback)]() mutable { cycle(std::move(feedback)); });
}

// --- Pipeline --------------------------------------------------------------------------------

Pipeline::Pipeline(const Services& services, PipelineOptions options)
    : impl_(std::make_shared<Impl>(services, std::move(options))) {
  impl_->self.publish(impl_);
}

Pipeline::~Pipeline() { impl_->self.publish(nullptr); }

void Pipeline::inject(Value signal, std::shared_ptr<ReplySink> reply, InlineFunction<void(LoopReport)> done) {
  // C1: default meta; the client cannot choose its depth.
  signal = with_default_meta(as_signal(std::move(signal))).with("DEPTH"_key, Value::integer(0));
  const std::string session_id(session_id_of(signal));  // a copy: `signal` moves on
  const auto sensor = static_cast<std::uint8_t>(counted_sensor_of(signal));
  impl_->active.add(1);
  impl_->enqueue(session_id, Impl::Pending{std::move(signal), std::move(reply), std::move(done), sensor, {}});
}

void Pipeline::interrupt() noexcept { impl_->raise_interrupt(); }
bool Pipeline::interrupted() const noexcept { return impl_->interrupt_flag.load(std::memory_order_acquire); }
std::uint64_t Pipeline::signals_processed() const noexcept {
  return static_cast<std::uint64_t>(impl_->processed.sum());
}

std::span<const std::string_view> Pipeline::loop_outcomes() noexcept { return kLoopOutcomes; }

std::vector<Pipeline::SignalTally> Pipeline::signals_finished() const {
  const std::span<const std::string_view> sensors = counted_sensors();
  assert(sensors.size() == Impl::kSensors && "Impl::finished_loops has a row per counted sensor");
  std::vector<SignalTally> tallies;
  tallies.reserve(sensors.size() * kLoopOutcomes.size());
  for (std::size_t s = 0; s < sensors.size(); ++s) {
    for (std::size_t o = 0; o < kLoopOutcomes.size(); ++o) {
      tallies.push_back({sensors[s], kLoopOutcomes[o], impl_->finished_loops.sum(s * Impl::kOutcomes + o)});
    }
  }
  return tallies;
}

std::size_t Pipeline::in_flight() const noexcept {
  const std::int64_t active = impl_->active.sum();  // shards read one after another: never below 0 for long
  return active > 0 ? static_cast<std::size_t>(active) : 0;
}

}  // namespace passepartout

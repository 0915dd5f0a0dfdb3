// A consensus round: the same request to several providers at once, each
// answer parsed into an action and checked against what it calls before it
// votes, the votes tallied as they come, and the calls still running
// cancelled once the tally decides. The agreed action goes on to the gates;
// a disagreement is rejected like a gate's block, with the competing actions
// and their votes in its trace, so the next attempt's prompt shows them.
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/interval_clock.hpp"
#include "pipeline/consensus.hpp"
#include "pipeline/gate_log.hpp"
#include "pipeline/run.hpp"
#include "pipeline/signal.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {

using namespace key_literals;

namespace {

// A copy of `from` for one call of a round: its own cancel signal, no
// streaming (several models answer; none streams to the client).
void copy_request(const ProviderRequest& from, ProviderRequest& to) {
  to.system_prompt = from.system_prompt;
  to.system_stable = from.system_stable;
  to.prompt = from.prompt;
  to.model.clear();
  to.tools = from.tools;
  to.context = from.context;
  to.transcript = from.transcript;
  to.prompt_in_transcript = from.prompt_in_transcript;
  to.prompt_tokens = from.prompt_tokens;
  to.session = from.session;
  to.cancel = std::make_shared<CancelSignal>();
}

// The lineup of the one provider at `index` of `all`: a round's call goes
// to that provider alone (its health, retries and budget as in the cascade).
std::shared_ptr<const Cascade::Lineup> solo(const Cascade::Lineup& all, std::size_t index) {
  auto one = std::make_shared<Cascade::Lineup>();
  one->providers = {all.providers[index]};
  one->names = {all.names[index]};
  one->health = {all.health[index]};
  one->selector = all.selector;
  one->retry = all.retry;
  one->timers = all.timers;
  one->budget = all.budget;
  one->reads_transcript = all.providers[index]->reads_transcript();
  one->context_window = all.context_window;
  one->first_context_window = all.first_context_window;
  return one;
}

// Why `proposal`'s arguments do not fit what `offer` offered for it, or "":
// a tool's :ARGS against its schema, an actuator's payload against its own.
// A tool the offer does not have cannot be checked, and does not vote.
std::string offered_mismatch(const Offer& offer, const Run::Proposal& proposal) {
  const Value& payload = proposal.action.at("PAYLOAD"_key);
  if (proposal.action.at("TARGET"_key).is_keyword("TOOL"_key)) {
    const Value& tool = payload.at("TOOL"_key);
    const OfferedFunction* function = tool.is_string() ? offer.find_native(tool.text()) : nullptr;
    if (function == nullptr) return "it calls a tool that is not offered";
    std::string why = schema_mismatch(payload.at("ARGS"_key), function->parameters_json);
    return why.empty() ? why : "its arguments do not match the tool's schema: " + why;
  }
  for (const OfferedFunction& function : offer.functions()) {
    if (function.kind == OfferedFunction::Kind::actuator && function.target == proposal.target) {
      std::string why = schema_mismatch(payload, function.parameters_json);
      return why.empty() ? why : "its payload does not match the actuator's schema: " + why;
    }
  }
  return {};
}

}  // namespace

struct ConsensusRound : std::enable_shared_from_this<ConsensusRound> {
  enum class End : std::uint8_t { open, agreed, disagreed, cancelled };
  struct Call {
    std::string provider;
    std::size_t voter = 0;  // index into solos
    ProviderRequest request;
    std::optional<CallRouter> router;
    CascadeOutcome outcome;
    Run::Proposal proposal;
    std::size_t index = 0;  // in calls
    bool done = false;
  };

  explicit ConsensusRound(ConsensusConfig config) : rule(std::move(config)), tally(rule) {}

  const ConsensusConfig rule;
  ConsensusTally tally;  // reads `rule`
  std::string set;       // the voters' names, "a,b,c", for the counters
  std::vector<std::string> voters;
  std::vector<std::shared_ptr<const Cascade::Lineup>> solos;  // one per voter
  const Cascade* cascade = nullptr;
  ConsensusStats* stats = nullptr;
  std::shared_ptr<const Snapshot> snapshot;  // the router's slot lives as long as calls may ask it
  std::shared_ptr<const Offer> offer;
  // For each call's own router (a CallRouter serves one call at a time).
  bool routed = false;
  LocalOnlySessions* local_only = nullptr;
  std::string session;
  std::size_t tools = 0;
  ProviderRequest base;  // what every call sends
  std::shared_ptr<CancelSignal> master;

  std::mutex mutex;          // guards what follows
  std::shared_ptr<Run> run;  // until decided: reads the answers (proposal_of), then goes on
  std::deque<Call> calls;    // the lead first when it voted; addresses stay put
  int in_flight = 0;
  std::size_t next_voter = 0;
  int cancelled_calls = 0;
  End end = End::open;
  std::vector<std::pair<std::string, std::string>> red_flags;  // provider, why

  int issued() const { return static_cast<int>(calls.size()); }
  // Calls still to come: in flight, or not made yet (ahead-by: those
  // still allowed; quorum: the voters not asked yet).
  int remaining() const {
    const int unasked =
        rule.ahead_by > 0 ? std::max(0, rule.max_calls - issued()) : static_cast<int>(voters.size()) - issued();
    return in_flight + unasked;
  }

  // The calls the tally wants next (quorum: every voter not yet asked, at
  // the start; ahead-by: as many as the leader needs, round the voters).
  std::vector<Call*> plan() {
    std::vector<Call*> started;
    auto add = [&](std::size_t voter) {
      Call& call = calls.emplace_back();
      call.provider = voters[voter];
      call.voter = voter;
      call.index = calls.size() - 1;
      copy_request(base, call.request);
      ++in_flight;
      started.push_back(&call);
    };
    if (rule.ahead_by > 0) {
      while (in_flight < tally.needed() && issued() < rule.max_calls) add(next_voter++ % voters.size());
      return started;
    }
    for (std::size_t voter = 0; voter < voters.size(); ++voter) {  // each once: the first plan asks them all
      const bool asked = std::any_of(calls.begin(), calls.end(), [&](const Call& call) { return call.voter == voter; });
      if (!asked) add(voter);
    }
    return started;
  }

  // Outside the lock: a call may complete (and the round be decided) at
  // once. Each Call is its own call's until it completes (a deque's
  // elements stay put as it grows).
  void start(const std::vector<Call*>& started) {
    for (Call* each : started) {
      Call& call = *each;
      const std::size_t index = call.index;
      if (routed) {
        call.router.emplace(snapshot->router(), *local_only, session, base.context, tools);
        call.request.router = &*call.router;
      }
      cascade->call_lent(solos[call.voter], call.request,
                         [self = shared_from_this(), index](CascadeOutcome&& outcome) mutable {
                           self->answered(index, std::move(outcome));
                         });
    }
  }

  // Reads the answer of calls[index] into the tally (under mutex).
  void count(std::size_t index) {
    Call& call = calls[index];
    if (!call.outcome.ok()) {  // a call that did not answer votes for nothing
      tally.discard();
      return;
    }
    call.proposal = run->proposal_of(call.outcome.reply);
    std::string flag = call.proposal.problem;
    if (flag.empty() && call.proposal.acts) flag = offered_mismatch(*offer, call.proposal);
    if (!flag.empty()) {
      tally.discard();
      stats->red_flag(set, call.provider);
      log_message(LogLevel::info, kPipelineComponent, "REASON: consensus: {}'s answer does not vote: {}", call.provider,
                  flag);
      red_flags.emplace_back(call.provider, std::move(flag));
      return;
    }
    tally.vote(canonical_action(call.proposal.action, call.proposal.acts), index, call.provider);
  }

  // Ends the round as `how` (under mutex): the calls still running are
  // cancelled (by the caller, outside the lock); returns the run to go on.
  std::shared_ptr<Run> decide(End how, std::vector<std::shared_ptr<CancelSignal>>& stop) {
    end = how;
    for (const Call& call : calls) {
      if (!call.done) {
        stop.push_back(call.request.cancel);
        ++cancelled_calls;
      }
    }
    return std::move(run);
  }

  void answered(std::size_t index, CascadeOutcome&& outcome) {
    std::vector<Call*> started;
    std::vector<std::shared_ptr<CancelSignal>> stop;
    std::shared_ptr<Run> decided;
    {
      const std::lock_guard lock(mutex);
      Call& call = calls[index];
      call.done = true;
      --in_flight;
      if (end != End::open) return;  // decided before: a call cancelled, or one that came too late
      call.outcome = std::move(outcome);
      count(index);
      switch (tally.state(remaining())) {
        case ConsensusTally::State::agreed:
          decided = decide(End::agreed, stop);
          break;
        case ConsensusTally::State::disagreed:
          decided = decide(End::disagreed, stop);
          break;
        case ConsensusTally::State::open:
          started = plan();
          break;
      }
    }
    start(started);
    finish(std::move(decided), stop);
  }

  // The client went away, or the pipeline stopped: every call is cancelled.
  void cancel() {
    std::vector<std::shared_ptr<CancelSignal>> stop;
    std::shared_ptr<Run> decided;
    {
      const std::lock_guard lock(mutex);
      if (end != End::open) return;
      decided = decide(End::cancelled, stop);
    }
    finish(std::move(decided), stop);
  }

  void finish(std::shared_ptr<Run> decided, const std::vector<std::shared_ptr<CancelSignal>>& stop) {
    for (const auto& signal : stop) signal->cancel();  // a call may complete here: answered() returns at once
    if (decided == nullptr) return;
    master->clear();
    Run& next = *decided;
    next.post(std::move(decided), [&next] { next.round_decided(); });
  }
};

const ConsensusConfig* Run::consensus_rule(ConsensusConfig& scratch) const {
  const ConsensusConfig& configured = options().consensus;
  const bool asked = signal.path("META"_key, "CONSENSUS"_key).is_true();
  if (!asked) return configured.enabled() ? &configured : nullptr;
  scratch = configured;
  scratch.when = ConsensusConfig::When::always;
  return &scratch;  // with none configured: open_round takes a majority of the cascade
}

void Run::open_round(const ConsensusConfig& rule, const Proposal* lead) {
  std::shared_ptr<const Cascade::Lineup> lineup = services().cascade.lineup();
  auto opened = std::make_shared<ConsensusRound>([&] {
    ConsensusConfig config = rule;
    if (config.providers.empty()) config.providers = lineup->names;
    if (!config.enabled()) config.quorum = static_cast<int>(config.providers.size() / 2 + 1);  // a majority
    return config;
  }());
  opened->cascade = &services().cascade;
  opened->stats = &pipeline->consensus;
  opened->snapshot = snapshot;
  opened->offer = offer;
  for (const std::string& name : opened->rule.providers) {
    for (std::size_t i = 0; i < lineup->names.size(); ++i) {
      if (lineup->names[i] != name) continue;
      opened->voters.push_back(name);
      opened->solos.push_back(solo(*lineup, i));
      break;
    }
  }
  for (const std::string& name : opened->voters) opened->set += (opened->set.empty() ? "" : ",") + name;
  ProviderRequest& request = session->request;
  copy_request(request, opened->base);
  opened->base.context = reasoning;
  opened->base.tools = offer->native_tools();
  opened->base.model.clear();
  opened->routed = request.router != nullptr;
  opened->local_only = &pipeline->local_only;
  opened->session = std::string(session_id_of(reasoning));
  opened->tools = offer->native_tools().items().size();
  release_request();
  if (request.cancel == nullptr) request.cancel = begin_call();  // the lead's call ended: a new one for the round
  opened->master = request.cancel;
  opened->run = shared_from_this();
  log_message(LogLevel::info, kPipelineComponent, "REASON: consensus ({}) on {}", opened->rule.describe(),
              lead != nullptr ? "the proposed action" : "this proposal");

  std::vector<ConsensusRound::Call*> started;
  std::shared_ptr<Run> decided;
  std::vector<std::shared_ptr<CancelSignal>> stop;
  {
    const std::lock_guard lock(opened->mutex);
    if (lead != nullptr) {
      const auto voter = std::find(opened->voters.begin(), opened->voters.end(), cascade_outcome.provider);
      if (voter != opened->voters.end()) {  // the lead's provider votes: its answer is its vote
        ConsensusRound::Call& call = opened->calls.emplace_back();
        call.provider = *voter;
        call.voter = static_cast<std::size_t>(voter - opened->voters.begin());
        call.request.model = request.model;
        call.request.cancel = std::make_shared<CancelSignal>();
        call.outcome = std::move(cascade_outcome);
        call.done = true;
        opened->next_voter = call.voter + 1;  // ahead-by goes round from the next one
        opened->count(0);
      }
    }
    // Decided already when the lead's vote meets the rule, or when too few
    // voters are in the cascade to meet it (fail closed: nothing is asked).
    switch (opened->voters.empty() ? ConsensusTally::State::disagreed : opened->tally.state(opened->remaining())) {
      case ConsensusTally::State::agreed:
        decided = opened->decide(ConsensusRound::End::agreed, stop);
        break;
      case ConsensusTally::State::disagreed:
        decided = opened->decide(ConsensusRound::End::disagreed, stop);
        break;
      case ConsensusTally::State::open:
        started = opened->plan();
        break;
    }
  }
  consensus = opened;
  opened->master->on_cancel([weak = std::weak_ptr<ConsensusRound>(opened)] {
    if (const auto alive = weak.lock()) alive->cancel();
  });
  opened->start(started);
  opened->finish(std::move(decided), stop);
}

void Run::round_decided() {
  const std::shared_ptr<ConsensusRound> ended_round = std::move(consensus);
  consensus = nullptr;
  // Decided: the calls still running were cancelled, and no longer touch the round's tally.
  CascadeOutcome ended;
  ended.cancelled = ended_round->end == ConsensusRound::End::cancelled;
  if (call_ended(ended)) return;
  ended_round->stats->calls(ended_round->set, ended_round->calls.size(),
                            static_cast<std::uint64_t>(ended_round->cancelled_calls));
  model_failure = Value();
  const ConsensusTally& tally = ended_round->tally;
  if (ended_round->end == ConsensusRound::End::agreed) {
    const ConsensusTally::Candidate& winner = *tally.leader();
    ended_round->stats->agreed(ended_round->set);
    log_message(LogLevel::info, kPipelineComponent, "REASON: consensus: {} of {} answers agree ({})", winner.votes,
                tally.votes() + tally.discarded(), fmt::join(winner.providers, ", "));
    ConsensusRound::Call& call = ended_round->calls[winner.answer];
    session->request.model = call.request.model;  // what the answering call asked for, for the decision log
    cascade_outcome = std::move(call.outcome);
    proposed(std::move(call.proposal));
    return;
  }

  // Disagreement: its own outcome, blocked by the host as `consensus`.
  ended_round->stats->disagreed(ended_round->set);
  std::string text = "The models did not agree on an action (" + ended_round->rule.describe() + "):";
  std::vector<Value> votes;
  for (const ConsensusTally::Candidate& candidate : tally.candidates()) {
    const Value& action = ended_round->calls[candidate.answer].proposal.action;
    std::vector<Value> who;
    for (const std::string& name : candidate.providers) who.push_back(Value::string(name));
    votes.push_back(Value::plist({{"ACTION", action},
                                  {"VOTES", Value::integer(candidate.votes)},
                                  {"PROVIDERS", Value::list(std::span<const Value>(who))}}));
    text += fmt::format(" {} for {} ({});", candidate.votes, to_sexp(action.at("PAYLOAD"_key).without("EXPLANATION")),
                        fmt::join(candidate.providers, ", "));
  }
  std::vector<Value> flags;
  for (const auto& [provider, why] : ended_round->red_flags) {
    flags.push_back(Value::plist({{"PROVIDER", Value::string(provider)}, {"REASON", Value::string(why)}}));
    text += fmt::format(" {}'s answer was discarded: {};", provider, why);
  }
  if (tally.candidates().empty() && ended_round->red_flags.empty()) text += " no answer came;";
  text.back() = '.';
  log_message(LogLevel::warn, kPipelineComponent, "REASON: {}", text);

  Verification verification;
  verification.outcome = VerifyOutcome::blocked;
  verification.reason = Value::string(text);
  verification.action = rejection("ERROR", text);
  verification.trace.push_host(HostRule::consensus, GateResult::blocked, verification.reason);
  const ConsensusTally::Candidate* leader = tally.leader();
  model_proposed = false;
  if (leader != nullptr) {
    cascade_outcome = std::move(ended_round->calls[leader->answer].outcome);
    if (session->request.prompt_in_transcript) record_answer(cascade_outcome.reply);
  }
  if (services().decisions != nullptr) {
    GateTimes times;  // NOLINT(cppcoreguidelines-pro-type-member-init): none taken
    times.count = 0;
    const IntervalClock::Ticks now = IntervalClock::now();
    const Value proposed = leader != nullptr ? ended_round->calls[leader->answer].proposal.action : Value();
    services().decisions->record(DecisionStage::reason, snapshot, proposed, reasoning, verification, times, now, now,
                                 decision_context());
  }
  if (session->request.prompt_in_transcript) record_verdict(verification);
  // The trace's consensus entry carries the competing actions and their votes.
  Value value = verification.to_value();
  const Value& entry = value.at("GATE-TRACE"_key).items().front();
  Value traced = entry.with("VOTES"_key, Value::list(std::span<const Value>(votes)));
  if (!flags.empty()) traced = std::move(traced).with("RED-FLAGS"_key, Value::list(std::span<const Value>(flags)));
  value = std::move(value).with("GATE-TRACE"_key, Value::list({traced}));
  rejected(verification, std::move(value));
}

}  // namespace passepartout

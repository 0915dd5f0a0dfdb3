#include "daemon/fleet_runner.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "base/executor.hpp"
#include "base/log.hpp"
#include "daemon/pg_approvals.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/pipeline.hpp"
#include "store/pg_client.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kComponent = "fleet";

}  // namespace

struct FleetRunner::State : std::enable_shared_from_this<FleetRunner::State> {
  State(PgClient& c, ApprovalStore& s, Pipeline& p, Executor& w, std::chrono::milliseconds every)
      : client(c), store(s), pipeline(p), work(w), poll(every) {}

  PgClient& client;
  ApprovalStore& store;
  Pipeline& pipeline;
  Executor& work;
  std::chrono::milliseconds poll;

  std::mutex mutex;
  std::condition_variable idle;
  bool stopped = false;
  int active = 0;       // sweeps going on
  bool queued = false;  // a sweep is posted and has not begun: another wake-up adds nothing

  // Posts a sweep unless one is waiting to begin already. Any thread.
  void wake() {
    {
      const std::lock_guard lock(mutex);
      if (stopped || queued) return;
      queued = true;
    }
    work.post([self = shared_from_this()] { self->sweep(); });
  }

  void schedule_poll() {
    work.post_after(poll, [self = shared_from_this()] {
      {
        const std::lock_guard lock(self->mutex);
        if (self->stopped) return;
      }
      self->wake();
      self->schedule_poll();
    });
  }

  // Every run this node may claim now, handed to the pipeline (which claims
  // each: of nodes sweeping at once, one runs it).
  void sweep() {
    {
      const std::lock_guard lock(mutex);
      queued = false;
      if (stopped) return;
      ++active;
    }
    auto claimable = store.claimable();
    if (!claimable) {
      log_message(LogLevel::debug, kComponent, "{}", claimable.error().message);
    } else {
      for (std::string& token : *claimable) {
        {
          const std::lock_guard lock(mutex);
          if (stopped) break;
        }
        pipeline.run_approved(token, [token](const Result<Value>& result) {
          if (result) {
            log_message(LogLevel::info, kComponent, "approved action {} ran on this node", token);
          } else if (result.error().code == ErrorCode::refused) {
            log_message(LogLevel::debug, kComponent, "approved action {}: {}", token, result.error().message);
          } else {
            log_message(LogLevel::warn, kComponent, "approved action {}: {}", token, result.error().message);
          }
        });
      }
    }
    {
      const std::lock_guard lock(mutex);
      --active;
    }
    idle.notify_all();
  }
};

FleetRunner::FleetRunner(PgClient& client, ApprovalStore& store, Pipeline& pipeline, Executor& work,
                         std::chrono::milliseconds poll)
    : state_(std::make_shared<State>(client, store, pipeline, work, poll)) {}

FleetRunner::~FleetRunner() { stop(); }

void FleetRunner::start() {
  // The callbacks hold the state weakly: the client keeps them after stop().
  std::weak_ptr<State> weak = state_;
  state_->client.listen(std::string(kApprovalsChannel), [weak](std::string_view) {
    if (auto state = weak.lock()) state->wake();  // which token does not matter: the sweep asks
  });
  state_->client.on_connected([weak] {
    if (auto state = weak.lock()) state->wake();
  });
  state_->schedule_poll();
  state_->wake();
}

void FleetRunner::stop() {
  std::unique_lock lock(state_->mutex);
  state_->stopped = true;
  state_->idle.wait(lock, [this] { return state_->active == 0; });
}

}  // namespace passepartout

// Sessions: signals of one session run one at a time, in the order
// injected; sessions are kept in shards, the one idle longest dropped first.
#include <mutex>
#include <string>
#include <utility>

#include "pipeline/run.hpp"

namespace passepartout {

std::shared_ptr<Pipeline::Impl::Session>& Pipeline::Impl::session_in(SessionShard& shard, std::string_view id) {
  auto found = shard.sessions.find(id);
  if (found != shard.sessions.end()) return found->second;
  if (shard.sessions.size() >= kSessionsPerShard) {
    auto oldest = shard.sessions.end();
    for (auto it = shard.sessions.begin(); it != shard.sessions.end(); ++it) {
      if (!it->second->busy && (oldest == shard.sessions.end() || it->second->last_used < oldest->second->last_used)) {
        oldest = it;
      }
    }
    if (oldest != shard.sessions.end()) shard.sessions.erase(oldest);
  }
  auto& session = shard.sessions[std::string(id)];
  session = std::make_shared<Session>(options.log_lines, shard);
  return session;
}

void Pipeline::Impl::enqueue(std::string_view session_id, Pending&& pending) {
  std::shared_ptr<Session> session;
  {
    SessionShard& shard = shard_of(session_id);
    std::lock_guard lock(shard.mutex);
    session = session_in(shard, session_id);
    if (session->busy) {
      session->queue.push_back(std::move(pending));
      return;
    }
    session->busy = true;
    session->last_used = ++shard.clock;
  }
  start(session, std::move(pending));
}

void Pipeline::Impl::note_session(std::string_view session_id, std::function<void(Session&)> note) {
  active.add(1);
  Pending pending;
  pending.note = std::move(note);
  enqueue(session_id, std::move(pending));
}

void Pipeline::Impl::start(const std::shared_ptr<Session>& session, Pending&& pending) {
  if (pending.note) {  // not a signal: the note, in the session's turn, then whatever waits behind it
    std::shared_ptr<Impl> impl = self.get();
    if (!impl) {  // the Pipeline is gone: nothing to note it in
      active.add(-1);
      return;
    }
    services.executor.post([impl = std::move(impl), session, note = std::move(pending.note)] {
      try {
        note(*session);
      } catch (const std::exception& error) {
        log_message(LogLevel::error, kPipelineComponent, "a note to a session failed: {}", error.what());
      }
      impl->finished(session);
    });
    return;
  }
  auto run = std::make_shared<Run>();
  run->pipeline = self.get();
  if (!run->pipeline) {  // the Pipeline is gone: nothing new starts, and its caller hears so
    active.add(-1);
    if (pending.done) {
      try {
        pending.done(LoopReport{0, std::move(pending.signal), "interrupt"});
      } catch (...) {  // NOLINT(bugprone-empty-catch): the caller's callback must not end the loop
      }
    }
    return;
  }
  run->session = session;
  run->reply = std::move(pending.reply);
  run->done = std::move(pending.done);
  run->injected_sensor = pending.injected_sensor;
  Run& started = *run;
  started.post(std::move(run),
               [&started, signal = std::move(pending.signal)]() mutable { started.cycle(std::move(signal)); });
}

void Pipeline::Impl::finished(const std::shared_ptr<Session>& session) {
  active.add(-1);
  Pending next;
  {
    SessionShard& shard = session->shard;
    std::lock_guard lock(shard.mutex);
    if (session->queue.empty()) {
      session->busy = false;
      return;
    }
    next = std::move(session->queue.front());
    session->queue.pop_front();
    session->last_used = ++shard.clock;
  }
  start(session, std::move(next));
}

const LocalOnlySessions& Pipeline::local_only_sessions() const noexcept { return impl_->local_only; }

const ConsensusStats& Pipeline::consensus_stats() const noexcept { return impl_->consensus; }

std::size_t Pipeline::sessions_kept() const {
  std::size_t kept = 0;
  for (Impl::SessionShard& shard : impl_->session_shards) {
    std::lock_guard lock(shard.mutex);
    kept += shard.sessions.size();
  }
  return kept;
}

}  // namespace passepartout

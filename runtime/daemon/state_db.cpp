#include "daemon/state_db.hpp"

#include <future>
#include <utility>

#include "base/executor.hpp"
#include "base/log.hpp"
#include "store/pg_client.hpp"
#include "store/pg_schema.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kComponent = "state-db";

}  // namespace

StateDb::StateDb(Settings settings) : settings_(std::move(settings)), loop_(std::make_unique<EventLoops>(1)) {
  PgClient::Options options;
  options.conninfo = settings_.conninfo;
  options.application_name = "passepartout " + settings_.node;
  client_ = std::make_unique<PgClient>(*loop_->contexts().front(), options);
}

StateDb::~StateDb() { stop(); }

void StateDb::connected() {
  migrate(*client_, state_schema(), settings_.node, [this](Result<PgSchemaOutcome> outcome) {
    {
      const std::lock_guard lock(mutex_);
      answered_ = true;
      if (!outcome && outcome.error().code == ErrorCode::refused) refused_ = outcome.error().message;
      if (outcome) schema_ = outcome->version;
    }
    answer_.notify_all();
    if (!outcome) {
      log_message(outcome.error().code == ErrorCode::refused ? LogLevel::error : LogLevel::warn, kComponent, "{}",
                  outcome.error().message);
      return;
    }
    if (outcome->found != outcome->version) {
      log_message(LogLevel::info, kComponent, "schema migrated from version {} to {}", outcome->found,
                  outcome->version);
    }
    client_->run({{"INSERT INTO passepartout_nodes (node, version, started_at, seen_at) VALUES ($1, $2, now(), now()) "
                   "ON CONFLICT (node) DO UPDATE SET version = EXCLUDED.version, seen_at = now()",
                   {settings_.node, settings_.version}}},
                 [this](PgOutcome&& registered) {
                   if (!registered.ok()) {
                     log_message(LogLevel::warn, kComponent, "node {} could not be registered: {}", settings_.node,
                                 registered.error->message);
                     return;
                   }
                   if (registered_) return;  // beating already (a reconnection)
                   registered_ = true;
                   loop_->post_after(settings_.heartbeat, [this] { beat(); });
                 });
  });
}

void StateDb::beat() {
  if (stopping_.load()) return;
  // While the connection is down the batch fails at once; the next beat tries again.
  client_->run({{"UPDATE passepartout_nodes SET seen_at = now() WHERE node = $1", {settings_.node}}},
               [](PgOutcome&&) {});
  loop_->post_after(settings_.heartbeat, [this] { beat(); });  // dropped when the loop stops
}

Result<void> StateDb::start(std::chrono::milliseconds wait) {
  log_message(LogLevel::info, kComponent, "state database {} (node {})", settings_.shown, settings_.node);
  // Every connection migrates (the first, and each later one: another
  // daemon of the fleet may have migrated meanwhile). A first attempt that
  // fails answers the wait through the probe, which fails with it.
  client_->on_connected([this] { connected(); });
  client_->start();
  client_->run({{"SELECT 1", {}}}, [this](PgOutcome&& probe) {
    if (probe.ok()) return;  // connected: the migration answers
    {
      const std::lock_guard lock(mutex_);
      answered_ = true;
    }
    answer_.notify_all();
  });
  std::unique_lock lock(mutex_);
  answer_.wait_for(lock, wait, [this] { return answered_; });
  if (!refused_.empty()) return fail(ErrorCode::refused, refused_);
  if (schema_ == 0) {
    lock.unlock();
    const std::string why = client_->status().last_error;
    log_message(LogLevel::warn, kComponent,
                "no answer from the state database yet ({}): serving without it; what needs it is refused until it "
                "answers",
                why.empty() ? std::string("still connecting") : why);
  }
  return {};
}

void StateDb::stop() {
  if (!loop_) return;
  stopping_.store(true);
  // The client's stop runs on its loop (closing the connection, failing
  // what was waiting, whose callbacks may still use the client); once a
  // task posted after it has run, nothing there touches the client, which
  // can go. Its destructor posts one more stop, run before the loop joins,
  // so the connection's I/O objects go while their io_context is there.
  client_->stop();
  std::promise<void> drained;
  loop_->post([&drained] { drained.set_value(); });
  drained.get_future().wait();
  client_.reset();
  loop_->stop();
  loop_.reset();
}

StateDb::Figures StateDb::figures() const {
  Figures figures;
  figures.shown = settings_.shown;
  figures.node = settings_.node;
  figures.target = static_cast<int>(state_schema().migrations.size());
  if (client_) {
    const PgClient::Status status = client_->status();
    figures.connected = status.connected;
    figures.last_error = status.last_error;
    figures.connections = status.connections;
    figures.failed = status.failed;
  }
  const std::lock_guard lock(mutex_);
  figures.schema = schema_;
  if (!refused_.empty()) figures.last_error = refused_;
  return figures;
}

PgClient& StateDb::client() { return *client_; }

Value state_db_status(const StateDb::Figures& f, const Value& decisions) {
  const auto num = [](std::uint64_t n) { return Value::integer(static_cast<std::int64_t>(n)); };
  return Value::plist({{"TARGET", Value::string(f.shown)},
                       {"NODE", Value::string(f.node)},
                       {"CONNECTED", Value::boolean(f.connected)},
                       {"SCHEMA", Value::integer(f.schema)},
                       {"SCHEMA-TARGET", Value::integer(f.target)},
                       {"LAST-ERROR", f.last_error.empty() ? Value() : Value::string(f.last_error)},
                       {"CONNECTIONS", num(f.connections)},
                       {"UNAVAILABLE", num(f.failed)},
                       {"DECISIONS", decisions}});
}

}  // namespace passepartout

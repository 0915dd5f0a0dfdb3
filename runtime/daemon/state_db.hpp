// The daemon's side of the state database (--state-db): the connection on a
// loop of its own, the schema migrated on every (re)connection, this node
// registered and its row renewed every heartbeat (how the fleet knows it is
// alive), and the figures status and /metrics show. Without --state-db
// there is none, and the state stays in the state folder.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

class PgClient;
class EventLoops;

class StateDb {
 public:
  struct Settings {
    std::string conninfo;  // libpq's
    std::string shown;     // describe_pg_target's
    std::string node;      // --node-id
    std::string version;   // this build's, recorded with the node
    // How often the node's row says it is alive (seen_at): a third of the
    // fleet's lease, within which a node not seen is taken for gone.
    std::chrono::milliseconds heartbeat{3333};
  };
  struct Figures {
    std::string shown;
    std::string node;
    bool connected = false;
    int schema = 0;  // the version found (0: not read yet)
    int target = 0;  // this build's
    std::string last_error;
    std::uint64_t connections = 0;
    std::uint64_t failed = 0;  // batches failed because the database was away
  };

  explicit StateDb(Settings settings);
  ~StateDb();  // stop()
  StateDb(const StateDb&) = delete;
  StateDb& operator=(const StateDb&) = delete;

  // Connects and migrates, waiting at most `wait` for the first answer: a
  // schema newer than this build's is refused (the daemon does not start);
  // a database that cannot be reached is logged, and tried again.
  Result<void> start(std::chrono::milliseconds wait);
  void stop();
  Figures figures() const;
  PgClient& client();

 private:
  void connected();  // on the client's loop
  void beat();       // on the client's loop: seen_at now, and again after the heartbeat
  Settings settings_;
  std::unique_ptr<EventLoops> loop_;
  std::unique_ptr<PgClient> client_;
  mutable std::mutex mutex_;
  std::condition_variable answer_;
  bool answered_ = false;              // the first migration answered
  std::atomic<bool> stopping_{false};  // set first by stop(): no beat touches the client after it
  bool registered_ = false;            // the node's row is there: beats may renew it (the client's loop)
  int schema_ = 0;
  std::string refused_;  // why the schema was refused; "" when it was not
};

// STATUS's STATE-DB: (:TARGET "host=... dbname=..." :NODE "n" :CONNECTED T
// :SCHEMA n :SCHEMA-TARGET n :LAST-ERROR "..."|NIL :CONNECTIONS n :UNAVAILABLE n
// :DECISIONS (decision_shipping_status)|NIL).
Value state_db_status(const StateDb::Figures& figures, const Value& decisions = Value());

}  // namespace passepartout

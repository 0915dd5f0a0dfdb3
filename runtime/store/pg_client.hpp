// PgClient: one connection to PostgreSQL driven by an event loop, through
// libpq's asynchronous interface in pipeline mode — no thread waits on the
// database. Work is sent as batches: the statements of a batch run as one
// transaction (one pipeline segment: all of them, or on an error none), and
// batches are pipelined, several in flight at once, their results matched in
// the order they were sent. LISTEN channels are renewed on every
// reconnection, which comes with a growing, jittered backoff; while the
// connection is down a batch fails at once, saying so, and its caller fails
// closed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace passepartout {

// One statement: SQL with $1, $2 ... and its parameters as text (nullopt: NULL).
struct PgStatement {
  std::string sql;
  std::vector<std::optional<std::string>> params;
};

// What one statement gave back: its columns and rows as text (NULL: nullopt),
// and the rows an INSERT, UPDATE or DELETE touched.
struct PgRows {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;
  std::int64_t affected = 0;

  // The column's index, or npos.
  std::size_t column(std::string_view name) const noexcept;
  // The value at `row` of the column `name`; nullopt when NULL or no such column.
  std::optional<std::string_view> at(std::size_t row, std::string_view name) const noexcept;
  // The same read as an integer (a count, a bigint column); 0 when NULL,
  // absent or not an integer.
  std::int64_t integer(std::size_t row, std::string_view name) const noexcept;
};

// Why a batch failed: the server's message and SQLSTATE ("23505": a unique
// violation, "40001": a serialization failure), or, with `connection`, that
// the connection was down or went down before the answer came — then
// whether the batch committed is not known.
struct PgError {
  std::string message;
  std::string sqlstate;
  bool connection = false;
  std::size_t statement = 0;  // which statement of the batch failed (server errors)
};

// A batch's outcome: one PgRows per statement, or the error.
struct PgOutcome {
  std::vector<PgRows> results;
  std::optional<PgError> error;
  bool ok() const noexcept { return !error.has_value(); }
};

class PgClient {
 public:
  struct Options {
    std::string conninfo;                             // libpq's: "host=... dbname=..." or a postgresql:// URI
    std::chrono::milliseconds connect_timeout{5000};  // one attempt, from start to ready
    std::chrono::milliseconds initial_backoff{200};   // before the first retry, doubling ...
    std::chrono::milliseconds max_backoff{10000};     // ... up to this, each wait jittered
    std::string application_name = "passepartout";    // pg_stat_activity's
    // A connection that asks once (pg_run_once): what it meets is in its
    // outcome, so its connecting and reconnecting are logged at debug.
    bool quiet = false;
  };

  // What status(), doctor and /metrics show.
  struct Status {
    bool connected = false;
    std::string last_error;         // why the last attempt or the connection failed; "" when none
    std::uint64_t connections = 0;  // made since start (the first included)
    std::uint64_t batches = 0;      // answered (committed or failed by the server)
    std::uint64_t failed = 0;       // failed because the connection was down or went down
    int server_version = 0;         // PQserverVersion: 150004
    std::size_t in_flight = 0;      // batches sent, not answered yet
  };

  // The loop must be run by one thread; everything the client does with
  // libpq happens there. `loop` must outlive the client, and keep running
  // until stop() has completed (or be stopped for good).
  PgClient(boost::asio::io_context& loop, Options options);
  ~PgClient();  // stop()
  PgClient(const PgClient&) = delete;
  PgClient& operator=(const PgClient&) = delete;

  // Connects, and from then on reconnects whenever the connection is lost.
  void start();
  // Closes the connection; batches in flight or queued fail (connection).
  // Any thread; callbacks may still run on the loop until it is processed.
  void stop();

  using Done = std::function<void(PgOutcome&&)>;
  // Runs `statements` as one transaction; `done` is called once, on the
  // loop's thread, in the order batches were given. Any thread.
  void run(std::vector<PgStatement> statements, Done done);
  // LISTEN `channel` (an SQL identifier), now and after every reconnection;
  // `notified` gets each NOTIFY's payload on the loop's thread. Any thread.
  void listen(std::string channel, std::function<void(std::string_view payload)> notified);
  // Called on the loop's thread each time a connection is ready (after its
  // LISTENs): where a caller re-reads what it may have missed meanwhile
  // (notifications are not kept for a client that is not connected).
  void on_connected(std::function<void()> ready);

  Status status() const;  // any thread

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Checks a state database's address (a postgresql:// URI or a libpq
// "key=value" string) as libpq reads it, and returns how to show it: its
// host (or socket folder), port, database and user. Refused: what libpq
// cannot parse (its message), and a password written into it — one that
// would show in `ps`, in the config and in logs: it belongs in PGPASSWORD
// or a password file (PGPASSFILE, ~/.pgpass; libpq ignores one that others
// can read).
Result<std::string> describe_pg_target(std::string_view conninfo);

// Runs one batch on a connection of its own to `conninfo`, on the calling
// thread, and closes it: for a command that asks once (doctor). The
// connection attempt and the answer each get `timeout`.
PgOutcome pg_run_once(const std::string& conninfo, std::vector<PgStatement> statements,
                      std::chrono::milliseconds timeout);

// Runs `statements` on `client` and waits for the outcome on the calling
// thread (never the client's loop), at most `timeout`: past it, a
// connection error ("no answer within N ms": whether it committed is not
// known). For callers whose interface is synchronous (the stores).
PgOutcome pg_wait(PgClient& client, std::vector<PgStatement> statements, std::chrono::milliseconds timeout);

// `items` as the text of a PostgreSQL array literal, each element quoted:
// a parameter cast in the statement ($1::text[], $2::float8[]).
std::string pg_array(const std::vector<std::string>& items);

// `text` as an SQL identifier (double-quoted, quotes doubled).
std::string pg_identifier(std::string_view text);

}  // namespace passepartout

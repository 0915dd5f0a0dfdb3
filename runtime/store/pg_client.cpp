// PgClient: libpq's non-blocking connection and pipeline mode on an Asio
// event loop. The socket libpq owns is watched through a stream_descriptor
// that never closes it (released before libpq closes it, and again whenever
// libpq changes sockets while it connects).
#include "store/pg_client.hpp"

#include <libpq-fe.h>

// GCC 12 reports a "potential null pointer dereference" inside Asio's epoll
// reactor (a false positive); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#pragma GCC diagnostic pop

#include <algorithm>
#include <charconv>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <utility>

#include "base/log.hpp"

namespace passepartout {

namespace asio = boost::asio;

namespace {

constexpr std::string_view kComponent = "state-db";

// libpq's message on one line: its line breaks and indents (it writes
// several lines, and ends with a break) become single spaces.
std::string trimmed(const char* message) {
  std::string text;
  bool blank = false;
  for (const char* c = message != nullptr ? message : ""; *c != '\0'; ++c) {
    const bool space = *c == '\n' || *c == '\t' || *c == ' ' || *c == '\r';
    if (space) {
      blank = !text.empty();
      continue;
    }
    if (blank) text += ' ';
    blank = false;
    text += *c;
  }
  return text.empty() ? std::string("unknown error") : text;
}

// The server's notices (and libpq's) go to the log, not to stderr.
void log_notice(void* /*unused*/, const char* message) {
  log_message(LogLevel::debug, kComponent, "{}", trimmed(message));
}

PgRows rows_of(const PGresult* result) {
  PgRows rows;
  const int fields = PQnfields(result);
  rows.columns.reserve(static_cast<std::size_t>(fields));
  for (int f = 0; f < fields; ++f) rows.columns.emplace_back(PQfname(result, f));
  const int count = PQntuples(result);
  rows.rows.reserve(static_cast<std::size_t>(count));
  for (int r = 0; r < count; ++r) {
    auto& row = rows.rows.emplace_back();
    row.reserve(static_cast<std::size_t>(fields));
    for (int f = 0; f < fields; ++f) {
      if (PQgetisnull(result, r, f) != 0) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(std::string(PQgetvalue(result, r, f), static_cast<std::size_t>(PQgetlength(result, r, f))));
      }
    }
  }
  const std::string_view touched = PQcmdTuples(const_cast<PGresult*>(result));  // NOLINT: libpq's signature
  std::from_chars(touched.data(), touched.data() + touched.size(), rows.affected);
  return rows;
}

}  // namespace

std::size_t PgRows::column(std::string_view name) const noexcept {
  const auto found = std::find(columns.begin(), columns.end(), name);
  return found == columns.end() ? std::string_view::npos : static_cast<std::size_t>(found - columns.begin());
}

std::optional<std::string_view> PgRows::at(std::size_t row, std::string_view name) const noexcept {
  const std::size_t index = column(name);
  if (index == std::string_view::npos || row >= rows.size() || !rows[row][index]) return std::nullopt;
  return std::string_view(*rows[row][index]);
}

std::int64_t PgRows::integer(std::size_t row, std::string_view name) const noexcept {
  const auto text = at(row, name);
  std::int64_t value = 0;
  if (text) std::from_chars(text->data(), text->data() + text->size(), value);
  return value;
}

Result<std::string> describe_pg_target(std::string_view conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(std::string(conninfo).c_str(), &error);
  if (options == nullptr) {
    std::string why = error != nullptr ? trimmed(error) : std::string("out of memory");
    PQfreemem(error);
    return fail(ErrorCode::invalid_input, "is not a PostgreSQL address libpq can read: " + why);
  }
  std::string host;
  std::string port;
  std::string database;
  std::string user;
  bool password = false;
  for (const PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
    if (option->val == nullptr || *option->val == '\0') continue;
    const std::string_view key = option->keyword;
    if (key == "password") password = true;
    if (key == "host" || key == "hostaddr") host = option->val;
    if (key == "port") port = option->val;
    if (key == "dbname") database = option->val;
    if (key == "user") user = option->val;
  }
  PQconninfoFree(options);
  if (password) {
    return fail(ErrorCode::refused,
                "holds a password, which would show in the process list, the config and the logs: give it in "
                "PGPASSWORD or a password file (PGPASSFILE, or ~/.pgpass, mode 0600) instead");
  }
  std::string shown = "host=" + (host.empty() ? std::string("(default)") : host);
  if (!port.empty()) shown += " port=" + port;
  if (!database.empty()) shown += " dbname=" + database;
  if (!user.empty()) shown += " user=" + user;
  return shown;
}

std::string pg_identifier(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

struct PgClient::Impl : std::enable_shared_from_this<Impl> {
  enum class State : std::uint8_t { idle, connecting, ready, waiting, stopped };
  struct Batch {
    std::vector<PgStatement> statements;
    Done done;  // empty: the client's own (a LISTEN)
    PgOutcome outcome;
    std::size_t current = 0;  // the statement whose results come next
  };

  Impl(asio::io_context& context, Options opts)
      : loop(context), options(std::move(opts)), socket(context), timer(context), backoff(options.initial_backoff) {}

  ~Impl() { close(); }

  asio::io_context& loop;
  Options options;
  PGconn* conn = nullptr;
  asio::posix::stream_descriptor socket;
  int socket_fd = -1;
  std::uint64_t generation = 0;  // a new one per socket: handlers of an older one do nothing
  asio::steady_timer timer;      // the connect deadline, then the wait before the next attempt
  State state = State::idle;
  bool reading = false;
  bool writing = false;
  std::chrono::milliseconds backoff;
  std::minstd_rand jitter{std::random_device{}()};
  std::deque<Batch> queued;     // given while connecting; sent once ready
  std::deque<Batch> in_flight;  // sent; their results come in this order
  std::vector<std::pair<std::string, std::function<void(std::string_view)>>> channels;
  std::vector<std::function<void()>> ready_hooks;

  mutable std::mutex status_mutex;
  Status figures;  // under status_mutex

  template <class Change>
  void update(Change change) {
    const std::lock_guard lock(status_mutex);
    change(figures);
    figures.in_flight = in_flight.size();
  }

  // --- the socket ---------------------------------------------------------------

  void close() {
    if (socket_fd >= 0) {
      socket.release();  // libpq closes it
      socket_fd = -1;
    }
    ++generation;
    reading = false;
    writing = false;
    if (conn != nullptr) {
      PQfinish(conn);
      conn = nullptr;
    }
  }

  // Watches libpq's current socket (it may change while connecting).
  bool bind_socket() {
    const int fd = PQsocket(conn);
    if (fd < 0) return false;
    if (fd == socket_fd) return true;
    boost::system::error_code error;
    if (socket_fd >= 0) socket.release();
    ++generation;
    reading = false;
    writing = false;
    socket.assign(fd, error);
    if (error) return false;
    socket_fd = fd;
    return true;
  }

  template <class Then>
  void wait(asio::posix::stream_descriptor::wait_type type, Then then) {
    socket.async_wait(type, [self = shared_from_this(), at = generation, then](const boost::system::error_code& error) {
      if (at != self->generation || self->state == State::stopped) return;
      if (error) {
        if (error != asio::error::operation_aborted) self->failed("waiting on the socket: " + error.message());
        return;
      }
      then(*self);
    });
  }

  // --- connecting -----------------------------------------------------------------

  void connect() {
    state = State::connecting;
    const char* keywords[] = {"dbname", "application_name", nullptr};
    const char* values[] = {options.conninfo.c_str(), options.application_name.c_str(), nullptr};
    conn = PQconnectStartParams(keywords, values, 1);  // 1: dbname may be a whole conninfo or URI
    if (conn == nullptr) return failed("out of memory");
    if (PQstatus(conn) == CONNECTION_BAD) return failed(trimmed(PQerrorMessage(conn)));
    PQsetNoticeProcessor(conn, &log_notice, nullptr);
    timer.expires_after(options.connect_timeout);
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (error || self->state != State::connecting) return;
      self->failed("no connection within " + std::to_string(self->options.connect_timeout.count()) + " ms");
    });
    poll(PGRES_POLLING_WRITING);  // as libpq's documentation says to begin
  }

  void poll(PostgresPollingStatusType status) {
    switch (status) {
      case PGRES_POLLING_OK:
        ready();
        return;
      case PGRES_POLLING_FAILED:
        failed(trimmed(PQerrorMessage(conn)));
        return;
      case PGRES_POLLING_READING:
      case PGRES_POLLING_WRITING:
      case PGRES_POLLING_ACTIVE:
        break;
    }
    if (!bind_socket()) return failed(trimmed(PQerrorMessage(conn)));
    const auto type = status == PGRES_POLLING_READING ? asio::posix::stream_descriptor::wait_read
                                                      : asio::posix::stream_descriptor::wait_write;
    wait(type, [](Impl& self) {
      if (self.state == State::connecting) self.poll(PQconnectPoll(self.conn));
    });
  }

  void ready() {
    timer.cancel();
    if (PQsetnonblocking(conn, 1) != 0 || PQenterPipelineMode(conn) != 1 || !bind_socket()) {
      return failed("could not enter pipeline mode: " + trimmed(PQerrorMessage(conn)));
    }
    state = State::ready;
    backoff = options.initial_backoff;
    const int version = PQserverVersion(conn);
    update([&](Status& s) {
      s.connected = true;
      s.last_error.clear();
      ++s.connections;
      s.server_version = version;
    });
    log_message(options.quiet ? LogLevel::debug : LogLevel::info, kComponent, "connected to PostgreSQL {}.{}",
                version / 10000, version % 10000);
    // Each through give(): should a send lose the connection, the rest fail
    // with it instead of being sent on none.
    std::deque<Batch> waiting = std::move(queued);
    queued.clear();
    for (const auto& [channel, notified] : channels) give(Batch{{{"LISTEN " + pg_identifier(channel), {}}}, {}, {}, 0});
    for (Batch& batch : waiting) give(std::move(batch));
    if (state != State::ready) return;
    read();
    for (const auto& hook : ready_hooks) hook();
  }

  // A failed attempt, or a lost connection: what was given fails, and the
  // next attempt waits (jittered between half and all of the backoff).
  void failed(const std::string& why) {
    if (state == State::stopped) return;
    const bool was_ready = state == State::ready;
    close();
    fail_all(why);
    update([&](Status& s) {
      s.connected = false;
      s.last_error = why;
    });
    state = State::waiting;
    const auto wait_for = std::chrono::milliseconds(std::uniform_int_distribution<std::int64_t>(
        backoff.count() / 2, std::max<std::int64_t>(backoff.count(), 1))(jitter));
    log_message(options.quiet ? LogLevel::debug
                : was_ready   ? LogLevel::warn
                              : LogLevel::info,
                kComponent, "{}: {}; trying again in {} ms", was_ready ? "the connection was lost" : "cannot connect",
                why, wait_for.count());
    backoff = std::min(options.max_backoff, backoff * 2);
    timer.expires_after(wait_for);
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (!error && self->state == State::waiting) self->connect();
    });
  }

  void fail_all(const std::string& why) {
    std::deque<Batch> failing = std::move(in_flight);
    in_flight.clear();
    for (Batch& batch : queued) failing.push_back(std::move(batch));
    queued.clear();
    update([&](Status& s) { s.failed += failing.size(); });
    for (Batch& batch : failing) {
      if (!batch.done) continue;
      batch.outcome.results.clear();
      batch.outcome.error = PgError{"the state database is unavailable: " + why, "", true, 0};
      batch.done(std::move(batch.outcome));
    }
  }

  // --- batches ----------------------------------------------------------------------

  void give(Batch batch) {
    switch (state) {
      case State::ready:
        send(std::move(batch));
        return;
      case State::idle:  // until start(): the first attempt takes them
      case State::connecting:
        queued.push_back(std::move(batch));
        return;
      case State::waiting:
      case State::stopped: {
        const std::string why = state == State::stopped ? std::string("the client was stopped") : figures_error();
        update([](Status& s) { ++s.failed; });
        if (batch.done) batch.done(PgOutcome{{}, PgError{"the state database is unavailable: " + why, "", true, 0}});
        return;
      }
    }
  }

  std::string figures_error() const {
    const std::lock_guard lock(status_mutex);
    return figures.last_error.empty() ? std::string("not connected") : figures.last_error;
  }

  void send(Batch batch) {
    for (const PgStatement& statement : batch.statements) {
      std::vector<const char*> values;
      values.reserve(statement.params.size());
      for (const auto& param : statement.params) values.push_back(param ? param->c_str() : nullptr);
      if (PQsendQueryParams(conn, statement.sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                            nullptr, nullptr, 0) != 1) {
        in_flight.push_back(std::move(batch));  // fails with the others
        return failed("sending a statement: " + trimmed(PQerrorMessage(conn)));
      }
    }
    if (PQpipelineSync(conn) != 1) {
      in_flight.push_back(std::move(batch));
      return failed("sending a sync: " + trimmed(PQerrorMessage(conn)));
    }
    batch.outcome.results.resize(batch.statements.size());
    in_flight.push_back(std::move(batch));
    update([](Status&) {});
    flush();
  }

  void flush() {
    const int left = PQflush(conn);
    if (left < 0) return failed("writing: " + trimmed(PQerrorMessage(conn)));
    if (left == 0 || writing) return;
    writing = true;
    wait(asio::posix::stream_descriptor::wait_write, [](Impl& self) {
      self.writing = false;
      if (self.state == State::ready) self.flush();
    });
  }

  void read() {
    if (reading) return;
    reading = true;
    wait(asio::posix::stream_descriptor::wait_read, [](Impl& self) {
      self.reading = false;
      if (self.state == State::ready) self.readable();
    });
  }

  void readable() {
    if (PQconsumeInput(conn) != 1) return failed(trimmed(PQerrorMessage(conn)));
    drain();
    if (state != State::ready) return;
    while (PGnotify* note = PQnotifies(conn)) {
      const std::string channel = note->relname;
      const std::string payload = note->extra != nullptr ? note->extra : "";
      PQfreemem(note);
      for (const auto& [name, notified] : channels) {
        if (name == channel) notified(payload);
      }
    }
    if (PQstatus(conn) == CONNECTION_BAD) return failed(trimmed(PQerrorMessage(conn)));
    read();
  }

  // Reads every result that has arrived, batch by batch.
  void drain() {
    while (!in_flight.empty() && PQisBusy(conn) == 0) {
      PGresult* result = PQgetResult(conn);
      Batch& batch = in_flight.front();
      if (result == nullptr) {                                 // the end of one statement's results
        if (batch.current >= batch.statements.size()) return;  // waiting for the sync
        ++batch.current;
        continue;
      }
      const ExecStatusType status = PQresultStatus(result);
      if (status == PGRES_PIPELINE_SYNC) {
        PQclear(result);
        Batch done = std::move(batch);
        in_flight.pop_front();
        update([](Status& s) { ++s.batches; });
        if (done.done) {
          done.done(std::move(done.outcome));
        } else if (!done.outcome.ok()) {
          log_message(LogLevel::error, kComponent, "{}", done.outcome.error->message);
        }
        if (state != State::ready) return;  // a callback stopped the client
        continue;
      }
      if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
        if (batch.current < batch.outcome.results.size()) batch.outcome.results[batch.current] = rows_of(result);
      } else if (status != PGRES_PIPELINE_ABORTED && !batch.outcome.error) {
        const char* state_code = PQresultErrorField(result, PG_DIAG_SQLSTATE);
        batch.outcome.error = PgError{trimmed(PQresultErrorMessage(result)), state_code != nullptr ? state_code : "",
                                      false, batch.current};
      }
      PQclear(result);
    }
  }

  void stop() {
    if (state == State::stopped) return;
    state = State::stopped;
    timer.cancel();
    close();
    fail_all("the client was stopped");
    update([](Status& s) { s.connected = false; });
  }
};

PgClient::PgClient(asio::io_context& loop, Options options) : impl_(std::make_shared<Impl>(loop, std::move(options))) {}

PgClient::~PgClient() { stop(); }

void PgClient::start() {
  asio::post(impl_->loop, [impl = impl_] {
    if (impl->state == Impl::State::idle) impl->connect();
  });
}

void PgClient::stop() {
  asio::post(impl_->loop, [impl = impl_] { impl->stop(); });
}

void PgClient::run(std::vector<PgStatement> statements, Done done) {
  asio::post(impl_->loop, [impl = impl_, batch = Impl::Batch{std::move(statements), std::move(done), {}, 0}]() mutable {
    impl->give(std::move(batch));
  });
}

void PgClient::listen(std::string channel, std::function<void(std::string_view payload)> notified) {
  asio::post(impl_->loop, [impl = impl_, channel = std::move(channel), notified = std::move(notified)]() mutable {
    impl->channels.emplace_back(channel, std::move(notified));
    if (impl->state == Impl::State::ready)
      impl->give(Impl::Batch{{{"LISTEN " + pg_identifier(channel), {}}}, {}, {}, 0});
  });
}

void PgClient::on_connected(std::function<void()> ready) {
  asio::post(impl_->loop,
             [impl = impl_, ready = std::move(ready)]() mutable { impl->ready_hooks.push_back(std::move(ready)); });
}

PgOutcome pg_run_once(const std::string& conninfo, std::vector<PgStatement> statements,
                      std::chrono::milliseconds timeout) {
  asio::io_context context;
  PgOutcome result{{}, PgError{"no answer within " + std::to_string(timeout.count()) + " ms", "", true, 0}};
  {
    PgClient::Options options;
    options.conninfo = conninfo;
    options.connect_timeout = timeout;
    options.quiet = true;
    PgClient client(context, options);
    client.start();
    client.run(std::move(statements), [&](PgOutcome&& outcome) {
      result = std::move(outcome);
      client.stop();  // no reconnection: the loop runs out of work
    });
    context.run_for(timeout * 2);
  }
  // What the client's destructor posted, run before the loop goes.
  context.restart();
  context.run();
  return result;
}

PgClient::Status PgClient::status() const {
  const std::lock_guard lock(impl_->status_mutex);
  return impl_->figures;
}

PgOutcome pg_wait(PgClient& client, std::vector<PgStatement> statements, std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<PgOutcome>>();
  auto future = promise->get_future();
  client.run(std::move(statements), [promise](PgOutcome&& outcome) { promise->set_value(std::move(outcome)); });
  if (future.wait_for(timeout) == std::future_status::ready) return future.get();
  PgOutcome late;
  late.error = PgError{"no answer within " + std::to_string(timeout.count()) + " ms", "", true, 0};
  return late;
}

std::string pg_array(const std::vector<std::string>& items) {
  std::string text = "{";
  for (const std::string& item : items) {
    if (text.size() > 1) text += ',';
    text += '"';
    for (const char c : item) {
      if (c == '"' || c == '\\') text += '\\';
      text += c;
    }
    text += '"';
  }
  return text + "}";
}

}  // namespace passepartout

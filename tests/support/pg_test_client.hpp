// Test support: an event loop on a thread of its own for PgClients, and a
// batch run to its outcome (bounded), for the tests that talk to the
// PostgreSQL clusters of support/postgres_cluster.hpp.
#pragma once

#include <catch2/catch.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/pg_client.hpp"
#include "store/pg_schema.hpp"

namespace passepartout::testing {

struct PgLoop {
  boost::asio::io_context context;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{context.get_executor()};
  std::thread thread{[this] { context.run(); }};
  PgLoop() = default;
  PgLoop(const PgLoop&) = delete;
  PgLoop& operator=(const PgLoop&) = delete;
  // The clients on it are gone by now (declared after it), their stops
  // posted: those, and the cancelled waits they complete, run here before
  // the context goes, so that no client's I/O object outlives it.
  ~PgLoop() {
    work.reset();
    context.stop();
    thread.join();
    context.restart();
    context.run();
  }
};

// Runs one batch on `client` and waits (at most 30 s) for its outcome.
inline PgOutcome run_batch(PgClient& client, std::vector<PgStatement> statements) {
  std::promise<PgOutcome> promise;
  auto future = promise.get_future();
  client.run(std::move(statements), [&promise](PgOutcome&& outcome) { promise.set_value(std::move(outcome)); });
  REQUIRE(future.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  return future.get();
}

// The same on a connection of its own to `conninfo` (pg_run_once).
inline PgOutcome run_batch(const std::string& conninfo, std::vector<PgStatement> statements) {
  return pg_run_once(conninfo, std::move(statements), std::chrono::seconds(30));
}

// A client on `loop` to `conninfo` (quick to reconnect), its database
// migrated to this build's schema.
inline std::unique_ptr<PgClient> migrated_client(PgLoop& loop, const std::string& conninfo) {
  PgClient::Options options;
  options.conninfo = conninfo;
  options.initial_backoff = std::chrono::milliseconds(20);
  options.max_backoff = std::chrono::milliseconds(200);
  auto client = std::make_unique<PgClient>(loop.context, options);
  client->start();
  std::promise<Result<PgSchemaOutcome>> migrated;
  auto answer = migrated.get_future();
  migrate(*client, state_schema(), "test", [&](Result<PgSchemaOutcome> outcome) { migrated.set_value(outcome); });
  REQUIRE(answer.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  REQUIRE(answer.get().has_value());
  return client;
}

}  // namespace passepartout::testing

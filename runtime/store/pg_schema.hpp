// The state database's schema: versioned migrations, each applied in one
// transaction with the version it reaches, by whichever daemon of the fleet
// gets there first. Concurrent daemons are serialised by an advisory lock
// and by the version's primary key (a second daemon's copy of a migration
// fails as a whole and is not applied twice); a database whose schema is
// newer than this build's is refused, changing nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "store/pg_client.hpp"

namespace passepartout {

struct PgSchema {
  // Migration i takes the schema from version i to i + 1: its statements,
  // literal SQL (nothing formatted in). The schema's version is migrations.size().
  std::span<const std::span<const std::string_view>> migrations;
};

// The schema this build reads and writes.
const PgSchema& state_schema();

struct PgSchemaOutcome {
  int found = 0;    // the version the database had
  int version = 0;  // the version it has now
};

// Brings the database `client` talks to up to `schema`'s version (creating
// the version table first), then calls `done` on the client's loop:
// refused when the database's schema is newer than this build's (it
// names both versions and says to upgrade this daemon), io_error when the
// database could not be reached or a migration failed (the server's
// message). `node` is recorded with each migration it applies.
void migrate(PgClient& client, const PgSchema& schema, std::string node,
             std::function<void(Result<PgSchemaOutcome>)> done);

}  // namespace passepartout

// Test support: a private PostgreSQL 15 cluster in a temporary folder —
// initdb and pg_ctl from Debian's postgresql-15, listening only on a Unix
// socket in that folder (no TCP port, nothing shared with the machine's own
// clusters), fsync off, trust authentication for its one role. PostgreSQL
// refuses to run as root: as root the cluster runs as the `postgres` user
// the package creates (the folder is given to it). Every step is bounded in
// time and fails the test with the server's log.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace passepartout::testing {

class PostgresCluster {
 public:
  // initdb and start; throws (std::runtime_error, with the log) when a step fails.
  PostgresCluster();
  ~PostgresCluster();  // stopped (immediate), folder removed
  PostgresCluster(const PostgresCluster&) = delete;
  PostgresCluster& operator=(const PostgresCluster&) = delete;

  // Where the binaries are (PASSEPARTOUT_PG_BIN, else /usr/lib/postgresql/15/bin),
  // or "" when there are none: the tests that need a cluster then fail, naming
  // the package to install (scripts/setup installs it).
  static std::filesystem::path bin_dir();

  // A libpq connection string for `database`.
  std::string conninfo(std::string_view database = "postgres") const;
  // A new, empty database of its own for one test: "t1", "t2", ...
  std::string create_database();

  void stop();   // fast shutdown; connections are closed
  void start();  // again, same folder and socket
  const std::filesystem::path& dir() const { return dir_; }
  std::string log() const;

 private:
  int spawn(const std::vector<std::string>& args) const;
  void run(const std::vector<std::string>& args) const;
  std::filesystem::path dir_;
  int databases_ = 0;
  bool running_ = false;
};

// One cluster for the whole test run, started on first use (initdb takes a
// second or two): tests that only need a database of their own take one
// from it. Tests that stop or restart the server start their own.
PostgresCluster& shared_postgres();

}  // namespace passepartout::testing

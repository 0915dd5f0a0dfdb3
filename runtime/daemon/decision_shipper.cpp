// The decision log's spool shipped to passepartout_decisions: a thread, one
// blocking libpq connection, and the files read from where the database
// says each was shipped to. docs/decisions/0029 says why it is built so.
#include "daemon/decision_shipper.hpp"

#include <fcntl.h>
#include <libpq-fe.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "base/digest.hpp"
#include "base/errno_text.hpp"
#include "base/log.hpp"
#include "pipeline/decision_log.hpp"

namespace passepartout {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kComponent = "fleet";
constexpr std::size_t kFirstLineLimit = std::size_t{64} << 20;  // a longer "line" is not one the writer made

struct PgResultDeleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using PgResultPtr = std::unique_ptr<PGresult, PgResultDeleter>;

std::string pq_error(PGconn* conn) {
  std::string text = conn != nullptr ? PQerrorMessage(conn) : "out of memory";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "the connection failed" : text;
}

std::string result_error(PGconn* conn, const PGresult* result) {
  if (result == nullptr) return pq_error(conn);
  std::string text = PQresultErrorMessage(result);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? pq_error(conn) : text;
}

// COPY's text format: a backslash, tab, newline or carriage return escaped.
void append_copy_field(std::string& out, std::string_view text) {
  for (const char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
}

bool digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The log's "time" (2026-11-27T05:11:20.123456Z, the fraction optional), as
// PostgreSQL must accept it: anything else would fail a whole batch.
bool decision_time(std::string_view t) {
  if (t.size() < 20 || t.back() != 'Z') return false;
  if (!digits(t.substr(0, 4)) || t[4] != '-' || !digits(t.substr(5, 2)) || t[7] != '-' || !digits(t.substr(8, 2)) ||
      t[10] != 'T' || !digits(t.substr(11, 2)) || t[13] != ':' || !digits(t.substr(14, 2)) || t[16] != ':' ||
      !digits(t.substr(17, 2))) {
    return false;
  }
  const std::string_view fraction = t.substr(19, t.size() - 20);
  return fraction.empty() ||
         (fraction.size() >= 2 && fraction.size() <= 7 && fraction[0] == '.' && digits(fraction.substr(1)));
}

// Reads [offset, offset + size) of `fd`; shorter at the end of the file.
std::string read_at(int fd, std::uint64_t offset, std::size_t size) {
  std::string bytes(size, '\0');
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, bytes.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

// A spool file's name in the database: the digest of its first line (which
// never changes and is unique: it carries a decision's id and its time to
// the microsecond). `head` is the file's start; "" while it holds no whole
// line, unless `whole` (a rotated file: its unended only line names it).
std::string file_key(std::string_view head, bool whole) {
  const std::size_t eol = head.find('\n');
  if (eol != std::string_view::npos) return sha256_hex(head.substr(0, eol)).substr(0, 32);
  return whole && !head.empty() ? sha256_hex(head).substr(0, 32) : std::string();
}

// The key of the file `fd` (of `size` bytes) holds; "" when it has none yet.
std::string read_file_key(int fd, std::uint64_t size, bool whole) {
  std::string head;
  for (std::size_t chunk = 4096;; chunk *= 2) {
    head = read_at(fd, 0, std::min<std::size_t>(chunk, kFirstLineLimit));
    if (head.find('\n') != std::string::npos || head.size() >= size || chunk >= kFirstLineLimit) break;
  }
  return file_key(head, whole);
}

// One spool file as a round sees it.
struct SpoolFile {
  fs::path path;
  bool current = false;  // decisions.jsonl: the writer may still append
  int fd = -1;
  std::uint64_t size = 0;
  std::string key;  // the digest of its first line; "" while it has none
  ~SpoolFile() {
    if (fd >= 0) ::close(fd);
  }
  SpoolFile() = default;
  SpoolFile(const SpoolFile&) = delete;
  SpoolFile& operator=(const SpoolFile&) = delete;
};

// The spool's files in `folder`, oldest first, each opened with its size and key.
std::vector<std::unique_ptr<SpoolFile>> list_spool(const fs::path& folder) {
  std::vector<fs::path> paths = decision_files_newest_first(folder);
  std::reverse(paths.begin(), paths.end());
  std::vector<std::unique_ptr<SpoolFile>> files;
  for (const fs::path& path : paths) {
    auto file = std::make_unique<SpoolFile>();
    file->path = path;
    file->current = path == current_decisions_file(folder);
    file->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file->fd < 0) continue;  // pruned or rotated meanwhile: the next round sees it again
    struct stat st {};
    if (::fstat(file->fd, &st) != 0) continue;
    file->size = static_cast<std::uint64_t>(st.st_size);
    file->key = read_file_key(file->fd, file->size, !file->current);
    files.push_back(std::move(file));
  }
  return files;
}

// How far `file` is shipped by `shipped`'s marks, and what waits of it added to `backlog`.
std::uint64_t count_backlog(const SpoolFile& file, const std::map<std::string, std::uint64_t>& shipped,
                            SpoolBacklog& backlog) {
  auto it = shipped.find(file.key);
  const std::uint64_t done = it == shipped.end() ? 0 : std::min(it->second, file.size);
  if (file.key.empty() || done == file.size) return done;
  backlog.bytes += file.size - done;
  if (++backlog.files == 1) {
    if (const auto t = decision_unix_seconds(read_at(file.fd, done, 512))) {
      backlog.oldest_seconds = std::max(0.0, static_cast<double>(std::time(nullptr) - *t));
    }
  }
  return done;
}

// A batch: the rows to copy, and how far in its file they reach.
struct Batch {
  std::string rows;
  std::uint64_t end = 0;
  std::uint64_t lines = 0;
  std::uint64_t skipped = 0;
};

}  // namespace

struct DecisionShipper::State {
  explicit State(Options o) : options(std::move(o)) {}

  Options options;
  std::thread thread;

  mutable std::mutex mutex;  // guards the rest but `conn` and `cursors` (the thread's)
  std::condition_variable wake;
  std::condition_variable rounds;
  bool nudged = false;
  bool stopping = false;
  std::chrono::steady_clock::time_point stop_by{};
  std::uint64_t round = 0;     // rounds completed
  bool idle = false;           // the last round found nothing to ship
  std::set<std::string> done;  // the keys of rotated files shipped to the end
  bool cursors_known = false;  // `done` reflects the database
  Figures figures;

  // The thread's alone.
  PGconn* conn = nullptr;
  std::map<std::string, std::uint64_t> cursors;  // file key -> bytes shipped

  void close_connection() {
    if (conn != nullptr) PQfinish(conn);
    conn = nullptr;
    const std::lock_guard guard(mutex);
    figures.connected = false;
  }

  void failed(std::string why) {
    log_message(LogLevel::warn, kComponent, "decisions are not shipped for now: {}", why);
    const std::lock_guard guard(mutex);
    ++figures.failures;
    figures.last_error = std::move(why);
  }

  PgResultPtr exec(const char* sql, std::initializer_list<std::string> params = {}) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const std::string& p : params) values.push_back(p.c_str());
    return PgResultPtr(
        PQexecParams(conn, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0));
  }

  bool connect() {
    const std::string timeout =
        std::to_string(std::max<std::int64_t>(1, (options.connect_timeout.count() + 999) / 1000));
    // Ours first: what the address itself says overrides them.
    const char* keywords[] = {"application_name", "connect_timeout",  "keepalives_idle", "keepalives_interval",
                              "keepalives_count", "tcp_user_timeout", "dbname",          nullptr};
    const char* values[] = {"passepartout decisions", timeout.c_str(), "10", "5", "3", "30000",
                            options.conninfo.c_str(), nullptr};
    conn = PQconnectdbParams(keywords, values, 1);
    if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
      failed(pq_error(conn));
      close_connection();
      return false;
    }
    PQsetNoticeProcessor(
        conn, [](void*, const char*) {}, nullptr);
    // A statement that hangs (a lock, a server that stopped answering) ends.
    PgResultPtr set(PQexec(conn, "SET statement_timeout = '30s'"));
    PgResultPtr loaded = exec("SELECT file, shipped FROM passepartout_decision_files WHERE node = $1", {options.node});
    if (PQresultStatus(loaded.get()) != PGRES_TUPLES_OK) {
      failed("reading how far this node's files are shipped: " + result_error(conn, loaded.get()));
      close_connection();
      return false;
    }
    cursors.clear();
    for (int i = 0; i < PQntuples(loaded.get()); ++i) {
      cursors[PQgetvalue(loaded.get(), i, 0)] = std::strtoull(PQgetvalue(loaded.get(), i, 1), nullptr, 10);
    }
    const std::lock_guard guard(mutex);
    figures.connected = true;
    cursors_known = true;
    return true;
  }

  // Whole lines of `file` from `from`, at most batch_bytes (or one line
  // when it is longer); a rotated file's unended tail counts as a line.
  Batch read_batch(const SpoolFile& file, std::uint64_t from) const {
    Batch batch;
    std::size_t want = std::min<std::uint64_t>(options.batch_bytes, file.size - from);
    std::string bytes = read_at(file.fd, from, want);
    std::size_t end = bytes.rfind('\n');
    while (end == std::string::npos && from + bytes.size() < file.size) {  // one line longer than a batch
      want = std::min<std::uint64_t>(want * 2, file.size - from);
      bytes = read_at(file.fd, from, want);
      end = bytes.rfind('\n');
    }
    std::size_t take = end == std::string::npos ? 0 : end + 1;
    if (!file.current && from + bytes.size() == file.size) take = bytes.size();  // its tail too
    std::string_view rest(bytes.data(), take);
    const std::string& node = options.node;
    while (!rest.empty()) {
      const std::size_t eol = rest.find('\n');
      const std::string_view line = rest.substr(0, eol);
      rest.remove_prefix(eol == std::string_view::npos ? rest.size() : eol + 1);
      if (line.empty()) continue;
      // A line the log's readers would skip is passed over here too.
      const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
      const auto text = [&](const char* key) -> std::string_view {
        if (!record.is_object()) return {};
        auto it = record.find(key);
        return it != record.end() && it->is_string() ? std::string_view(it->get_ref<const std::string&>())
                                                     : std::string_view();
      };
      const std::string_view id = text("id");
      const std::string_view time = text("time");
      if (id.empty() || !decision_time(time)) {
        ++batch.skipped;
        continue;
      }
      batch.rows += node;
      batch.rows += '\t';
      append_copy_field(batch.rows, id);
      batch.rows += '\t';
      batch.rows += time;
      batch.rows += '\t';
      append_copy_field(batch.rows, text("outcome"));
      batch.rows += '\t';
      append_copy_field(batch.rows, text("session"));
      batch.rows += '\t';
      append_copy_field(batch.rows, line);
      batch.rows += '\n';
      ++batch.lines;
    }
    batch.end = from + take;
    return batch;
  }

  // One transaction: the rows, and the file's mark moved from `from` to
  // batch.end — only if it still is at `from`. False when it failed (the
  // connection is then closed) or the mark had moved (the marks are read again).
  bool ship(const SpoolFile& file, std::uint64_t from, const Batch& batch) {
    const auto abandon = [&](std::string why) {
      failed(std::move(why));
      close_connection();
      return false;
    };
    PgResultPtr begun(PQexec(conn, "BEGIN"));
    if (PQresultStatus(begun.get()) != PGRES_COMMAND_OK) return abandon(result_error(conn, begun.get()));
    PgResultPtr marked = exec(
        "INSERT INTO passepartout_decision_files AS f (node, file, shipped, lines) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (node, file) DO UPDATE SET shipped = EXCLUDED.shipped, lines = f.lines + EXCLUDED.lines, "
        "updated_at = now() WHERE f.shipped = $5",
        {options.node, file.key, std::to_string(batch.end), std::to_string(batch.lines), std::to_string(from)});
    if (PQresultStatus(marked.get()) != PGRES_COMMAND_OK) return abandon(result_error(conn, marked.get()));
    if (std::strcmp(PQcmdTuples(marked.get()), "1") != 0) {
      // Not where this node left it: somebody else ships these files (two
      // daemons given one --node-id and one state folder?). Read the marks again.
      PgResultPtr rolled(PQexec(conn, "ROLLBACK"));
      log_message(LogLevel::warn, kComponent, "{} was shipped past where this node knew: reading the marks again",
                  file.path.string());
      return abandon("another process ships this node's decision files");
    }
    if (!batch.rows.empty()) {
      PgResultPtr copy(
          PQexec(conn, "COPY passepartout_decisions (node, id, time, outcome, session, record) FROM STDIN"));
      if (PQresultStatus(copy.get()) != PGRES_COPY_IN) return abandon(result_error(conn, copy.get()));
      if (PQputCopyData(conn, batch.rows.data(), static_cast<int>(batch.rows.size())) != 1 ||
          PQputCopyEnd(conn, nullptr) != 1) {
        return abandon(pq_error(conn));
      }
      PgResultPtr copied(PQgetResult(conn));
      if (PQresultStatus(copied.get()) != PGRES_COMMAND_OK) return abandon(result_error(conn, copied.get()));
      while (PgResultPtr more{PQgetResult(conn)}) {
      }
    }
    PgResultPtr committed(PQexec(conn, "COMMIT"));
    // An aborted transaction's COMMIT answers "ROLLBACK".
    if (PQresultStatus(committed.get()) != PGRES_COMMAND_OK ||
        std::strcmp(PQcmdStatus(committed.get()), "COMMIT") != 0) {
      return abandon("the batch was not committed: " + result_error(conn, committed.get()));
    }
    cursors[file.key] = batch.end;
    const std::lock_guard guard(mutex);
    figures.shipped += batch.lines;
    figures.skipped += batch.skipped;
    ++figures.batches;
    figures.last_error.clear();
    return true;
  }

  // Looks at every file and, when `connected`, ships one batch of the
  // oldest that holds any. Returns whether one was shipped (there may be
  // more); nullopt on failure. Without a connection it only counts what
  // waits, by the marks last read (none read yet: all of it).
  std::optional<bool> one_round(bool connected) {
    const std::vector<std::unique_ptr<SpoolFile>> files = list_spool(options.folder);
    SpoolBacklog backlog;
    const SpoolFile* next = nullptr;
    std::uint64_t next_from = 0;
    std::set<std::string> finished;
    for (const auto& file : files) {
      if (file->key.empty()) continue;  // no whole line yet
      const std::uint64_t before = backlog.files;
      const std::uint64_t shipped = count_backlog(*file, cursors, backlog);
      if (backlog.files == before) {
        if (!file->current) finished.insert(file->key);
      } else if (next == nullptr) {
        next = file.get();
        next_from = shipped;
      }
    }
    bool shipped_one = false;
    if (connected && next != nullptr) {
      const Batch batch = read_batch(*next, next_from);
      if (batch.end > next_from) {
        if (!ship(*next, next_from, batch)) return std::nullopt;
        backlog.bytes -= batch.end - next_from;
        if (backlog.bytes == 0) backlog.oldest_seconds = 0;
        if (!next->current && batch.end == next->size) finished.insert(next->key);
        shipped_one = true;
      }
    }
    const std::lock_guard guard(mutex);
    if (connected) done = std::move(finished);
    figures.spool_bytes = backlog.bytes;
    figures.spool_files = backlog.files;
    figures.lag_seconds = backlog.oldest_seconds;
    return shipped_one;
  }

  void run() {
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
    std::chrono::milliseconds backoff = options.initial_backoff;
    for (;;) {
      bool busy = false;
      {
        // Stopping without a connection: what waits goes at the next start,
        // rather than hold the shutdown up for a connection attempt.
        const std::lock_guard guard(mutex);
        if (stopping && conn == nullptr) break;
      }
      bool ok = conn != nullptr || connect();
      if (ok) {
        const std::optional<bool> shipped = one_round(true);
        ok = shipped.has_value();
        busy = shipped.value_or(false);
      } else {
        one_round(false);
      }
      if (ok) backoff = options.initial_backoff;
      std::unique_lock lock(mutex);
      ++round;
      idle = ok && !busy;
      rounds.notify_all();
      if (stopping && (!ok || !busy || std::chrono::steady_clock::now() >= stop_by)) break;
      if (busy) continue;
      const auto wait = ok ? options.interval : backoff;
      if (!ok) backoff = std::min(backoff * 2, options.max_backoff);
      wake.wait_for(lock, wait, [&] { return nudged || stopping; });
      nudged = false;
    }
    close_connection();
  }
};

DecisionShipper::DecisionShipper(Options options) : state_(std::make_shared<State>(std::move(options))) {}

DecisionShipper::~DecisionShipper() { stop(std::chrono::milliseconds(0)); }

void DecisionShipper::start() {
  if (state_->thread.joinable()) return;
  state_->thread = std::thread([state = state_] { state->run(); });
}

void DecisionShipper::stop(std::chrono::milliseconds wait) {
  {
    const std::lock_guard guard(state_->mutex);
    state_->stopping = true;
    state_->stop_by = std::chrono::steady_clock::now() + wait;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

void DecisionShipper::nudge() {
  {
    const std::lock_guard guard(state_->mutex);
    state_->nudged = true;
  }
  state_->wake.notify_one();
}

bool DecisionShipper::unshipped(const fs::path& file) const {
  // By what the file holds, not its name: a pruned file's name (and inode)
  // may be a newer file's by now.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // gone already
  struct stat st {};
  const std::string key = ::fstat(fd, &st) == 0 ? read_file_key(fd, static_cast<std::uint64_t>(st.st_size), true) : "";
  ::close(fd);
  const std::lock_guard guard(state_->mutex);
  return !state_->cursors_known || key.empty() || !state_->done.contains(key);
}

bool DecisionShipper::drain(std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mutex);
  // A round that starts after this call sees everything written before it.
  const std::uint64_t after = state_->round + 1;
  state_->nudged = true;
  state_->wake.notify_one();
  return state_->rounds.wait_for(lock, timeout, [&] { return state_->round > after && state_->idle; });
}

DecisionShipper::Figures DecisionShipper::figures() const {
  const std::lock_guard guard(state_->mutex);
  return state_->figures;
}

SpoolBacklog spool_backlog(const fs::path& folder, const std::map<std::string, std::uint64_t>& shipped) {
  SpoolBacklog backlog;
  for (const auto& file : list_spool(folder)) count_backlog(*file, shipped, backlog);
  return backlog;
}

Value decision_shipping_status(const DecisionShipper::Figures& f) {
  const auto num = [](std::uint64_t n) { return Value::integer(static_cast<std::int64_t>(n)); };
  return Value::plist({{"CONNECTED", Value::boolean(f.connected)},
                       {"SHIPPED", num(f.shipped)},
                       {"SKIPPED", num(f.skipped)},
                       {"SPOOL-BYTES", num(f.spool_bytes)},
                       {"SPOOL-FILES", num(f.spool_files)},
                       {"LAG-SECONDS", Value::real(f.lag_seconds)},
                       {"LAST-ERROR", f.last_error.empty() ? Value() : Value::string(f.last_error)}});
}

}  // namespace passepartout

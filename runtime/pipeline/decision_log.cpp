// The decision log's buffer (per-thread shards), its writer thread, the line
// format (docs/decision-log.md) and rotation.
#include "pipeline/decision_log.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <thread>
#include <utility>

#include "base/digest.hpp"
#include "base/errno_text.hpp"
#include "base/json_string.hpp"
#include "base/log.hpp"
#include "base/thread_shards.hpp"
#include "base/utf8.hpp"
#include "pipeline/signal.hpp"
#include "skills/slot.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {

namespace fs = std::filesystem;
using namespace key_literals;

namespace {

constexpr std::string_view kComponent = "decisions";
constexpr std::string_view kCurrentName = "decisions.jsonl";
constexpr std::size_t kWriteChunk = std::size_t{256} << 10;  // bytes of whole lines per write() at most (about)

void append_key(std::string& out, std::string_view key) {
  out += ',';
  append_json_string(out, key);
  out += ':';
}

void append_field(std::string& out, std::string_view key, std::string_view text) {
  append_key(out, key);
  append_json_string(out, text);
}

// Microseconds with three decimals (a gate often takes less than one), "0.042".
void append_micros(std::string& out, std::chrono::nanoseconds took) {
  const std::int64_t ns = std::max<std::int64_t>(took.count(), 0);
  char text[64];
  const int n = std::snprintf(text, sizeof text, "%lld.%03lld", static_cast<long long>(ns / 1000),
                              static_cast<long long>(ns % 1000));
  std::string_view printed(text, static_cast<std::size_t>(n));
  while (printed.ends_with('0')) printed.remove_suffix(1);
  if (printed.ends_with('.')) printed.remove_suffix(1);
  out += printed;
}

// RFC 3339, UTC, microseconds: "2026-11-27T05:11:20.123456Z".
std::string rfc3339_micros(std::int64_t unix_us) {
  unix_us = std::max<std::int64_t>(unix_us, 0);
  const auto seconds = static_cast<std::time_t>(unix_us / 1'000'000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[96];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<long long>(unix_us % 1'000'000));
  return text;
}

std::string compact_utc(std::time_t seconds) {
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[64];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

// A keyword's name in lower case without its colon; a string as it is;
// anything else printed.
std::string as_text(const Value& value) {
  if (value.is_keyword() || value.is_symbol()) {
    std::string name(value.text());
    if (!name.empty() && name.front() == ':') name.erase(0, 1);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
    return name;
  }
  if (value.is_string()) return std::string(value.text());
  return to_sexp(value);
}

std::int64_t wall_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* to_string(DecisionStage stage) noexcept {
  switch (stage) {
    case DecisionStage::reason:
      return "reason";
    case DecisionStage::last_mile:
      return "last-mile";
    case DecisionStage::approval:
      return "approval";
  }
  return "reason";
}

const char* decision_outcome(VerifyOutcome outcome, const GateTrace& trace) noexcept {
  switch (outcome) {
    case VerifyOutcome::passed:
      return "passed";
    case VerifyOutcome::approval_required:
      return "approval";
    case VerifyOutcome::blocked:
      break;
  }
  // Blocked: "failed" when what stopped it (the last entry) failed.
  const std::size_t n = trace.size();
  return n > 0 && trace[n - 1].result == GateResult::failed ? "failed" : "blocked";
}

std::vector<fs::path> decision_files_newest_first(const fs::path& folder) {
  struct Rotated {
    std::string stamp;
    long n;
    fs::path path;
  };
  std::vector<Rotated> rotated;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("decisions-") || !name.ends_with(".jsonl")) continue;
    const std::string middle = name.substr(10, name.size() - 10 - 6);
    const std::size_t dash = middle.rfind('-');
    if (dash == std::string::npos) continue;
    rotated.push_back({middle.substr(0, dash), std::strtol(middle.c_str() + dash + 1, nullptr, 10), entry.path()});
  }
  std::sort(rotated.begin(), rotated.end(),
            [](const Rotated& a, const Rotated& b) { return a.stamp != b.stamp ? a.stamp > b.stamp : a.n > b.n; });
  std::vector<fs::path> files;
  if (fs::exists(folder / kCurrentName, ec)) files.push_back(folder / kCurrentName);
  for (const Rotated& r : rotated) files.push_back(r.path);
  return files;
}

std::optional<std::int64_t> decision_unix_seconds(std::string_view text) {
  const std::size_t at = text.find(R"("time":")");
  if (at == std::string_view::npos || at + 8 + 19 > text.size()) return std::nullopt;
  std::tm tm{};
  const std::string stamp(text.substr(at + 8, 19));
  if (::strptime(stamp.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return std::nullopt;
  return static_cast<std::int64_t>(::timegm(&tm));
}

fs::path current_decisions_file(const fs::path& folder) { return folder / kCurrentName; }
fs::path decisions_folder(const fs::path& state_dir) { return state_dir / "decisions"; }

// An MCP tool call's server and the digest of the definition it was made
// against (Offer::stamp sets both), as fields of their own: a digest is
// public, yet masked as a credential would be inside the action's text.
// Only what has their shape is written.
void append_external_tool(std::string& out, const Value& action) {
  if (!action.at("TARGET"_key).is_keyword("TOOL"_key)) return;
  const Value& payload = action.at("PAYLOAD"_key);
  const Value& server = payload.at("SERVER"_key);
  const Value& digest = payload.at("DIGEST"_key);
  if (!server.is_string() || !digest.is_string()) return;
  const std::string_view name = server.text();
  const std::string_view hex = digest.text();
  const bool name_ok = !name.empty() && name.size() <= 24 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  const bool hex_ok = hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](char c) {
                        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                      });
  if (!name_ok || !hex_ok) return;
  append_field(out, "mcp_server", name);
  append_field(out, "tool_sha256", hex);
}

std::string decision_line(const DecisionRecord& record, std::string_view id, std::int64_t unix_us) {
  std::string out;
  out.reserve(512);
  out += "{\"v\":1";
  append_field(out, "id", id);
  append_field(out, "time", rfc3339_micros(unix_us));
  append_field(out, "stage", to_string(record.stage));
  append_field(out, "session", session_id_of(record.signal));
  const Value& sensor = sensor_of(record.signal);
  if (!sensor.is_nil()) append_field(out, "sensor", as_text(sensor));
  const Value& source = record.signal.path("META"_key, "SOURCE"_key);
  if (!source.is_nil()) append_field(out, "source", as_text(source));
  if (!record.provider.empty()) append_field(out, "provider", record.provider);
  if (!record.model.empty()) append_field(out, "model", record.model);
  append_external_tool(out, record.action);
  const std::string action = to_sexp(record.action);
  const std::string masked_action = mask_secrets(action);
  const std::string signal = to_sexp(record.signal);
  const std::string masked_signal = mask_secrets(signal);
  append_field(out, "action", masked_action);
  append_field(out, "signal", masked_signal);
  if (masked_action != action || masked_signal != signal) out += ",\"masked\":true";

  append_key(out, "gates");
  out += '[';
  for (std::size_t i = 0; i < record.trace.size(); ++i) {
    const GateTraceView gate = record.trace[i];
    if (i > 0) out += ',';
    out += "{\"name\":";
    append_json_string(out, gate.name());
    append_field(out, "version", gate.version());
    if (gate.slot != nullptr) append_field(out, "sha256", gate.slot->library_sha256());
    append_field(out, "verdict", to_string(gate.result));
    if (gate.reason.is_string()) append_field(out, "reason", mask_secrets(gate.reason.text()));
    if (i + 1 < record.marks) {
      append_key(out, "us");
      append_micros(out, IntervalClock::elapsed(record.gate_marks[i], record.gate_marks[i + 1]));
    }
    out += '}';
  }
  out += ']';
  append_field(out, "outcome", record.expired ? "expired" : decision_outcome(record.outcome, record.trace));
  if ((record.expired || record.outcome != VerifyOutcome::passed) && record.reason.is_string()) {
    append_field(out, "reason", mask_secrets(record.reason.text()));
  }
  if (!record.approval_token_sha256.empty()) append_field(out, "approval_token_sha256", record.approval_token_sha256);
  if (!record.granted_by.empty()) append_field(out, "granted_by", record.granted_by);
  append_key(out, "took_us");
  append_micros(out, IntervalClock::elapsed(record.started, record.finished));
  if (!record.shadow.empty()) {
    append_key(out, "shadow");
    out += '[';
    for (std::size_t i = 0; i < record.shadow.size(); ++i) {
      const ShadowDisagreement& s = record.shadow[i];
      if (i > 0) out += ',';
      out += "{\"name\":";
      append_json_string(out, s.name);
      append_field(out, "version", s.version);
      if (!s.sha256.empty()) append_field(out, "sha256", s.sha256);
      append_field(out, "live", s.live);
      append_field(out, "candidate", s.candidate);
      if (!s.reason.empty()) append_field(out, "reason", mask_secrets(s.reason));
      append_field(out, "kind", s.kind);
      out += '}';
    }
    out += ']';
  }
  out += '}';
  return out;
}

// --- PendingDecision ---------------------------------------------------------------------

PendingDecision& PendingDecision::operator=(PendingDecision&& other) noexcept {
  if (this != &other) {
    submit({});
    log_ = other.log_;
    record_ = std::move(other.record_);
  }
  return *this;
}

PendingDecision::~PendingDecision() { submit({}); }

void PendingDecision::submit(std::string_view token, std::string_view granted_by) {
  if (record_ == nullptr || log_ == nullptr) return;
  if (!token.empty()) record_->approval_token_sha256 = sha256_hex(token);
  record_->granted_by.assign(granted_by);
  std::unique_ptr<DecisionRecord> record = std::move(record_);
  log_->push(std::move(*record));
}

// --- the buffer and the writer -----------------------------------------------------------

struct DecisionLog::State {
  explicit State(DecisionLogOptions o) : options(std::move(o)) {}

  DecisionLogOptions options;

  // One per thread shard: the thread that owns it and the writer (for a
  // swap) take its lock, so it is rarely contended.
  struct alignas(64) Shard {
    ShardLock lock;  // guards records, last_snapshot
    std::vector<DecisionRecord> records;
    const Snapshot* last_snapshot = nullptr;  // held by a record of `records`
    std::atomic<std::uint64_t> dropped{0};    // changed under `lock`
  };
  std::array<Shard, kThreadShards> shards;
  std::array<std::vector<DecisionRecord>, kThreadShards> taken;  // the writer's

  std::mutex mutex;  // guards stop, wake, held, parked, flush_requested, flush_done
  std::condition_variable wanted;
  std::condition_variable flushed;
  bool stop = false;
  bool wake = false;
  bool held = false;
  bool parked = false;  // the writer waits while held
  std::uint64_t flush_requested = 0;
  std::uint64_t flush_done = 0;

  std::atomic<std::uint64_t> written{0};
  // Decision numbers: taken by the writer, and by a pipeline thread for a
  // verification whose gates did not all simply pass (the gate log names it).
  std::atomic<std::uint64_t> next_id{1};
  std::atomic<std::uint64_t> lost{0};  // records that could not be written

  // The writer's alone.
  int fd = -1;
  std::uint64_t file_bytes = 0;
  std::int64_t file_started_us = 0;
  std::string id_prefix;
  std::string rotated_stamp;  // the second of the last rotation, and the next sequence number in it
  int rotated_next = 0;
  std::uint64_t dropped_reported = 0;
  std::chrono::steady_clock::time_point last_report = std::chrono::steady_clock::now();
  std::vector<DecisionRecord*> batch;
  std::string out;
  std::thread writer;

  std::uint64_t dropped_total() const noexcept {
    std::uint64_t total = lost.load(std::memory_order_relaxed);
    for (const Shard& shard : shards) total += shard.dropped.load(std::memory_order_relaxed);
    return total;
  }

  void wake_writer() {
    {
      const std::lock_guard guard(mutex);
      wake = true;
    }
    wanted.notify_one();
  }

  // Takes a record slot in the calling thread's shard, or counts a drop.
  template <class Fill>
  void put(Fill&& fill) {
    Shard& shard = shards[thread_shard()];
    std::size_t size = 0;
    {
      const std::lock_guard guard(shard.lock);
      if (shard.records.size() >= options.buffer) {
        shard.dropped.store(shard.dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return;
      }
      if (shard.records.capacity() == 0) shard.records.reserve(options.buffer);
      fill(shard.records.emplace_back(), shard.last_snapshot);
      size = shard.records.size();
    }
    if (size == std::max<std::size_t>(options.buffer / 2, 1)) wake_writer();
  }

  Result<void> open_current() {
    const fs::path file = current_decisions_file(options.folder);
    fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return fail(ErrorCode::io_error, "cannot open " + file.string() + ": " + errno_text(errno));
    struct stat st {};
    file_bytes = ::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    terminate_torn_line(file);
    file_started_us = wall_now_us();
    if (file_bytes > 0) file_started_us = first_line_time(file).value_or(file_started_us);
    return {};
  }

  // A process killed in the middle of a write leaves a line without its
  // '\n': it is ended here, so that it stays one malformed line (which
  // readers skip and name) instead of swallowing the next record.
  void terminate_torn_line(const fs::path& file) {
    if (file_bytes == 0) return;
    const int in = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return;
    char last = '\n';
    const bool read = ::pread(in, &last, 1, static_cast<off_t>(file_bytes - 1)) == 1;
    ::close(in);
    if (!read || last == '\n') return;
    if (::write(fd, "\n", 1) == 1) ++file_bytes;
  }

  // The time of the first line of `file`, to rotate a file a daemon before began.
  static std::optional<std::int64_t> first_line_time(const fs::path& file) {
    const int in = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return std::nullopt;
    char head[1024];
    const ssize_t n = ::read(in, head, sizeof head);
    ::close(in);
    if (n <= 0) return std::nullopt;
    const auto seconds = decision_unix_seconds(std::string_view(head, static_cast<std::size_t>(n)));
    if (!seconds) return std::nullopt;
    return *seconds * 1'000'000;
  }

  void rotate() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    const fs::path current = current_decisions_file(options.folder);
    const std::string stamp = compact_utc(static_cast<std::time_t>(wall_now_us() / 1'000'000));
    std::error_code ec;
    // Within a second the sequence only grows: a name whose file was
    // pruned is not given to a newer one, which would then sort as older.
    if (stamp != rotated_stamp) rotated_next = 0;
    rotated_stamp = stamp;
    for (int n = rotated_next; n < rotated_next + 1000; ++n) {
      const fs::path rotated = options.folder / ("decisions-" + stamp + "-" + std::to_string(n) + ".jsonl");
      rotated_next = n + 1;
      if (fs::exists(rotated, ec)) continue;
      fs::rename(current, rotated, ec);
      if (ec) log_message(LogLevel::warn, kComponent, "cannot rotate {}: {}", current.string(), ec.message());
      break;
    }
    prune();
    if (auto opened = open_current(); !opened) {
      log_message(LogLevel::error, kComponent, "decisions are not written: {}", opened.error().message);
    }
    file_bytes = 0;
    file_started_us = wall_now_us();
  }

  // Deletes the oldest rotated files beyond max_files - 1, except those
  // the fleet has not shipped yet (options.unshipped).
  void prune() {
    std::vector<fs::path> files = decision_files_newest_first(options.folder);
    std::erase_if(files, [](const fs::path& file) { return file.filename() == kCurrentName; });
    const std::size_t keep = options.max_files > 0 ? options.max_files - 1 : 0;  // the current file is counted
    std::size_t kept = 0;
    std::error_code ec;
    for (std::size_t i = keep; i < files.size(); ++i) {
      if (options.unshipped && options.unshipped(files[i])) {
        ++kept;
        continue;
      }
      fs::remove(files[i], ec);
    }
    if (kept > 0) {
      log_message(LogLevel::warn, kComponent,
                  "{} decision files are kept past the {} allowed: the state database has not taken them yet", kept,
                  options.max_files);
    }
  }

  // One write() of whole lines; `lines` of them in `out`.
  void write_out(std::size_t lines) {
    if (out.empty()) return;
    std::string_view rest = out;
    bool ok = fd >= 0;
    while (ok && !rest.empty()) {
      const ssize_t n = ::write(fd, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        log_message(LogLevel::error, kComponent, "cannot write {}: {}", current_decisions_file(options.folder).string(),
                    errno_text(errno));
        ok = false;
        break;
      }
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
    file_bytes += out.size() - rest.size();
    if (ok) {
      written.fetch_add(lines, std::memory_order_relaxed);
      if (options.written) options.written();
    } else {
      lost.fetch_add(lines, std::memory_order_relaxed);
    }
    out.clear();
  }

  void drain() {
    batch.clear();
    for (std::size_t i = 0; i < shards.size(); ++i) {
      Shard& shard = shards[i];
      {
        const std::lock_guard guard(shard.lock);
        if (shard.records.empty()) continue;
        shard.records.swap(taken[i]);
        shard.last_snapshot = nullptr;
      }
      for (DecisionRecord& record : taken[i]) batch.push_back(&record);
    }
    if (batch.empty()) return;
    std::stable_sort(batch.begin(), batch.end(),
                     [](const DecisionRecord* a, const DecisionRecord* b) { return a->finished < b->finished; });
    const std::int64_t now_us = wall_now_us();
    const IntervalClock::Ticks now_ticks = IntervalClock::now();
    if (options.max_age.count() > 0 && file_bytes > 0 &&
        now_us - file_started_us >= std::chrono::duration_cast<std::chrono::microseconds>(options.max_age).count()) {
      rotate();
    }
    std::size_t lines = 0;
    for (const DecisionRecord* record : batch) {
      const auto ago = std::chrono::duration_cast<std::chrono::microseconds>(
                           IntervalClock::elapsed(std::min(record->finished, now_ticks), now_ticks))
                           .count();
      const std::string line = decision_line(
          *record,
          id_prefix + std::to_string(record->id != 0 ? record->id : next_id.fetch_add(1, std::memory_order_relaxed)),
          now_us - ago);
      if (file_bytes + out.size() + line.size() + 1 > options.max_file_bytes && file_bytes + out.size() > 0) {
        write_out(lines);
        lines = 0;
        rotate();
      }
      out += line;
      out += '\n';
      ++lines;
      // A long batch goes out in pieces of whole lines: the buffer stays
      // small and warm instead of growing (and faulting in) for all of it.
      if (out.size() >= kWriteChunk) {
        write_out(lines);
        lines = 0;
      }
    }
    write_out(lines);
    batch.clear();
    for (auto& records : taken) records.clear();  // keeps their capacity
  }

  void report_drops() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_report < options.drop_report_every) return;
    last_report = now;
    const std::uint64_t total = dropped_total();
    if (total == dropped_reported) return;
    log_message(LogLevel::warn, kComponent,
                "{} decisions dropped since the last report (the buffer was full or the file could not be written); "
                "{} since start",
                total - dropped_reported, total);
    dropped_reported = total;
  }

  void run() {
    // The signals come first: on a busy machine the writer falls behind and
    // drops (counted) rather than take a core from the event loops.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
    for (;;) {
      std::uint64_t target = 0;
      bool stopping = false;
      {
        std::unique_lock lock(mutex);
        wanted.wait_for(lock, options.interval, [&] { return stop || wake || flush_requested != flush_done; });
        if (held && !stop) {
          parked = true;
          flushed.notify_all();
          wanted.wait(lock, [&] { return stop || !held; });
          parked = false;
        }
        wake = false;
        target = flush_requested;
        stopping = stop;
      }
      drain();
      report_drops();
      {
        const std::lock_guard guard(mutex);
        flush_done = target;
      }
      flushed.notify_all();
      if (stopping) break;
    }
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

Result<std::unique_ptr<DecisionLog>> DecisionLog::open(DecisionLogOptions options) {
  if (options.buffer == 0) options.buffer = 1;
  if (options.sample_passed == 0) options.sample_passed = 1;
  if (options.max_files == 0) options.max_files = 1;
  std::error_code ec;
  fs::create_directories(options.folder, ec);
  if (ec || !fs::is_directory(options.folder, ec)) {
    return fail(ErrorCode::io_error, "cannot create the decisions folder " + options.folder.string() +
                                         (ec ? ": " + ec.message() : std::string()));
  }
  ::chmod(options.folder.c_str(), 0700);
  auto state = std::make_unique<State>(std::move(options));
  if (auto opened = state->open_current(); !opened) return fail(opened.error().code, opened.error().message);
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "%08llx-",
                static_cast<unsigned long long>(static_cast<std::uint32_t>(wall_now_us() / 1'000'000)));
  state->id_prefix = prefix;
  State* raw = state.get();
  state->writer = std::thread([raw] { raw->run(); });
  return std::unique_ptr<DecisionLog>(new DecisionLog(std::move(state)));
}

DecisionLog::DecisionLog(std::unique_ptr<State> state) : state_(std::move(state)) {}

DecisionLog::~DecisionLog() {
  {
    const std::lock_guard guard(state_->mutex);
    state_->stop = true;
    state_->held = false;
  }
  state_->wanted.notify_one();
  if (state_->writer.joinable()) state_->writer.join();
}

std::string DecisionLog::record(DecisionStage stage, const std::shared_ptr<const Snapshot>& snapshot,
                                const Value& action, const Value& signal, const Verification& verification,
                                const GateTimes& times, IntervalClock::Ticks started, IntervalClock::Ticks finished,
                                const DecisionContext& context) {
  // A pass is sampled when asked, unless a shadow candidate disagreed with it.
  const bool disagreed = context.shadow != nullptr && !context.shadow->empty();
  if (verification.outcome == VerifyOutcome::passed && state_->options.sample_passed > 1 && !disagreed) {
    thread_local std::uint64_t passes = 0;
    if (++passes % state_->options.sample_passed != 0) return {};
  }
  const std::uint64_t id =
      verification.trace.all_plain_passes() ? 0 : state_->next_id.fetch_add(1, std::memory_order_relaxed);
  auto fill = [&](DecisionRecord& r) {
    r.stage = stage;
    r.outcome = verification.outcome;
    r.action = action;
    r.signal = signal;
    r.reason = verification.reason;
    r.trace = verification.trace;
    r.granted_by.assign(context.granted_by);
    r.provider.assign(context.provider);
    r.model.assign(context.model);
    if (!context.approval_token.empty() && verification.outcome == VerifyOutcome::approval_required) {
      r.approval_token_sha256 = sha256_hex(context.approval_token);
    }
    r.started = started;
    r.finished = finished;
    if (context.shadow != nullptr && !context.shadow->empty()) r.shadow = *context.shadow;
    r.id = id;
    r.marks = std::min(times.count, GateTimes::kMax + 1);
    std::copy_n(times.at, r.marks, r.gate_marks);
  };
  if (verification.outcome == VerifyOutcome::approval_required && context.pending != nullptr) {
    auto record = std::make_unique<DecisionRecord>();
    fill(*record);
    record->snapshot = snapshot;
    *context.pending = PendingDecision();
    context.pending->log_ = this;
    context.pending->record_ = std::move(record);
    return id == 0 ? std::string() : state_->id_prefix + std::to_string(id);
  }
  state_->put([&](DecisionRecord& r, const Snapshot*& last_snapshot) {
    fill(r);
    if (snapshot.get() != last_snapshot) {
      r.snapshot = snapshot;
      last_snapshot = snapshot.get();
    }
  });
  return id == 0 ? std::string() : state_->id_prefix + std::to_string(id);
}

void DecisionLog::push(DecisionRecord&& record) {
  state_->put([&](DecisionRecord& r, const Snapshot*& last_snapshot) {
    r = std::move(record);
    if (r.snapshot == nullptr) return;  // cannot happen: a record built alone holds its snapshot
    last_snapshot = r.snapshot.get();
  });
}

void DecisionLog::flush() {
  std::unique_lock lock(state_->mutex);
  const std::uint64_t ticket = ++state_->flush_requested;
  state_->wanted.notify_one();
  state_->flushed.wait(lock, [&] { return state_->flush_done >= ticket || state_->stop; });
}

std::uint64_t DecisionLog::dropped() const noexcept { return state_->dropped_total(); }
std::uint64_t DecisionLog::written() const noexcept { return state_->written.load(std::memory_order_relaxed); }
const fs::path& DecisionLog::folder() const noexcept { return state_->options.folder; }

bool DecisionLog::time_next_gates() const noexcept {
  const std::uint32_t every = state_->options.time_gates_every;
  if (every <= 1) return true;
  thread_local std::uint32_t verifications = 0;
  return ++verifications % every == 0;
}

void DecisionLog::hold_writer_for_test(bool held) {
  std::unique_lock lock(state_->mutex);
  state_->held = held;
  state_->wake = true;
  state_->wanted.notify_one();
  if (held) state_->flushed.wait(lock, [&] { return state_->parked; });
}

}  // namespace passepartout

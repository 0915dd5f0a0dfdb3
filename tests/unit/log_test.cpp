// Logging: the line format on standard error (text and JSON), batching on a
// thread (held lines written together, warnings at once, written on a fatal
// signal), and the recent lines the prompt shows. Standard error is redirected to a file for each test.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/crash_context.hpp"
#include "base/executor.hpp"
#include "base/log.hpp"
#include "base/log_fields.hpp"
#include "skills/crash_record.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;

namespace {

// Points standard error at a file and logs at `level` in `format` until
// destroyed, then puts both back as the test main set them.
class StderrToFile {
 public:
  StderrToFile(LogLevel level, LogFormat format) : file_(dir_.path() / "stderr.txt") {
    saved_ = ::dup(STDERR_FILENO);
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::dup2(fd, STDERR_FILENO) == STDERR_FILENO);
    ::close(fd);
    configure_logging(level, format);
  }
  ~StderrToFile() {
    set_log_batching(false);
    configure_logging(LogLevel::warn);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
  }
  StderrToFile(const StderrToFile&) = delete;
  StderrToFile& operator=(const StderrToFile&) = delete;

  std::string text() const {
    std::ifstream in(file_, std::ios::binary);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  }

 private:
  testing::TempDir dir_;
  std::filesystem::path file_;
  int saved_ = -1;
};

std::size_t count_lines(const std::string& text) {
  std::size_t lines = 0;
  for (const char c : text) lines += c == '\n' ? 1U : 0U;
  return lines;
}

// An argument that counts how often it is formatted.
struct CountedArgument {};
int formatted_arguments = 0;

}  // namespace

template <>
struct fmt::formatter<CountedArgument> {
  constexpr auto parse(fmt::format_parse_context& context) { return context.begin(); }
  template <typename Context>
  auto format(const CountedArgument&, Context& context) const {
    ++formatted_arguments;
    return fmt::format_to(context.out(), "counted");
  }
};

TEST_CASE("a text log line carries time, level, component and message", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  log_message(LogLevel::info, "loader", "loaded skill 'policy'");
  log_message(LogLevel::debug, "loader", "not shown at info");
  const std::string text = err.text();
  CHECK(count_lines(text) == 1);
  // 2026-11-22T10:53:28.123 info loader: loaded skill 'policy'
  REQUIRE(text.size() > 24);
  CHECK(text[4] == '-');
  CHECK(text[10] == 'T');
  CHECK(text[19] == '.');
  CHECK(text.substr(23) == " info loader: loaded skill 'policy'\n");
}

TEST_CASE("a log line made of a format and arguments reads as the string it formats", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  LogCapture capture;
  const std::string skill = "policy";
  log_message(LogLevel::info, "loader", "loaded skill '{}' (priority {})", skill, 3);
  log_message(LogLevel::info, "loader", "{not a format: a plain message is not formatted}");
  const std::string text = err.text();
  CHECK(count_lines(text) == 2);
  CHECK(text.find(" info loader: loaded skill 'policy' (priority 3)\n") != std::string::npos);
  CHECK(text.find(" info loader: {not a format: a plain message is not formatted}\n") != std::string::npos);
  CHECK(capture.contains("loader: loaded skill 'policy' (priority 3)"));
  CHECK(recent_log_lines(2).front() == "loader: loaded skill 'policy' (priority 3)");
}

TEST_CASE("a debug line made of a format is formatted only when something takes it", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  formatted_arguments = 0;
  CHECK_FALSE(is_logged(LogLevel::debug));
  CHECK(is_logged(LogLevel::info));
  log_message(LogLevel::debug, "loader", "keeping {} loaded", CountedArgument{});
  CHECK(formatted_arguments == 0);
  {
    LogCapture capture;
    CHECK(is_logged(LogLevel::debug));
    log_message(LogLevel::debug, "loader", "keeping {} loaded", CountedArgument{});
    CHECK(formatted_arguments == 1);
    CHECK(capture.contains("loader: keeping counted loaded"));
  }
  CHECK(err.text().empty());
}

TEST_CASE("a text log line escapes control characters, so a client cannot forge a line", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  // A keyword a client sent: a newline and a line that looks like the daemon's.
  const std::string forged =
      std::string("EVENT\n2026-11-26T10:00:00.000 info daemon: all is well") + '\0' + "\x1b[31mred\ttab\r\x7f";
  log_message(LogLevel::info, "pipeline", "GATE [Perceive]: " + forged);
  const std::string text = err.text();
  CHECK(count_lines(text) == 1);
  CHECK(text.substr(23) ==
        " info pipeline: GATE [Perceive]: EVENT\\n2026-11-26T10:00:00.000 info daemon: all is well\\x00"
        "\\x1b[31mred\\ttab\\r\\x7f\n");
}

namespace {

// The local time as the pattern "%Y-%m-%dT%H:%M:%S.%e" writes it.
std::string local_time_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char text[64];
  REQUIRE(std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S.", &local) == 20);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  const std::string digits = std::to_string(1000 + millis);  // "1007": three digits after the first
  return text + digits.substr(1);
}

}  // namespace

TEST_CASE("a text log line's time is the local time to the millisecond, at every line", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  std::vector<std::pair<std::string, std::string>> windows;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string before = local_time_now();
    log_message(LogLevel::warn, "clock", "tick " + std::to_string(i));
    windows.emplace_back(before, local_time_now());
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // the lines' times must differ: not cached
  }
  std::istringstream lines(err.text());
  std::string line;
  for (std::size_t i = 0; i < 3; ++i) {
    REQUIRE(std::getline(lines, line));
    CHECK(line.substr(23) == " warning clock: tick " + std::to_string(i));
    const std::string stamp = line.substr(0, 23);
    CHECK(windows[i].first <= stamp);  // same fixed-width format: text order is time order
    CHECK(stamp <= windows[i].second);
  }
}

TEST_CASE("a JSON log line is one object with escaped members", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::json);
  log_message(LogLevel::warn, "gate", "blocked \"rm -rf /\"\n");
  const std::string text = err.text();
  CHECK(count_lines(text) == 1);
  CHECK(text.rfind("{\"time\":\"", 0) == 0);
  CHECK(text.find("\"level\":\"warning\",\"component\":\"gate\",\"message\":\"blocked \\\"rm -rf /\\\"\\n\"}\n") !=
        std::string::npos);
}

TEST_CASE("a JSON log line carries its fields as members of their own", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::json);
  const std::string skill = "shell-guard";
  log_fields(
      LogLevel::info, "verifier",
      {{"skill", skill}, {"version", "1.2.0"}, {"verdict", "block"}, {"session", "s \"1\""}, {"decision_id", 42}},
      "gate '{}' blocked: {}", skill, "rm");
  const std::string text = err.text();
  REQUIRE(count_lines(text) == 1);
  const auto line = nlohmann::json::parse(text);
  CHECK(line.at("component") == "verifier");
  CHECK(line.at("message") == "gate 'shell-guard' blocked: rm");
  CHECK(line.at("skill") == "shell-guard");
  CHECK(line.at("version") == "1.2.0");
  CHECK(line.at("verdict") == "block");
  CHECK(line.at("session") == "s \"1\"");
  CHECK(line.at("decision_id") == 42);
}

TEST_CASE("a text log line shows its fields as key=value after the message", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  LogCapture capture;
  log_fields(LogLevel::warn, "act", {{"tool", "read-file"}, {"session", "conn 7"}, {"skill", ""}, {"id", 3}},
             "tool '{}' failed", "read-file");
  const std::string text = err.text();
  CHECK(text.find(" act: tool 'read-file' failed tool=read-file session=\"conn 7\" skill=\"\" id=3\n") !=
        std::string::npos);
  CHECK(capture.contains("act: tool 'read-file' failed tool=read-file session=\"conn 7\""));
}

TEST_CASE("a line with fields below the level builds nothing", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::json);
  formatted_arguments = 0;
  log_fields(LogLevel::debug, "act", {{"skill", "x"}}, "keeping {} loaded", CountedArgument{});
  CHECK(formatted_arguments == 0);
  CHECK(err.text().empty());
}

TEST_CASE("a batching thread holds its lines until it flushes them", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  set_log_batching(true);
  log_message(LogLevel::info, "pipeline", "first");
  log_message(LogLevel::info, "pipeline", "second");
  CHECK(err.text().empty());
  CHECK(recent_log_lines(2) == std::vector<std::string>{"pipeline: first", "pipeline: second"});

  // Another thread does not batch: its line goes at once.
  std::thread([] { log_message(LogLevel::info, "control", "at once"); }).join();
  CHECK(err.text().find("control: at once") != std::string::npos);
  CHECK(err.text().find("pipeline: first") == std::string::npos);

  flush_log_batch();
  const std::string text = err.text();
  CHECK(count_lines(text) == 3);
  const auto first = text.find("pipeline: first");
  const auto second = text.find("pipeline: second");
  REQUIRE(first != std::string::npos);
  REQUIRE(second != std::string::npos);
  CHECK(first < second);
}

TEST_CASE("the recent lines are the newest hundred at info and above, oldest first", "[log]") {
  StderrToFile err(LogLevel::debug, LogFormat::text);
  log_message(LogLevel::info, "ring", std::string(5000, 'x'));  // a long line, whose slot is reused later
  for (int i = 0; i < 150; ++i) {
    log_message(LogLevel::info, "ring", "line " + std::to_string(i));
    log_message(LogLevel::debug, "ring", "debug " + std::to_string(i));  // never in the prompt
  }
  const std::vector<std::string> newest = recent_log_lines(3);
  CHECK(newest == std::vector<std::string>{"ring: line 147", "ring: line 148", "ring: line 149"});
  const std::vector<std::string> all = recent_log_lines(1000);
  REQUIRE(all.size() == 100);
  CHECK(all.front() == "ring: line 50");
  CHECK(all.back() == "ring: line 149");

  std::string joined = "LOGS:\n";
  append_recent_log_lines(joined, 3);
  CHECK(joined == "LOGS:\nring: line 147\nring: line 148\nring: line 149");
  std::string none;
  append_recent_log_lines(none, 0);
  CHECK(none.empty());
  CHECK(recent_log_lines(0).empty());
}

TEST_CASE("lines logged in a scope go to that scope's lines, not the process-wide ones", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  RecentLines session_a(20);
  RecentLines session_b(20);
  log_message(LogLevel::info, "daemon", "booted");
  {
    const LogScope scope(&session_a);
    log_message(LogLevel::info, "pipeline", "a: token 1234");
    {
      const LogScope inner(&session_b);  // scopes nest
      log_message(LogLevel::info, "pipeline", "b: hello");
    }
    log_message(LogLevel::info, "pipeline", "a: again");   // the outer scope is back
    log_message(LogLevel::debug, "pipeline", "a: debug");  // never in a prompt
  }
  log_message(LogLevel::info, "daemon", "swapped");  // after the scope: process-wide again

  // The newest process-wide lines (older ones are other tests' when they share the process).
  const std::vector<std::string> process_wide = recent_log_lines(10);
  REQUIRE(process_wide.size() >= 2);
  CHECK(std::vector<std::string>(process_wide.end() - 2, process_wide.end()) ==
        std::vector<std::string>{"daemon: booted", "daemon: swapped"});
  for (const std::string& line : process_wide) CHECK(line.rfind("pipeline: ", 0) != 0);
  CHECK(session_a.size() == 2);
  CHECK(session_b.size() == 1);

  std::string a;
  append_recent_log_lines(a, 4, &session_a);
  CHECK(a == "daemon: booted\npipeline: a: token 1234\npipeline: a: again\ndaemon: swapped");
  std::string b;
  append_recent_log_lines(b, 3, &session_b);
  CHECK(b == "daemon: booted\npipeline: b: hello\ndaemon: swapped");  // nothing of session a
  std::string newest_two;
  append_recent_log_lines(newest_two, 2, &session_a);
  CHECK(newest_two == "pipeline: a: again\ndaemon: swapped");
  // Everything is still written to standard error.
  CHECK(err.text().find("a: token 1234") != std::string::npos);
}

TEST_CASE("a scope keeps its newest lines up to its capacity", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  RecentLines session(3);
  const LogScope scope(&session);
  for (int i = 0; i < 10; ++i) log_message(LogLevel::info, "s", "line " + std::to_string(i));
  CHECK(session.size() == 3);
  std::string out;
  append_recent_log_lines(out, 20, &session);
  // Older process-wide lines may come first when other tests share the process.
  const std::string newest = "s: line 7\ns: line 8\ns: line 9";
  REQUIRE(out.size() >= newest.size());
  CHECK(out.substr(out.size() - newest.size()) == newest);
  CHECK(out.find("s: line 6") == std::string::npos);

  RecentLines large(1'000'000);  // kept to the process-wide ring's size
  const LogScope into_large(&large);
  for (int i = 0; i < 150; ++i) log_message(LogLevel::info, "s", "line " + std::to_string(i));
  CHECK(large.size() == kRecentLogLines);
}

TEST_CASE("a scope's newest lines stay one text, oldest first, as old ones are dropped", "[log]") {
  RecentLines lines(5);
  std::vector<std::string> added;
  for (std::size_t i = 0; i < 300; ++i) {
    // Lengths vary, and a burst of long lines comes and goes.
    const std::string message = "line " + std::to_string(i) + std::string(i >= 100 && i < 110 ? 20'000 : i % 7, '.');
    lines.add("s", message);
    added.push_back("s: " + message);
    REQUIRE(lines.size() == std::min<std::size_t>(added.size(), 5));
    for (std::size_t count = 1; count <= lines.size(); ++count) {
      std::string expected;
      for (std::size_t k = added.size() - count; k < added.size(); ++k) {
        expected += added[k];
        if (k + 1 != added.size()) expected += '\n';
      }
      REQUIRE(lines.newest_text(count) == expected);
    }
    for (std::size_t age = 0; age < lines.size(); ++age)
      REQUIRE(lines.newest(age).text == added[added.size() - 1 - age]);
  }
  CHECK(lines.newest_text(0).empty());
}

TEST_CASE("a prompt's LOGS are the session's own text until a process-wide line comes between", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  RecentLines session(3);
  log_message(LogLevel::info, "daemon", "before");
  {
    const LogScope scope(&session);
    for (int i = 0; i < 4; ++i) log_message(LogLevel::info, "s", "line " + std::to_string(i));
  }
  std::string scratch = "left over";
  const std::string_view own = recent_log_text(3, &session, scratch);
  CHECK(own == "s: line 1\ns: line 2\ns: line 3");
  CHECK(scratch.empty());  // nothing was built: the view is of the session's lines
  std::string appended;
  append_recent_log_lines(appended, 3, &session);
  CHECK(appended == own);

  log_message(LogLevel::info, "daemon", "after");  // newer than the session's lines
  const std::string_view merged = recent_log_text(3, &session, scratch);
  CHECK(merged == "s: line 2\ns: line 3\ndaemon: after");
  CHECK(merged.data() == scratch.data());
  std::string more;
  append_recent_log_lines(more, 5, &session);
  CHECK(more == "daemon: before\ns: line 1\ns: line 2\ns: line 3\ndaemon: after");
}

TEST_CASE("a thread sees process-wide lines another thread logged after its last read", "[log][concurrency]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  RecentLines session(20);
  {
    const LogScope scope(&session);
    log_message(LogLevel::info, "s", "mine");
  }
  std::string before;
  append_recent_log_lines(before, 20, &session);
  std::thread([] { log_message(LogLevel::info, "other", "new line"); }).join();
  std::string after;
  append_recent_log_lines(after, 20, &session);
  CHECK(before.find("other: new line") == std::string::npos);
  CHECK(after.size() >= std::string("s: mine\nother: new line").size());
  CHECK(after.substr(after.size() - std::string("s: mine\nother: new line").size()) == "s: mine\nother: new line");
}

TEST_CASE("a warning writes the held lines and itself at once", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  set_log_batching(true);
  log_message(LogLevel::info, "pipeline", "held");
  log_message(LogLevel::warn, "pipeline", "something is off");
  const std::string text = err.text();
  CHECK(count_lines(text) == 2);
  CHECK(text.find("pipeline: held") < text.find("pipeline: something is off"));
  log_message(LogLevel::info, "pipeline", "held again");
  set_log_batching(false);  // writes what is held
  CHECK(err.text().find("pipeline: held again") != std::string::npos);
}

namespace {

// Waits (up to 10 s) until standard error holds `needle`.
bool written_soon(const StderrToFile& err, std::string_view needle) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (err.text().find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

TEST_CASE("an event loop writes its held lines before it sleeps, and while it polls idle",
          "[log][executor][concurrency]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  {
    EventLoops sleeper(1);  // no idle polling: it sleeps once the task ran
    sleeper.post([] { log_message(LogLevel::info, "pipeline", "before sleeping"); });
    CHECK(written_soon(err, "pipeline: before sleeping"));
    // A loop that polls for a minute after its work would hold the line that
    // long if it wrote only before sleeping: it writes after a millisecond.
    EventLoops poller(1, std::chrono::minutes(1));
    poller.post([] { log_message(LogLevel::info, "pipeline", "while polling"); });
    CHECK(written_soon(err, "pipeline: while polling"));
    poller.stop();
    sleeper.stop();
  }
  {
    // Kept busy with slow work (each task 2 ms, each posting the next), a
    // polling loop still writes about a millisecond after its last write,
    // not only after 64 rounds of 16 tasks: the line shows within the first
    // tasks of the work (counted, so the test does not depend on timing).
    EventLoops busy(1, std::chrono::minutes(1));
    std::atomic<bool> stop{false};
    std::atomic<int> tasks{0};
    std::function<void()> work = [&] {
      if (stop.load()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      tasks.fetch_add(1);
      busy.post(work);
    };
    busy.post([&] {
      log_message(LogLevel::info, "pipeline", "while busy");
      work();
    });
    const bool seen = written_soon(err, "pipeline: while busy");
    const int tasks_before = tasks.load();
    stop.store(true);
    CHECK(seen);
    CHECK(tasks_before < 64 * 16 / 2);
    busy.stop();
  }
}

TEST_CASE("a batching thread writes once 64 KiB are held", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::text);
  set_log_batching(true);
  const std::string message(1000, 'x');
  for (int i = 0; i < 70; ++i) log_message(LogLevel::info, "bulk", message);
  const std::size_t written = count_lines(err.text());
  CHECK(written >= 60);  // everything up to the 64 KiB mark
  CHECK(written < 70);   // and the rest still held
  flush_log_batch();
  CHECK(count_lines(err.text()) == 70);
}

namespace {

// Recursion that ends only in a stack overflow (the limit is out of reach; it
// is there so that the compiler sees an end).
volatile int recursion_limit = 1 << 30;
[[gnu::noinline]] int recurse(int depth) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(depth);
  if (depth >= recursion_limit) return frame[0];
  return recurse(depth + 1) + frame[0];
}

// In a forked child with standard error in `file` and the fatal signals at
// their defaults (the test runner's handlers would report the crash as its
// own): two batching threads hold a line each, then the calling one crashes
// by `crash` ("abort", "fault" or "stack overflow"). Returns the child's wait status.
int crash_with_held_lines(const std::filesystem::path& file, const std::string& crash,
                          LogFormat format = LogFormat::text) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    for (const int number : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(number, SIG_DFL);
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::dup2(fd, STDERR_FILENO) != STDERR_FILENO) ::_exit(3);
    configure_logging(LogLevel::info, format);
    write_held_logs_on_fatal_signals();

    int ready[2];
    if (::pipe(ready) != 0) ::_exit(3);
    std::thread other([&] {
      set_log_batching(true);
      log_message(LogLevel::info, "other", "held by another thread");
      const char byte = 'x';
      if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
      for (;;) ::pause();
    });
    other.detach();
    char byte = 0;
    if (::read(ready[0], &byte, 1) != 1) ::_exit(3);

    set_log_batching(true);
    log_message(LogLevel::info, "crashing", "held by the crashing thread");
    if (crash == "abort") std::abort();
    if (crash == "stack overflow") ::_exit(recurse(0));
    // A real fault: a read from a page that allows no access.
    void* page = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) ::_exit(3);
    const volatile char* unreadable = static_cast<const volatile char*>(page);
    static_cast<void>(*unreadable);
    ::_exit(4);  // not reached
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  return status;
}

}  // namespace

TEST_CASE("a fatal signal writes what the batching threads hold, then the process dies of it", "[log]") {
  testing::TempDir dir;
  const std::filesystem::path file = dir.path() / "stderr.txt";
  const std::string crash = GENERATE(as<std::string>{}, "abort", "fault", "stack overflow");
  const int expected_signal = crash == "abort" ? SIGABRT : SIGSEGV;

  const int status = crash_with_held_lines(file, crash);
  std::ifstream in(file, std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  INFO(crash << ": status " << status << "\n" << text);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == expected_signal);
  const auto held_here = text.find("crashing: held by the crashing thread");
  const auto held_there = text.find("other: held by another thread");
  const auto crash_line =
      text.find(std::string(" error crash: ") + (crash == "abort" ? "SIGABRT" : "SIGSEGV") + ": fatal signal");
  CHECK(held_here != std::string::npos);
  CHECK(held_there != std::string::npos);
  REQUIRE(crash_line != std::string::npos);
  CHECK(held_here < crash_line);
  CHECK(held_there < crash_line);
  REQUIRE(crash_line >= 23);
  CHECK(text[crash_line - 13] == 'T');  // 2026-11-22T12:00:00.000 error crash: ..., as the other lines
  CHECK(text[crash_line - 4] == '.');
}

namespace {

std::string whole_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

// In a forked child with standard error in `err` and the crash record in
// `record`: `how` ("fault", "exit", "killed": SIGSEGV sent by this process,
// or "fault outside") while a hook of skill crash-gate 1.2.3 runs (or,
// "fault outside", after it returned). Returns the child's wait status.
int crash_in_hook(const std::filesystem::path& err, const std::filesystem::path& record, const std::string& how,
                  LogFormat format = LogFormat::text) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(ready[0]);
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    for (const int number : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(number, SIG_DFL);
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::dup2(fd, STDERR_FILENO) != STDERR_FILENO) ::_exit(3);
    configure_logging(LogLevel::info, format);
    write_held_logs_on_fatal_signals();
    log_exit_in_skill_hooks();
    if (!record_crashes_in(record)) ::_exit(5);
    set_crash_note("test: what the process had\n");
    // Texts that outlive exit(): a static std::string registered after the
    // exit handler would be destroyed before the handler reads it.
    static constexpr char kDigest[] = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
    static const RunningSkill skill{"crash-gate", "1.2.3", kDigest};
    void* page = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) ::_exit(3);
    const volatile char* unreadable = static_cast<const volatile char*>(page);
    if (how == "fault outside") {
      { const HookScope hook(skill, "gate"); }
      static_cast<void>(*unreadable);
    }
    const HookScope hook(skill, "gate");
    if (how == "killed") {  // the parent sends SIGSEGV while the hook runs
      const char byte = 'x';
      if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
      for (;;) ::pause();
    }
    if (how == "exit") std::exit(7);
    static_cast<void>(*unreadable);
    ::_exit(4);  // not reached
  }
  ::close(ready[1]);
  if (how == "killed") {
    char byte = 0;
    REQUIRE(::read(ready[0], &byte, 1) == 1);  // the child runs the hook now
    REQUIRE(::kill(child, SIGSEGV) == 0);
  }
  ::close(ready[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  return status;
}

}  // namespace

TEST_CASE("a fault in a skill's hook names the skill, version and hook, and is recorded for the next start",
          "[log][crash]") {
  testing::TempDir dir;
  const std::filesystem::path err = dir.path() / "stderr.txt";
  const std::filesystem::path record = dir.path() / "last-crash";
  const int status = crash_in_hook(err, record, "fault");
  const std::string text = whole_file(err);
  INFO(text);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
  const auto note = text.find("test: what the process had\n");
  const auto crash =
      text.find(" error crash: SIGSEGV: fatal signal in hook gate of skill 'crash-gate' 1.2.3 (code in ");
  CHECK(note != std::string::npos);
  REQUIRE(crash != std::string::npos);
  CHECK(note < crash);
  CHECK(text.find("; the process stops\n", crash) != std::string::npos);

  auto parsed = parse_crash_record(whole_file(record));
  INFO(whole_file(record));
  REQUIRE(parsed.has_value());
  CHECK(parsed->cause == "SIGSEGV");
  CHECK(parsed->skill == "crash-gate");
  CHECK(parsed->version == "1.2.3");
  CHECK(parsed->hook == "gate");
  CHECK(parsed->sha256 == std::string(64, 'c'));
  const auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  CHECK(parsed->at_unix_ms <= now_ms);
  CHECK(parsed->at_unix_ms > now_ms - 60'000);
  CHECK((std::filesystem::status(record).permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
}

TEST_CASE("a fault after the hook returned is not blamed on the skill", "[log][crash]") {
  testing::TempDir dir;
  const std::filesystem::path err = dir.path() / "stderr.txt";
  const std::filesystem::path record = dir.path() / "last-crash";
  const int status = crash_in_hook(err, record, "fault outside");
  const std::string text = whole_file(err);
  INFO(text);
  REQUIRE(WIFSIGNALED(status));
  CHECK(text.find(" error crash: SIGSEGV: fatal signal (code in ") != std::string::npos);
  CHECK(text.find("crash-gate") == std::string::npos);
  CHECK(whole_file(record).empty());
}

TEST_CASE("a fatal signal sent by another process is not blamed on the hook that runs", "[log][crash]") {
  testing::TempDir dir;
  const std::filesystem::path err = dir.path() / "stderr.txt";
  const std::filesystem::path record = dir.path() / "last-crash";
  const int status = crash_in_hook(err, record, "killed");
  const std::string text = whole_file(err);
  INFO(text);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
  CHECK(text.find(" error crash: SIGSEGV: fatal signal") != std::string::npos);
  CHECK(text.find("crash-gate") == std::string::npos);
  CHECK(whole_file(record).empty());
}

TEST_CASE("exit() in a skill's hook is logged and recorded on the way out", "[log][crash]") {
  testing::TempDir dir;
  const std::filesystem::path err = dir.path() / "stderr.txt";
  const std::filesystem::path record = dir.path() / "last-crash";
  const int status = crash_in_hook(err, record, "exit");
  const std::string text = whole_file(err);
  INFO(text);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
  CHECK(text.find(" error crash: exit: the skill called exit() in hook gate of skill 'crash-gate' 1.2.3; the "
                  "process stops\n") != std::string::npos);
  auto parsed = parse_crash_record(whole_file(record));
  REQUIRE(parsed.has_value());
  CHECK(parsed->cause == "exit");
}

TEST_CASE("in JSON lines the crash line names the skill in fields of its own", "[log][crash]") {
  testing::TempDir dir;
  const std::filesystem::path err = dir.path() / "stderr.txt";
  const int status = crash_in_hook(err, dir.path() / "last-crash", "fault", LogFormat::json);
  REQUIRE(WIFSIGNALED(status));
  std::ifstream in(err, std::ios::binary);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  INFO(last);
  const auto parsed = nlohmann::json::parse(last);
  CHECK(parsed["skill"] == "crash-gate");
  CHECK(parsed["version"] == "1.2.3");
  CHECK(parsed["hook"] == "gate");
  CHECK(std::string(parsed["message"]).starts_with("SIGSEGV: fatal signal in hook gate of skill 'crash-gate' 1.2.3"));
}

TEST_CASE("in JSON lines the fatal-signal line is a JSON object too", "[log]") {
  testing::TempDir dir;
  const std::filesystem::path file = dir.path() / "stderr.txt";
  const int status = crash_with_held_lines(file, "abort", LogFormat::json);
  std::ifstream in(file, std::ios::binary);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(lines.size() == 3);
  INFO(lines[2]);
  CHECK(lines[2].rfind("{\"time\":\"", 0) == 0);
  // The message names the library of the code that raised it (the C library's abort).
  CHECK(lines[2].find("\",\"level\":\"error\",\"component\":\"crash\",\"message\":\"SIGABRT: fatal signal (code in ") !=
        std::string::npos);
  CHECK(lines[2].ends_with("; the process stops\"}"));
  CHECK((lines[2][32] == '+' || lines[2][32] == '-'));  // {"time":"2026-11-22T12:00:00.000+0000"
}

TEST_CASE("a pool thread's running hook is readable from another thread while the hook runs", "[log][crash]") {
  static const RunningSkill kSkill{"stuck-skill", "1.2.3", ""};
  ThreadPool pool(1);
  std::promise<void> entered;
  std::promise<void> leave;
  std::shared_future<void> left = leave.get_future().share();
  pool.post([&entered, left] {
    HookScope scope(kSkill, "gate");
    entered.set_value();
    left.wait();
  });
  REQUIRE(entered.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  std::vector<RunningHookOf> running = running_hooks();
  auto mine =
      std::find_if(running.begin(), running.end(), [](const RunningHookOf& r) { return r.running.skill == &kSkill; });
  REQUIRE(mine != running.end());
  CHECK(std::string_view(mine->role) == "a thread pool");
  CHECK(std::string_view(mine->running.hook) == "gate");
  leave.set_value();
  pool.stop();
  running = running_hooks();
  CHECK(
      std::none_of(running.begin(), running.end(), [](const RunningHookOf& r) { return r.running.skill == &kSkill; }));
}

TEST_CASE("a thread that did not publish its hook is not listed", "[log][crash]") {
  static const RunningSkill kSkill{"unlisted-skill", "1.0.0", ""};
  HookScope scope(kSkill, "prompt");  // the test's own thread: not a pool's
  const std::vector<RunningHookOf> running = running_hooks();
  CHECK(
      std::none_of(running.begin(), running.end(), [](const RunningHookOf& r) { return r.running.skill == &kSkill; }));
}

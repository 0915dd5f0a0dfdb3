// Logging: the line format on standard error (text and JSON), batching on a
// thread (held lines written together, warnings at once), and the recent
// lines the prompt shows. Standard error is redirected to a file for each test.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "log.hpp"
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

}  // namespace

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

TEST_CASE("a JSON log line is one object with escaped members", "[log]") {
  StderrToFile err(LogLevel::info, LogFormat::json);
  log_message(LogLevel::warn, "gate", "blocked \"rm -rf /\"\n");
  const std::string text = err.text();
  CHECK(count_lines(text) == 1);
  CHECK(text.rfind("{\"time\":\"", 0) == 0);
  CHECK(text.find("\"level\":\"warning\",\"component\":\"gate\",\"message\":\"blocked \\\"rm -rf /\\\"\\n\"}\n") !=
        std::string::npos);
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

// ActionRecord: what an actuator or tool ran is logged when it starts and
// ends, with credentials masked, and told to the user with its output.
#include <catch2/catch.hpp>

#include "base/log.hpp"
#include "pipeline/action_record.hpp"
#include "support/sexp.hpp"
#include "value/sexp_printer.hpp"

using namespace passepartout;

namespace {

using passepartout::testing::sexp;

// The line of `capture` that starts with `prefix` (after the component), or "".
std::string line_starting(const LogCapture& capture, std::string_view prefix) {
  for (const std::string& line : capture.lines()) {
    if (line.find(prefix) != std::string::npos) return line;
  }
  return {};
}

}  // namespace

TEST_CASE("a shell command is logged when it starts and ends, and shown with its output", "[pipeline]") {
  LogCapture logs;
  const ActionRecord record(
      "SHELL", sexp("(:TYPE :REQUEST :TARGET :SHELL :META (:SESSION-ID \"s1\") :PAYLOAD (:CMD \"ls -la\"))"));
  CHECK(record.what() == "ls -la");
  CHECK(logs.contains("act: ACT START [:SHELL] (session s1): ls -la"));
  const Value shown = record.finish(Value::string("a\nb\n"));
  const std::string end = line_starting(logs, "ACT END [:SHELL]");
  CHECK(end.find("(session s1): ok in ") != std::string::npos);
  CHECK(end.find(" ms: a b ") != std::string::npos);  // one line
  CHECK(shown.at("ACTION").is_keyword("MESSAGE"));
  CHECK(shown.at("TEXT").text() == "Ran ls -la on :SHELL:\na\nb\n");
  CHECK(shown.path({"ACTED", "TARGET"}).is_keyword("SHELL"));
  CHECK(shown.path({"ACTED", "WHAT"}).text() == "ls -la");
  CHECK(shown.path({"ACTED", "STATUS"}).is_keyword("OK"));
  CHECK(shown.path({"ACTED", "MS"}).as_float() >= 0.0);
}

TEST_CASE("a command without output, or failing, says so", "[pipeline]") {
  LogCapture logs;
  const Value shell = sexp("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"true\"))");
  CHECK(ActionRecord("SHELL", shell).finish(Value::string("")).at("TEXT").text() == "Ran true on :SHELL:\n(no output)");
  CHECK(logs.contains("ACT END [:SHELL] (session internal): ok in "));
  CHECK(line_starting(logs, "ACT END").find(", no output") != std::string::npos);

  const Value failed = ActionRecord("SHELL", shell).finish(Value::string("ERROR [1]: nope"));
  CHECK(failed.at("TEXT").text() == "Ran true on :SHELL (failed):\nERROR [1]: nope");
  CHECK(failed.path({"ACTED", "STATUS"}).is_keyword("ERROR"));

  const Value broken = ActionRecord("SHELL", shell).finish(fail(ErrorCode::failed, "cannot start the command"));
  CHECK(broken.at("TEXT").text() == "Ran true on :SHELL (failed):\ncannot start the command");
  CHECK(logs.contains("(session internal): failed in "));
}

TEST_CASE("a tool call is shown with its arguments, credentials are masked in the log only", "[pipeline]") {
  LogCapture logs;
  const ActionRecord record(
      "TOOL", sexp("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"Read-File\" :ARGS (:FILEPATH \"notes.txt\")))"));
  CHECK(record.what() == "read-file (:FILEPATH \"notes.txt\")");
  CHECK(logs.contains("ACT START [tool read-file] (session internal): read-file (:FILEPATH \"notes.txt\")"));

  const ActionRecord secret(
      "SHELL", sexp("(:TYPE :REQUEST :PAYLOAD (:CMD \"curl -H 'Authorization: Bearer abcdefghijklmnop' x\"))"));
  CHECK(logs.contains("ACT START [:SHELL] (session internal): curl -H 'Authorization: [MASKED]' x"));
  const Value shown = secret.finish(Value::string("token=supersecretvalue"));
  CHECK(line_starting(logs, "ACT END").find("[MASKED]") != std::string::npos);
  CHECK(line_starting(logs, "ACT END").find("supersecretvalue") == std::string::npos);
  CHECK(shown.at("TEXT").text().find("token=supersecretvalue") != std::string_view::npos);  // the user's own output
}

TEST_CASE("long output is cut in the log and, far later, in the message", "[pipeline]") {
  LogCapture logs;
  const ActionRecord record("SHELL", sexp("(:TYPE :REQUEST :PAYLOAD (:CMD \"yes\"))"));
  const Value shown = record.finish(Value::string(std::string(100000, 'y')));
  const std::string end = line_starting(logs, "ACT END");
  CHECK(end.find("... (99700 more bytes)") != std::string::npos);
  CHECK(shown.at("TEXT").text().find("... (34464 more bytes)") != std::string_view::npos);
}

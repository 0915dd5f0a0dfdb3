// A real model acting through the daemon, for each API the daemon speaks
// (openai, anthropic, ollama, each played by the loopback HTTP stub): what
// the request carries (the shell offered natively with its schema beside the
// file tools, the grammar, the identity and the mandates, the real window, no
// boot line in LOGS); a native shell call held for approval, approved, its
// output shown to the operator and given to the model as that call's result;
// a blocked call's reason reaching the next attempt; and a text-only
// endpoint (tools: false) answering in the plist grammar reaching the same
// actuator. Every command is harmless if a gate ever let it through.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/protocol.hpp"
#include "integration/daemon_process.hpp"
#include "integration/model_exchange.hpp"
#include "support/http_stub.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

using nlohmann::json;
using testing::DaemonProcess;
using testing::HttpStub;
using testing::TempDir;
using testing::WireClient;
using namespace passepartout::testing;

}  // namespace

TEST_CASE("each API's request offers the shell natively and the prompt teaches the grammar, identity and mandates",
          "[integration][providers][offer]") {
  for (const std::string kind : {"openai", "anthropic", "ollama"}) {
    DYNAMIC_SECTION(kind) {
      HttpStub stub;
      stub.set_default(text_answer(kind, "Nothing to do."));
      TempDir dir;
      DaemonProcess daemon(with_model(dir, write_config(dir, stub, kind)));
      chat(daemon, "please list the files in my workspace using the shell", "s1", "r1");
      REQUIRE(stub.requests().size() == 1);
      const Sent request = sent(kind, stub.requests()[0]);
      INFO(stub.requests()[0].body);
      CHECK(std::find(request.tools.begin(), request.tools.end(), "shell") != request.tools.end());
      CHECK(std::find(request.tools.begin(), request.tools.end(), "read-file") != request.tools.end());
      CHECK(std::find(request.tools.begin(), request.tools.end(), "list-files") != request.tools.end());
      CHECK(request.shell_schema.at("required") == json::array({"cmd", "explanation"}));
      CHECK(request.shell_schema.at("properties").contains("timeout"));
      CHECK(request.system.find("IDENTITY: Agent\n" + std::string(kIdentity)) != std::string::npos);
      CHECK(request.system.find("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD <cmd> :EXPLANATION <explanation>") !=
            std::string::npos);
      CHECK(request.system.find("MANDATE: every action you propose") != std::string::npos);
      CHECK(request.system.find("Context: 64000 tokens") != std::string::npos);
      if (kind == "anthropic") {
        // The breakpoint ends the part a session keeps: IDENTITY, TOOLS and CONTEXT, before CONFIG.
        CHECK(request.cached_prefix > request.system.find("\n\nTOOLS:\n"));
        CHECK(request.cached_prefix < request.system.find("CONFIG: "));
      }
      const std::string logs = request.system.substr(request.system.find("LOGS:"));
      CHECK(logs.find("sha256") == std::string::npos);
      CHECK(logs.find(daemon.dir().string()) == std::string::npos);
    }
  }
}

TEST_CASE("each API's native shell call waits for approval, runs once approved, and its output is the call's result",
          "[integration][providers][offer]") {
  for (const std::string kind : {"openai", "anthropic", "ollama"}) {
    DYNAMIC_SECTION(kind) {
      HttpStub stub;
      // Ollama's API gives calls no id: the driver makes one up ("call_0").
      const std::string id = kind == "ollama" ? "" : kind == "openai" ? "call_ls" : "toolu_ls";
      stub.enqueue(call_answer(kind, id, "shell", shell_arguments("echo approved-run")));
      stub.enqueue(text_answer(kind, "It waits for your approval."));
      TempDir dir;
      DaemonProcess daemon(with_model(dir, write_config(dir, stub, kind)));
      const auto first = chat(daemon, "please list the files in my workspace using the shell", "s1", "r1");
      INFO(printed(first) << daemon.log());
      const std::string token = approval_token(first);
      REQUIRE(token.size() == 32);

      WireClient op = WireClient::local(daemon.socket_path());
      op.expect_handshake();
      op.send("(:TYPE :OPERATOR :COMMAND :APPROVE :TOKEN \"" + token + "\")");
      const Value approved = op.expect_frame();
      INFO(to_sexp(approved));
      REQUIRE(is_ok_response(approved));
      CHECK(to_sexp(approved).find("approved-run") != std::string::npos);  // the command's output, to the operator

      stub.enqueue(text_answer(kind, "It printed approved-run."));
      chat(daemon, "what did it print?", "s1", "r2");
      const std::size_t last = stub.requests().size() - 1;
      const Sent next = sent(kind, stub.requests()[last]);
      const std::string result_id = kind == "ollama" ? std::string() : id;
      const std::string result = call_result(kind, next.messages, result_id);
      INFO(stub.requests()[last].body);
      CHECK(result.find("Approved by ") == 0);
      CHECK(result.find("approved-run") != std::string::npos);
    }
  }
}

TEST_CASE("a blocked native shell call's reason reaches the model's next attempt as that call's result",
          "[integration][providers][offer]") {
  for (const std::string kind : {"openai", "anthropic"}) {
    DYNAMIC_SECTION(kind) {
      HttpStub stub;
      const std::string id = kind == "openai" ? "call_rm" : "toolu_rm";
      // shell-guard blocks it before anything runs; it would only delete a folder of the test's own workspace.
      stub.enqueue(call_answer(kind, id, "shell", shell_arguments("rm -rf ~/scratch")));
      stub.enqueue(text_answer(kind, "I may not delete that."));
      TempDir dir;
      DaemonProcess daemon(with_model(dir, write_config(dir, stub, kind)));
      const auto frames = chat(daemon, "free some disk space", "s1", "r1");
      INFO(printed(frames) << daemon.log());
      REQUIRE(stub.requests().size() == 2);
      const std::string result = call_result(kind, sent(kind, stub.requests()[1]).messages, id);
      CHECK(result.find("DESTRUCTIVE-RM") != std::string::npos);
      CHECK(result.find("The call was not run.") != std::string::npos);
    }
  }
}

TEST_CASE("a text-only endpoint answering in the plist grammar reaches the same actuator",
          "[integration][providers][offer]") {
  HttpStub stub;
  stub.enqueue(text_answer("openai", R"((:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo plist-run" )"
                                     R"(:EXPLANATION "Running a harmless command the user asked for.")))"));
  TempDir dir;
  DaemonProcess daemon(with_model(dir, write_config(dir, stub, "openai", false)));
  const auto frames = chat(daemon, "run echo for me", "s1", "r1");
  INFO(printed(frames) << daemon.log());
  REQUIRE(stub.requests().size() == 1);
  const json body = json::parse(stub.requests()[0].body);
  CHECK_FALSE(body.contains("tools"));  // declared tools: false
  CHECK(sent("openai", stub.requests()[0]).system.find("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD <cmd>") !=
        std::string::npos);
  const std::string token = approval_token(frames);
  REQUIRE(token.size() == 32);  // the same actuator, through the same gates: shell-guard asks
  CHECK(printed(frames).find("echo plist-run") != std::string::npos);
}

}  // namespace passepartout

namespace passepartout {

TEST_CASE("the demo's scripted model acts through a native shell call and through the plist grammar alike",
          "[integration][offer]") {
  DaemonProcess::Options options;
  options.script = testing::read_text_file(std::filesystem::path(PP_SOURCE_DIR) / "scripts" / "demo-model.yaml");
  DaemonProcess daemon(options);
  const auto listing = chat(daemon, "list the files", "demo", "r1");  // tool_call: shell
  const auto dating = chat(daemon, "show the date", "demo", "r2");    // a plist reply
  INFO(printed(listing) << printed(dating) << daemon.log());
  CHECK(approval_token(listing).size() == 32);
  CHECK(printed(listing).find(R"(:TARGET :SHELL :PAYLOAD (:CMD "ls -la" :EXPLANATION "Listing the files)") !=
        std::string::npos);
  CHECK(approval_token(dating).size() == 32);
  CHECK(printed(dating).find(R"(:CMD "date -u")") != std::string::npos);
}

}  // namespace passepartout

// Tests for global awareness: the outline of active projects, the depth rule,
// the foveal node, privacy, and the empty case.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "memory/global_awareness.hpp"
#include "memory/memory_store.hpp"
#include "support/sexp.hpp"
#include "value/sexp_reader.hpp"

using passepartout::AwarenessOptions;
using passepartout::MemoryStore;
using passepartout::Value;

namespace {

using passepartout::testing::sexp;

constexpr std::string_view kHeader = "GLOBAL MEMEX AWARENESS (Peripheral Vision):\n";

constexpr std::string_view kProject = R"(
  (:TYPE :HEADLINE :PROPERTIES (:ID "p1" :TITLE "Launch" :TAGS ("project") :TODO-STATE "TODO")
   :RAW-CONTENT "Project notes."
   :CONTENTS ((:TYPE :HEADLINE :PROPERTIES (:ID "t1" :TITLE "Write docs")
               :RAW-CONTENT "Docs notes."
               :CONTENTS ((:TYPE :HEADLINE :PROPERTIES (:ID "deep" :TITLE "Deep step") :RAW-CONTENT "Deep notes.")))
              (:TYPE :HEADLINE :PROPERTIES (:ID "t2"))))
)";

}  // namespace

TEST_CASE("global awareness says so when there are no active projects", "[memory]") {
  MemoryStore store;
  CHECK(passepartout::render_global_awareness(store) == std::string(kHeader) + "No active projects found.\n");
  REQUIRE(
      store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "d" :TITLE "Done" :TAGS "project" :TODO-STATE "DONE")))"))
          .has_value());
  REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "n" :TITLE "Not a project")))")).has_value());
  CHECK(passepartout::render_global_awareness(store) == std::string(kHeader) + "No active projects found.\n");
}

TEST_CASE("global awareness outlines projects two levels deep, without content", "[memory]") {
  MemoryStore store;
  REQUIRE(store.ingest(sexp(kProject)).has_value());
  CHECK(passepartout::render_global_awareness(store) == std::string(kHeader) +
                                                            "* Launch\n:PROPERTIES:\n:ID: p1\n:END:\n"
                                                            "** Write docs\n:PROPERTIES:\n:ID: t1\n:END:\n"
                                                            "** Untitled\n:PROPERTIES:\n:ID: t2\n:END:\n");
}

TEST_CASE("the foveal node shows its content and its children at any depth", "[memory]") {
  MemoryStore store;
  REQUIRE(store.ingest(sexp(kProject)).has_value());
  AwarenessOptions options;
  options.foveal_id = "t1";
  CHECK(passepartout::render_global_awareness(store, options) ==
        std::string(kHeader) +
            "* Launch\n:PROPERTIES:\n:ID: p1\n:END:\n"
            "** Write docs\n:PROPERTIES:\n:ID: t1\n:END:\nWrite docs\nDocs notes.\n"
            "*** Deep step\n:PROPERTIES:\n:ID: deep\n:END:\nDeep step\nDeep notes.\n"
            "** Untitled\n:PROPERTIES:\n:ID: t2\n:END:\n");

  SECTION("as in the Lisp system's rendering test") {
    REQUIRE(store
                .ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "root" :TITLE "Root" :TAGS ("project"))
                                  :CONTENTS ((:TYPE :HEADLINE :PROPERTIES (:ID "node-foveal" :TITLE "Foveal Node")
                                              :RAW-CONTENT "FOVEAL CONTENT")
                                             (:TYPE :HEADLINE :PROPERTIES (:ID "node-peripheral" :TITLE "Peripheral Node")
                                              :RAW-CONTENT "PERIPHERAL CONTENT"))))"))
                .has_value());
    options.foveal_id = "node-foveal";
    auto text = passepartout::render_global_awareness(store, options);
    CHECK(text.find("FOVEAL CONTENT") != std::string::npos);
    CHECK(text.find("* Peripheral Node") != std::string::npos);
    CHECK(text.find("PERIPHERAL CONTENT") == std::string::npos);
  }
}

TEST_CASE("every active project is in global awareness (seed L: test-awareness-budget)", "[memory]") {
  MemoryStore store;
  REQUIRE(store.ingest(sexp(kProject)).has_value());
  REQUIRE(
      store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "p2" :TITLE "Garden" :TAGS ("project"))))")).has_value());
  const std::string text = passepartout::render_global_awareness(store, AwarenessOptions{});
  CHECK(text.find("* Launch\n") != std::string::npos);
  CHECK(text.find("* Garden\n") != std::string::npos);
}

TEST_CASE("projects with a private tag are left out of global awareness", "[memory]") {
  MemoryStore store;
  REQUIRE(store.ingest(sexp(kProject)).has_value());
  REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "s" :TITLE "Secret" :TAGS ("project" "Private"))))"))
              .has_value());
  const std::vector<std::string> private_tags = {"private"};
  AwarenessOptions options;
  options.private_tags = private_tags;
  auto text = passepartout::render_global_awareness(store, options);
  CHECK(text.find("* Launch") != std::string::npos);
  CHECK(text.find("Secret") == std::string::npos);
}

TEST_CASE("a cycle of ids in memory is rendered once, not forever", "[memory]") {
  MemoryStore store;
  // a -> b, then b re-ingested with a (whose child is b) under it: a -> b -> a.
  REQUIRE(store
              .ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "a" :TITLE "A" :TAGS ("project"))
                                :CONTENTS ((:TYPE :HEADLINE :PROPERTIES (:ID "b" :TITLE "B")))))"))
              .has_value());
  REQUIRE(store
              .ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "b" :TITLE "B")
                                :CONTENTS ((:TYPE :HEADLINE :PROPERTIES (:ID "a" :TITLE "A" :TAGS ("project"))
                                            :CONTENTS ((:TYPE :HEADLINE :PROPERTIES (:ID "b" :TITLE "B2")))))))"))
              .has_value());
  REQUIRE(store.find("a")->children == std::vector<std::string>{"b"});
  REQUIRE(store.find("b")->children == std::vector<std::string>{"a"});
  AwarenessOptions options;
  options.foveal_id = "a";
  auto text = passepartout::render_global_awareness(store, options);
  CHECK(text ==
        std::string(kHeader) + "* A\n:PROPERTIES:\n:ID: a\n:END:\nA\n\n** B\n:PROPERTIES:\n:ID: b\n:END:\nB\n\n");
}

TEST_CASE("the foveal node comes from the signal's focus or its target id", "[memory]") {
  CHECK(passepartout::foveal_id_of(sexp(R"((:FOVEAL-FOCUS "n1" :PAYLOAD (:TARGET-ID "n2")))")) == "n1");
  CHECK(passepartout::foveal_id_of(sexp(R"((:PAYLOAD (:TARGET-ID "n2")))")) == "n2");
  CHECK(passepartout::foveal_id_of(sexp(R"((:PAYLOAD (:TEXT "hi")))")).empty());
}

// Tests for MemoryStore ingestion and queries: ids, parents and children,
// content, reuse of archived versions, refusal of malformed trees.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "memory/memory_store.hpp"
#include "support/sexp.hpp"
#include "value/sexp_reader.hpp"

using passepartout::ErrorCode;
using passepartout::MemoryObjectPtr;
using passepartout::MemoryStore;
using passepartout::Value;

namespace {

using passepartout::testing::sexp;

std::vector<std::string> ids(const std::vector<MemoryObjectPtr>& objects) {
  std::vector<std::string> out;
  for (const auto& object : objects) out.push_back(object->id);
  return out;
}

constexpr std::int64_t kTime = 3'900'000'000;

constexpr std::string_view kProjectTree = R"(
  (:TYPE :HEADLINE :PROPERTIES (:ID "p1" :TITLE "Project" :TAGS ("Project" "work") :TODO-STATE "TODO")
   :RAW-CONTENT "Plans."
   :CONTENTS ("text between elements"
              (:TYPE :HEADLINE :PROPERTIES (:ID "t1" :TITLE "Task one" :TODO-STATE "DONE"))
              (:TYPE :PARAGRAPH :PROPERTIES (:ID "para") :RAW-CONTENT "ignored for paragraphs")
              (:TYPE :HEADLINE :PROPERTIES (:ID "t2" :TITLE "Task two" :TODO-STATE "TODO"))))
)";

}  // namespace

TEST_CASE("ingest stores a tree with its children first, linked both ways", "[memory]") {
  MemoryStore store([] { return kTime; });
  auto id = store.ingest(sexp(kProjectTree));
  REQUIRE(id.has_value());
  CHECK(*id == "p1");
  CHECK(store.size() == 4);
  CHECK(store.history_size() == 4);

  auto root = store.find("p1");
  REQUIRE(root != nullptr);
  CHECK(root->type == Value::keyword("HEADLINE"));
  CHECK(root->attributes.at("TITLE") == Value::string("Project"));
  CHECK(root->content == "Project\nPlans.");
  CHECK(root->parent_id.empty());
  CHECK(root->children == std::vector<std::string>{"t1", "para", "t2"});
  REQUIRE(root->child_hashes.size() == 3);
  CHECK(root->child_hashes[1] == store.find("para")->hash);
  CHECK(root->version == kTime);
  CHECK(root->last_sync == kTime);

  auto paragraph = store.find("para");
  CHECK(paragraph->parent_id == "p1");
  CHECK(paragraph->content.empty());
  CHECK(store.find("t1")->content == "Task one\n");
  CHECK(store.find_version(root->hash) == root);
  CHECK(store.find("missing") == nullptr);
  CHECK(store.find_version(std::string(64, '0')) == nullptr);
}

TEST_CASE("nodes without an :ID get ids unique in the store, even within one second", "[memory]") {
  MemoryStore store([] { return kTime; });
  const Value anonymous = sexp(R"((:TYPE :HEADLINE :PROPERTIES (:TITLE "Same")
                                   :CONTENTS ((:TYPE :PARAGRAPH) (:TYPE :PARAGRAPH :PROPERTIES (:ID "")))))");
  auto first = store.ingest(anonymous);
  auto second = store.ingest(anonymous);
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  CHECK(*first != *second);
  CHECK(first->starts_with("temp-3900000000-"));
  CHECK(store.size() == 6);

  std::set<std::string> all;
  for (const auto& [object_id, object] : *store.objects()) all.insert(object_id);
  CHECK(all.size() == 6);
  CHECK(store.find(*first)->children.size() == 2);
  CHECK(store.find(*first)->children[0] != store.find(*second)->children[0]);
}

TEST_CASE("ingesting an unchanged tree again reuses the archived objects", "[memory]") {
  std::int64_t now = kTime;
  MemoryStore store([&] { return now; });
  REQUIRE(store.ingest(sexp(kProjectTree)).has_value());
  auto first = store.find("p1");
  now += 100;
  REQUIRE(store.ingest(sexp(kProjectTree)).has_value());
  CHECK(store.find("p1") == first);  // the same object, not an equal copy
  CHECK(store.find("p1")->version == kTime);
  CHECK(store.history_size() == 4);

  SECTION("a changed node is archived as a new version; the old one stays in the history") {
    REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "t1" :TITLE "Task one, renamed")))")).has_value());
    auto renamed = store.find("t1");
    CHECK(renamed->version == kTime + 100);
    CHECK(store.history_size() == 5);
    CHECK(store.find_version(first->child_hashes[0])->attributes.at("TITLE") == Value::string("Task one"));
    CHECK(renamed->parent_id.empty());  // ingested as a root this time
  }
}

TEST_CASE("ingest refuses a malformed tree, names the node, and stores nothing", "[memory]") {
  MemoryStore store([] { return kTime; });
  REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "keep" :TITLE "K")))")).has_value());
  auto before = store.objects();

  struct Case {
    std::string_view ast;
    std::string_view message;
  };
  const Case cases[] = {
      {R"("just text")", "memory: cannot ingest node 1: is string, expected a property list"},
      {R"((:PROPERTIES (:ID "x")))", "memory: cannot ingest node 1 (id \"x\"): has no :TYPE"},
      {R"((:TYPE "HEADLINE"))", "memory: cannot ingest node 1: :TYPE is string, expected a keyword"},
      {R"((:TYPE :HEADLINE :PROPERTIES (:ID)))", "memory: cannot ingest node 1: :PROPERTIES has a key without a value"},
      {R"((:TYPE :HEADLINE :PROPERTIES ("ID" "x")))",
       "memory: cannot ingest node 1: :PROPERTIES key 1 is string, expected a keyword"},
      {R"((:TYPE :HEADLINE :PROPERTIES (:ID 7)))", "memory: cannot ingest node 1: :ID is integer, expected a string"},
      {R"((:TYPE :HEADLINE :RAW-CONTENT 7))",
       "memory: cannot ingest node 1: :RAW-CONTENT is integer, expected a string"},
      {R"((:TYPE :HEADLINE :CONTENTS "x"))", "memory: cannot ingest node 1: :CONTENTS is string, expected a list"},
      {R"((:TYPE :HEADLINE :PROPERTIES (:ID "ok") :CONTENTS ("text" (:TYPE :PARAGRAPH) (:TYPE 3))))",
       "memory: cannot ingest node 1.3: :TYPE is integer, expected a keyword"},
  };
  for (const Case& c : cases) {
    INFO(c.ast);
    auto id = store.ingest(sexp(c.ast));
    REQUIRE_FALSE(id.has_value());
    CHECK(id.error().code == ErrorCode::invalid_input);
    CHECK(id.error().message == c.message);
  }
  CHECK(store.objects() == before);
  CHECK(store.find("ok") == nullptr);
}

TEST_CASE("ingest refuses a tree nested deeper than the limit", "[memory]") {
  MemoryStore store([] { return kTime; });
  Value node = sexp("(:TYPE :PARAGRAPH)");
  for (std::size_t i = 0; i < MemoryStore::kMaxIngestDepth; ++i) {
    node = Value::plist({{"TYPE", Value::keyword("SECTION")}, {"CONTENTS", Value::list({node})}});
  }
  auto id = store.ingest(node);
  REQUIRE_FALSE(id.has_value());
  CHECK(id.error().code == ErrorCode::limit_exceeded);
  CHECK(store.size() == 0);
}

TEST_CASE("queries select by attribute, tag, TODO state and type, in id order", "[memory]") {
  MemoryStore store([] { return kTime; });
  REQUIRE(store.ingest(sexp(kProjectTree)).has_value());
  REQUIRE(
      store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "old" :TITLE "Old" :TAGS "project" :TODO-STATE "DONE")))"))
          .has_value());
  REQUIRE(store.ingest(sexp(R"((:TYPE :PARAGRAPH :PROPERTIES (:ID "note" :TAGS ("PROJECT"))))")).has_value());

  CHECK(ids(store.with_attribute("todo-state", Value::string("TODO"))) == std::vector<std::string>{"p1", "t2"});
  CHECK(ids(store.with_attribute("TITLE", Value::string("Old"))) == std::vector<std::string>{"old"});
  CHECK(ids(store.with_attribute("TITLE", Value::string("old"))).empty());
  CHECK(ids(store.tagged("project")) == std::vector<std::string>{"note", "old", "p1"});
  CHECK(ids(store.tagged("WORK")) == std::vector<std::string>{"p1"});
  CHECK(ids(store.with_todo_state("DONE")) == std::vector<std::string>{"old", "t1"});
  CHECK(ids(store.of_type(":paragraph")) == std::vector<std::string>{"note", "para"});
  CHECK(ids(store.query({.tag = "project", .todo_state = "TODO", .type = "HEADLINE"})) ==
        std::vector<std::string>{"p1"});
  CHECK(ids(store.active_projects()) == std::vector<std::string>{"p1"});
  CHECK(ids(store.completed_tasks()) == std::vector<std::string>{"old", "t1"});
}

// Tests for Value: construction, inline and shared storage, plist access,
// structural equality, sharing on copy and edit, deep destruction, thread safety.
#include <catch2/catch.hpp>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"
#include "value/value.hpp"

using passepartout::Kind;
using passepartout::Value;

namespace {

Value big_list(int n) {
  std::vector<Value> items;
  for (int i = 0; i < n; ++i) items.push_back(Value::integer(i));
  return Value::list(items);
}

}  // namespace

TEST_CASE("a default Value is NIL and false", "[value]") {
  const Value v;
  CHECK(v.is_nil());
  CHECK(v.kind() == Kind::nil);
  CHECK(v.is_sequence());
  CHECK_FALSE(static_cast<bool>(v));
  CHECK(v.size() == 0);
  CHECK(v.text().empty());
  CHECK(v.as_integer() == 0);
  CHECK(v.as_float() == 0.0);
}

TEST_CASE("scalar constructors keep their kind and content", "[value]") {
  CHECK(Value::t().is_true());
  CHECK(static_cast<bool>(Value::t()));
  CHECK(Value::boolean(true) == Value::t());
  CHECK(Value::boolean(false) == Value::nil());
  CHECK(Value::integer(-42).as_integer() == -42);
  CHECK(Value::integer(-42).as_float() == -42.0);
  CHECK(Value::real(2.5).as_float() == 2.5);
  CHECK(Value::real(2.5).as_integer() == 0);
  CHECK(Value::string("hi").text() == "hi");
  CHECK(Value::string("hi").is_string());
  CHECK(Value::symbol("foo").text() == "foo");
  CHECK(Value::symbol("foo").is_symbol());
}

TEST_CASE("kinds have lower-case names", "[value]") {
  CHECK(std::string(passepartout::to_string(Kind::nil)) == "nil");
  CHECK(std::string(passepartout::to_string(Kind::t)) == "t");
  CHECK(std::string(passepartout::to_string(Kind::integer)) == "integer");
  CHECK(std::string(passepartout::to_string(Kind::real)) == "float");
  CHECK(std::string(passepartout::to_string(Kind::string)) == "string");
  CHECK(std::string(passepartout::to_string(Kind::keyword)) == "keyword");
  CHECK(std::string(passepartout::to_string(Kind::symbol)) == "symbol");
  CHECK(std::string(passepartout::to_string(Kind::list)) == "list");
}

TEST_CASE("text of up to 14 bytes is stored inline, longer text is shared", "[value]") {
  const Value inline_text = Value::string("fourteen bytes");
  REQUIRE(inline_text.text().size() == 14);
  CHECK(inline_text.use_count_for_test() == 0);
  CHECK(inline_text.text() == "fourteen bytes");

  const Value heap_text = Value::string("fifteen bytes!!");
  REQUIRE(heap_text.text().size() == 15);
  CHECK(heap_text.use_count_for_test() == 1);
  const Value copy = heap_text;  // NOLINT(performance-unnecessary-copy-initialization)
  CHECK(heap_text.use_count_for_test() == 2);
  CHECK(copy.text().data() == heap_text.text().data());
  CHECK(Value::string("").text().empty());
  CHECK(Value::string("").is_string());
}

TEST_CASE("non-ASCII text keeps its bytes", "[value]") {
  const Value v = Value::string("naïve café 😀");
  CHECK(v.text() == "naïve café 😀");
}

TEST_CASE("keywords are upper-cased and lose one leading colon", "[value]") {
  CHECK(Value::keyword("type").text() == "TYPE");
  CHECK(Value::keyword(":session-id").text() == "SESSION-ID");
  CHECK(Value::keyword("Mixed Case").text() == "MIXED CASE");
  CHECK(Value::keyword("a-very-long-keyword-name").text() == "A-VERY-LONG-KEYWORD-NAME");
  CHECK(Value::keyword("type") == Value::keyword(":TYPE"));
  CHECK(Value::keyword("type").is_keyword(":Type"));
  CHECK(Value::keyword("type").is_keyword("TYPE"));
  CHECK_FALSE(Value::keyword("type").is_keyword("typo"));
  CHECK_FALSE(Value::symbol("TYPE").is_keyword("TYPE"));
}

TEST_CASE("symbols keep their name as given", "[value]") {
  CHECK(Value::symbol("foo").text() == "foo");
  CHECK(Value::symbol(":x").text() == ":x");
  CHECK_FALSE(Value::symbol("FOO") == Value::symbol("foo"));
}

TEST_CASE("an empty list is NIL", "[value]") {
  CHECK(Value::list({}).is_nil());
  CHECK(Value::list(std::span<const Value>()).is_nil());
  CHECK(Value::plist({}).is_nil());
}

TEST_CASE("lists hold their elements in order", "[value]") {
  const Value v = Value::list({Value::integer(1), Value::string("two"), Value::keyword("three")});
  REQUIRE(v.is_list());
  REQUIRE(v.size() == 3);
  CHECK(v.items()[0] == Value::integer(1));
  CHECK(v.items()[1] == Value::string("two"));
  CHECK(v.items()[2] == Value::keyword("THREE"));
  CHECK(v.is_sequence());
  CHECK(static_cast<bool>(v));
}

TEST_CASE("plist builds keyword keys from names", "[value]") {
  const Value v = Value::plist({{"type", Value::keyword("event")}, {":depth", Value::integer(0)}});
  CHECK(passepartout::to_sexp(v) == "(:TYPE :EVENT :DEPTH 0)");
}

TEST_CASE("plist access ignores the case of keys", "[value][plist]") {
  const Value v = Value::plist({{"TYPE", Value::keyword("event")}});
  REQUIRE(v.get(":type") != nullptr);
  CHECK(*v.get(":type") == Value::keyword("EVENT"));
  CHECK(*v.get("TYPE") == Value::keyword("EVENT"));
  CHECK(*v.get("Type") == Value::keyword("EVENT"));
  CHECK(v.get("typo") == nullptr);
}

TEST_CASE("plist access tells keys apart at every length, inline or not", "[value][plist]") {
  // Names of 1 to 20 bytes: up to 14 are stored inside the Value, beyond on
  // the heap; keys that share a prefix or differ only in their last byte or
  // their length must not be confused.
  std::vector<Value> items;
  for (int n = 1; n <= 20; ++n) {
    const std::string name(static_cast<std::size_t>(n), 'k');
    items.push_back(Value::keyword(name));
    items.push_back(Value::integer(n));
    items.push_back(Value::keyword(name.substr(0, name.size() - 1) + "x"));
    items.push_back(Value::integer(-n));
  }
  const Value v = Value::list(items);
  for (int n = 1; n <= 20; ++n) {
    const std::string lower(static_cast<std::size_t>(n), 'k');
    const std::string upper(static_cast<std::size_t>(n), 'K');
    CHECK(v.at(lower) == Value::integer(n));
    CHECK(v.at(":" + upper) == Value::integer(n));
    CHECK(v.at(lower.substr(0, lower.size() - 1) + "X") == Value::integer(-n));
    CHECK(v.with(lower, Value::t()).at(upper) == Value::t());
  }
  CHECK(v.get(std::string(21, 'k')) == nullptr);
  CHECK(v.get("") == nullptr);
  // Text that is not a keyword never matches, even with the same bytes.
  const Value strings = Value::list({Value::string("KEY"), Value::integer(1), Value::symbol("KEY"), Value::integer(2)});
  CHECK(strings.get("key") == nullptr);
}

TEST_CASE("plist access upper-cases only the ASCII letters of a name", "[value][plist]") {
  // '@' and '[' sit just outside 'A'-'Z', '`' and '{' just outside 'a'-'z':
  // upper-casing must leave them alone, so "`" is not "@" nor "{" "[".
  const Value v = Value::list({Value::keyword("@"), Value::integer(1), Value::keyword("["), Value::integer(2),
                               Value::keyword("a`z{"), Value::integer(3), Value::keyword("größe"), Value::integer(4),
                               Value::keyword("0-9_~"), Value::integer(5)});
  CHECK(v.at("@") == Value::integer(1));
  CHECK(v.get("`") == nullptr);
  CHECK(v.at("[") == Value::integer(2));
  CHECK(v.get("{") == nullptr);
  CHECK(v.at("A`Z{") == Value::integer(3));
  CHECK(v.get("A@Z[") == nullptr);
  CHECK(v.at("GRößE") == Value::integer(4));  // non-ASCII bytes are compared as they are
  CHECK(v.at("größe") == Value::integer(4));
  CHECK(v.get("GRÖSSE") == nullptr);
  CHECK(v.at("0-9_~") == Value::integer(5));
}

TEST_CASE("keys fixed at compile time find what the names find", "[value][plist]") {
  using namespace passepartout::key_literals;
  std::vector<Value> items;
  for (const char* name : {"K", "KKKKKK", "KKKKKKK", "KKKKKKKKKKKKKK", "KKKKKKKKKKKKKKK", "PAYLOAD", "PAYLOAX"}) {
    items.push_back(Value::keyword(name));
    items.push_back(Value::string(name));
  }
  const Value v = Value::list(items);
  CHECK(v.at("k"_key) == Value::string("K"));
  CHECK(v.at("kkkkkk"_key) == Value::string("KKKKKK"));                    // 6: the text ends in the first word
  CHECK(v.at("kkkkkkk"_key) == Value::string("KKKKKKK"));                  // 7: it reaches the second
  CHECK(v.at("kkkkkkkkkkkkkk"_key) == Value::string("KKKKKKKKKKKKKK"));    // 14: the most stored inline
  CHECK(v.at("KKKKKKKKKKKKKKK"_key) == Value::string("KKKKKKKKKKKKKKK"));  // 15: on the heap
  CHECK(v.at(":Payload"_key) == Value::string("PAYLOAD"));
  CHECK(v.get("PAYLOA"_key) == nullptr);
  CHECK(v.get("KKKKKKKKKKKKKKKK"_key) == nullptr);
  CHECK(v.get(""_key) == nullptr);
  const Value nested = Value::plist({{"META", Value::plist({{"SOURCE", Value::keyword("TUI")}})}});
  CHECK(nested.path("meta"_key, "source"_key) == Value::keyword("TUI"));
  CHECK(nested.path("meta"_key, "target"_key).is_nil());
  CHECK(Value::string("not a list").get("meta"_key) == nullptr);
  // Text that is not a keyword never matches, even with the same bytes.
  const Value strings = Value::list({Value::string("KEY"), Value::integer(1), Value::symbol("KEY"), Value::integer(2)});
  CHECK(strings.get("key"_key) == nullptr);
  // with takes keys too, in place or as a copy.
  Value plist = Value::plist({{"STATUS", Value::keyword("PERCEIVED")}});
  const Value copy = plist.with("depth"_key, Value::integer(0));
  CHECK(passepartout::to_sexp(copy) == "(:STATUS :PERCEIVED :DEPTH 0)");
  const Value* before = plist.items().data();
  plist = std::move(plist).with(":status"_key, Value::keyword("acted"_key));
  CHECK(plist.items().data() == before);
  CHECK(passepartout::to_sexp(plist) == "(:STATUS :ACTED)");
  CHECK(passepartout::to_sexp(plist.with("approved-action"_key, Value::t())) == "(:STATUS :ACTED :APPROVED-ACTION T)");
  CHECK(passepartout::to_sexp(Value().with(":x", Value::t())) == "(:X T)");
  // A keyword made from a key is the keyword made from its name.
  CHECK(Value::keyword(":acted"_key) == Value::keyword("ACTED"));
  CHECK(Value::keyword("requires-approval"_key) == Value::keyword("REQUIRES-APPROVAL"));
  CHECK(Value::keyword("acted"_key).is_keyword("ACTED"_key));
  CHECK(!Value::keyword("acted"_key).is_keyword("ACTE"_key));
  CHECK(!Value::string("ACTED").is_keyword("ACTED"_key));
  CHECK(passepartout::to_sexp(Value::keyword("status"_key)) == ":STATUS");
}

TEST_CASE("keywords too long to store inline, made from keys, are each key's keyword every time", "[value][plist]") {
  using namespace passepartout::key_literals;
  // More long keys than a thread keeps made (they share its slots), each made
  // several times, in both cases and with a colon.
  static constexpr passepartout::Key kKeys[] = {
      "APPROVED-ACTION"_key,    "REJECTION-TRACE"_key,    ":long-key-number-01"_key, "LONG-KEY-NUMBER-02"_key,
      "LONG-KEY-NUMBER-03"_key, "LONG-KEY-NUMBER-04"_key, "LONG-KEY-NUMBER-05"_key,  "LONG-KEY-NUMBER-06"_key,
      "LONG-KEY-NUMBER-07"_key, "LONG-KEY-NUMBER-08"_key, "LONG-KEY-NUMBER-09"_key,  "LONG-KEY-NUMBER-10"_key,
      "LONG-KEY-NUMBER-11"_key, "LONG-KEY-NUMBER-12"_key, "LONG-KEY-NUMBER-13"_key,  "LONG-KEY-NUMBER-14"_key,
      "LONG-KEY-NUMBER-15"_key, "LONG-KEY-NUMBER-16"_key, "LONG-KEY-NUMBER-17"_key,  "LONG-KEY-NUMBER-18"_key};
  for (int round = 0; round < 3; ++round) {
    for (const passepartout::Key& key : kKeys) {
      std::string name(key.name());
      for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      INFO(name);
      const Value keyword = Value::keyword(key);
      CHECK(keyword == Value::keyword(name));
      CHECK(keyword.text() == name);
      const Value plist = Value().with(key, Value::integer(round));
      CHECK(plist.at(key) == Value::integer(round));
      CHECK(plist.at(name) == Value::integer(round));
    }
  }
  // Each thread makes its own.
  std::thread other([] { CHECK(Value::keyword("APPROVED-ACTION"_key).text() == "APPROVED-ACTION"); });
  other.join();
}

TEST_CASE("keywords read from text are found whatever their inline storage held before", "[value][plist]") {
  // The reader writes a keyword's bytes inline and then sets its length, so
  // the bytes after the text are not necessarily zero.
  const Value v = passepartout::read_sexp("(:ABCDEFGHIJKLMN 1 :AB 2 :ABCDEFG 3)").value();
  CHECK(v.at("abcdefghijklmn") == Value::integer(1));
  CHECK(v.at("ab") == Value::integer(2));
  CHECK(v.at("abcdefg") == Value::integer(3));
  CHECK(v.get("abc") == nullptr);
  using namespace passepartout::key_literals;
  CHECK(v.at("abcdefghijklmn"_key) == Value::integer(1));
  CHECK(v.at("ab"_key) == Value::integer(2));
  CHECK(v.at("abcdefg"_key) == Value::integer(3));
  CHECK(v.get("abc"_key) == nullptr);
}

TEST_CASE("plist access only looks at keys in even positions", "[value][plist]") {
  // (:A :B :B 1): the :B at position 1 is a value, the key :B is at position 2.
  const Value v = Value::list({Value::keyword("A"), Value::keyword("B"), Value::keyword("B"), Value::integer(1)});
  REQUIRE(v.get("B") != nullptr);
  CHECK(*v.get("B") == Value::integer(1));
  CHECK(*v.get("A") == Value::keyword("B"));
}

TEST_CASE("plist access finds the first of repeated keys", "[value][plist]") {
  const Value v = Value::list({Value::keyword("A"), Value::integer(1), Value::keyword("A"), Value::integer(2)});
  CHECK(v.at("A") == Value::integer(1));
}

TEST_CASE("a key without a value in an odd-length list is absent", "[value][plist]") {
  const Value v = Value::list({Value::keyword("A"), Value::integer(1), Value::keyword("B")});
  CHECK(v.get("B") == nullptr);
  CHECK(v.at("B").is_nil());
}

TEST_CASE("plist access on something that is not a list finds nothing", "[value][plist]") {
  CHECK(Value().get("A") == nullptr);
  CHECK(Value::string("A").get("A") == nullptr);
  CHECK(Value::keyword("A").at("A").is_nil());
}

TEST_CASE("path follows nested plists and gives NIL when a step is missing", "[value][plist]") {
  const Value signal = Value::plist(
      {{"TYPE", Value::keyword("EVENT")}, {"PAYLOAD", Value::plist({{"ACTION", Value::keyword("HANDSHAKE")}})}});
  CHECK(signal.path({"payload", "action"}) == Value::keyword("HANDSHAKE"));
  CHECK(signal.path({":PAYLOAD", ":ACTION"}) == Value::keyword("HANDSHAKE"));
  CHECK(signal.path({"payload", "missing"}).is_nil());
  CHECK(signal.path({"missing", "action"}).is_nil());
  CHECK(signal.path({"type", "action"}).is_nil());
  CHECK(signal.path(std::initializer_list<std::string_view>{}) == signal);
}

TEST_CASE("with replaces a present key in place and shares the other elements", "[value][plist]") {
  const Value shared = big_list(1000);
  const Value v = Value::plist({{"A", shared}, {"B", Value::integer(1)}, {"C", Value::integer(2)}});
  REQUIRE(shared.use_count_for_test() == 2);
  const Value updated = v.with(":b", Value::string("new"));
  CHECK(passepartout::to_sexp(updated.without("A")) == "(:B \"new\" :C 2)");
  CHECK(updated.size() == 6);
  CHECK(shared.use_count_for_test() == 3);
  CHECK(updated.at("A").items().data() == shared.items().data());
  CHECK(v.at("B") == Value::integer(1));  // the original is untouched
}

TEST_CASE("with appends an absent key as an upper-case keyword", "[value][plist]") {
  const Value v = Value::plist({{"A", Value::integer(1)}});
  CHECK(passepartout::to_sexp(v.with("status", Value::keyword("acted"))) == "(:A 1 :STATUS :ACTED)");
  CHECK(passepartout::to_sexp(Value().with(":x", Value::t())) == "(:X T)");
}

TEST_CASE("with on a list nothing else holds changes that list instead of copying it", "[value][plist]") {
  Value v = Value::plist({{"A", Value::integer(1)}, {"STATUS", Value::keyword("PERCEIVED")}});
  const Value* before = v.items().data();
  v = std::move(v).with("status", Value::keyword("acted"));
  CHECK(v.items().data() == before);
  CHECK(passepartout::to_sexp(v) == "(:A 1 :STATUS :ACTED)");

  SECTION("an absent key makes a longer copy, with room for the next appends") {
    v = std::move(v).with("depth", Value::integer(0));
    CHECK(v.items().data() != before);
    CHECK(passepartout::to_sexp(v) == "(:A 1 :STATUS :ACTED :DEPTH 0)");
    const Value* copied = v.items().data();
    v = std::move(v).with("meta", Value::keyword("tui"));
    v = std::move(v).with("level", Value::keyword("info"));
    CHECK(v.items().data() == copied);  // appended in the room the copy kept
    CHECK(passepartout::to_sexp(v) == "(:A 1 :STATUS :ACTED :DEPTH 0 :META :TUI :LEVEL :INFO)");
    v = std::move(v).with("more", Value::t());  // the room is used up: a copy again
    CHECK(v.items().data() != copied);
    CHECK(passepartout::to_sexp(v) == "(:A 1 :STATUS :ACTED :DEPTH 0 :META :TUI :LEVEL :INFO :MORE T)");
    CHECK(v == Value::plist({{"A", Value::integer(1)},
                             {"STATUS", Value::keyword("ACTED")},
                             {"DEPTH", Value::integer(0)},
                             {"META", Value::keyword("TUI")},
                             {"LEVEL", Value::keyword("INFO")},
                             {"MORE", Value::t()}}));
  }
}

TEST_CASE("an append into a list's spare room never changes what another holder sees", "[value][plist]") {
  const Value base = Value::plist({{"A", Value::integer(1)}});
  Value grown = base.with("B", Value::integer(2));  // a copy with room to spare
  const Value other = grown;                        // now shared
  grown = std::move(grown).with("C", Value::integer(3));
  CHECK(passepartout::to_sexp(other) == "(:A 1 :B 2)");
  CHECK(passepartout::to_sexp(grown) == "(:A 1 :B 2 :C 3)");
  CHECK(grown.items().data() != other.items().data());
  CHECK(passepartout::to_sexp(base) == "(:A 1)");
  // Many appends, each into room or a new copy, keep every pair in order.
  Value many = base;
  std::string expected = "(:A 1";
  for (int i = 0; i < 40; ++i) {
    const std::string key = "K" + std::to_string(i);
    many = std::move(many).with(key, Value::string(std::string(static_cast<std::size_t>(i), 'x')));
    expected += " :" + key + " \"" + std::string(static_cast<std::size_t>(i), 'x') + "\"";
  }
  CHECK(passepartout::to_sexp(many) == expected + ")");
  CHECK(many.size() == 82);
}

TEST_CASE("with on a shared or preprinted list leaves the other holders' list as it was", "[value][plist]") {
  Value v = Value::plist({{"A", Value::integer(1)}, {"STATUS", Value::keyword("PERCEIVED")}});
  SECTION("shared") {
    const Value other = v;
    v = std::move(v).with("status", Value::keyword("acted"));
    CHECK(passepartout::to_sexp(other) == "(:A 1 :STATUS :PERCEIVED)");
    CHECK(passepartout::to_sexp(v) == "(:A 1 :STATUS :ACTED)");
    CHECK(v.items().data() != other.items().data());
  }
  SECTION("preprinted, and so carrying its text") {
    Value printed = passepartout::preprint(v);
    const Value* before = printed.items().data();
    printed = std::move(printed).with("status", Value::keyword("acted"));
    CHECK(printed.items().data() != before);
    CHECK(passepartout::to_sexp(printed) == "(:A 1 :STATUS :ACTED)");
  }
}

TEST_CASE("without removes every occurrence of a key", "[value][plist]") {
  const Value v = Value::list({Value::keyword("A"), Value::integer(1), Value::keyword("B"), Value::integer(2),
                               Value::keyword("a"), Value::integer(3)});
  CHECK(passepartout::to_sexp(v.without(":a")) == "(:B 2)");
  CHECK(v.without("B").size() == 4);
  CHECK(v.without("A").without("B").is_nil());
}

TEST_CASE("without an absent key returns the same shared list", "[value][plist]") {
  const Value v = Value::plist({{"A", Value::integer(1)}});
  const Value same = v.without("Z");
  CHECK(same.items().data() == v.items().data());
  CHECK(v.use_count_for_test() == 2);
}

TEST_CASE("without keeps the unpaired last element of an odd-length list", "[value][plist]") {
  const Value v = Value::list(
      {Value::keyword("A"), Value::integer(1), Value::keyword("B"), Value::integer(2), Value::string("tail")});
  CHECK(passepartout::to_sexp(v.without("A")) == "(:B 2 \"tail\")");
}

TEST_CASE("equality is structural", "[value]") {
  CHECK(big_list(50) == big_list(50));
  CHECK_FALSE(big_list(50) == big_list(51));
  CHECK(Value::list({Value::string("a"), Value::list({Value::real(1.5)})}) ==
        Value::list({Value::string("a"), Value::list({Value::real(1.5)})}));
  CHECK_FALSE(Value::list({Value::string("a")}) == Value::list({Value::symbol("a")}));
  CHECK(Value::string("a long string, not inline") == Value::string("a long string, not inline"));
  CHECK_FALSE(Value::string("a long string, not inline") == Value::string("a long string, not inlinE"));
}

TEST_CASE("an integer never equals a float of the same value", "[value]") {
  CHECK_FALSE(Value::integer(1) == Value::real(1.0));
  CHECK(Value::real(0.0) == Value::real(-0.0));
}

TEST_CASE("copying a big list shares it instead of copying it", "[value]") {
  const Value original = big_list(10000);
  REQUIRE(original.use_count_for_test() == 1);
  {
    const Value copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
    CHECK(original.use_count_for_test() == 2);
    CHECK(copy.items().data() == original.items().data());
    Value moved = copy;
    const Value target = std::move(moved);
    CHECK(original.use_count_for_test() == 3);
    CHECK(moved.is_nil());  // NOLINT(bugprone-use-after-move): a moved-from Value is NIL
  }
  CHECK(original.use_count_for_test() == 1);
}

TEST_CASE("assignment releases the old value and shares the new one", "[value]") {
  const Value a = big_list(3);
  Value b = big_list(4);
  b = a;
  CHECK(a.use_count_for_test() == 2);
  b = Value::integer(7);
  CHECK(a.use_count_for_test() == 1);
  const Value& alias = b;
  b = alias;  // self-assignment keeps the value
  CHECK(b == Value::integer(7));
}

TEST_CASE("destroying a very deep list does not overflow the stack", "[value]") {
  constexpr int kDepth = 200000;
  Value v = Value::integer(0);
  for (int i = 0; i < kDepth; ++i) v = Value::list({v});
  int depth = 0;
  for (const Value* p = &v; p->is_list(); p = &p->items()[0]) ++depth;
  CHECK(depth == kDepth);
  v = Value();
  CHECK(v.is_nil());
}

TEST_CASE("printing a very deep list does not overflow the stack", "[value]") {
  constexpr int kDepth = 100000;
  Value v = Value::integer(0);
  for (int i = 0; i < kDepth; ++i) v = Value::list({v});
  const std::string text = passepartout::to_sexp(v);
  CHECK(text.size() == 2 * kDepth + 1);
  CHECK(text.substr(kDepth - 1, 3) == "(0)");
}

TEST_CASE("values are shared safely between threads", "[value][concurrency]") {
  const Value shared =
      Value::plist({{"TEXT", Value::string("a string long enough to live on the heap")}, {"ITEMS", big_list(100)}});
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&shared, &mismatches] {
      for (int i = 0; i < 20000; ++i) {
        const Value copy = shared;
        const Value inner = copy.at("ITEMS");
        if (inner.size() != 100) mismatches.fetch_add(1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(mismatches.load() == 0);
  CHECK(shared.use_count_for_test() == 1);
  CHECK(shared.at("ITEMS").use_count_for_test() == 1);
}

TEST_CASE("values made on one thread can be released on another", "[value][concurrency]") {
  // Nodes freed on a thread go to that thread's reuse cache; they must come
  // back intact as new values there.
  std::vector<Value> made;
  for (int i = 0; i < 2000; ++i) {
    made.push_back(Value::plist(
        {{"TEXT", Value::string("a string long enough to live on the heap")}, {"ITEMS", big_list(i % 7 + 1)}}));
  }
  std::thread releaser([&made] {
    made.clear();
    for (int i = 0; i < 2000; ++i) {
      const Value again = Value::list({Value::string("reused on the releasing thread, on the heap"), big_list(3)});
      if (again.items()[1].size() != 3) std::abort();
    }
  });
  releaser.join();
  CHECK(made.empty());
  const Value after = Value::list({Value::string("and again on the first thread, on the heap")});
  CHECK(after.items()[0].text() == "and again on the first thread, on the heap");
}

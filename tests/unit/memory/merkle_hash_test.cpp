// Tests for the Merkle hash: the seed's example, the exact hashed text,
// attribute printing, UTF-8 and the links from parents to children.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/digest.hpp"
#include "memory/memory_store.hpp"
#include "memory/merkle_hash.hpp"
#include "support/sexp.hpp"
#include "value/sexp_reader.hpp"

using passepartout::MemoryStore;
using passepartout::Value;

namespace {

using passepartout::testing::sexp;

constexpr std::int64_t kTime = 3'900'000'000;

}  // namespace

TEST_CASE("the seed's example node hashes to the seed's digest", "[memory]") {
  const std::string expected = "e0d4d16b6633916baceb9ca4c570800cb0a884153c8483df5e8c04caa2311524";
  CHECK(passepartout::merkle_hash("n1", Value::keyword("HEADLINE"), sexp(R"((:ID "n1" :TITLE "T"))"), "T\n", {}) ==
        expected);

  MemoryStore store([] { return kTime; });
  auto id = store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "n1" :TITLE "T")))"));
  REQUIRE(id.has_value());
  CHECK(*id == "n1");
  auto object = store.find("n1");
  REQUIRE(object != nullptr);
  CHECK(object->content == "T\n");
  CHECK(object->hash == expected);
}

TEST_CASE("the hashed text names id, type, sorted attributes, content and child hashes", "[memory]") {
  const std::vector<std::string> children = {std::string(64, 'a'), std::string(64, 'b')};
  CHECK(passepartout::merkle_hash_input("n1", Value::keyword("HEADLINE"), sexp(R"((:TITLE "T" :ID "n1"))"), "T\n",
                                        children) ==
        "ID:n1|TYPE::HEADLINE|ATTRS:((:ID . \"n1\") (:TITLE . \"T\"))|CONTENT:T\n|CHILDREN:" + children[0] +
            children[1]);
  CHECK(passepartout::merkle_hash_input("x", Value(), Value(), "", {}) == "ID:x|TYPE:NIL|ATTRS:NIL|CONTENT:|CHILDREN:");
}

TEST_CASE("attributes print as sorted dotted pairs the way a Lisp printer writes them", "[memory]") {
  using passepartout::print_attribute_pairs;
  CHECK(print_attribute_pairs(Value()) == "NIL");
  CHECK(print_attribute_pairs(sexp(R"((:TITLE "T" :ID "n1"))")) == R"(((:ID . "n1") (:TITLE . "T")))");
  SECTION("a list value follows the key, NIL leaves the key alone") {
    CHECK(print_attribute_pairs(sexp(R"((:TAGS ("project" "x") :DONE NIL))")) == R"(((:DONE) (:TAGS "project" "x")))");
  }
  SECTION("numbers, keywords and escapes print readably") {
    CHECK(print_attribute_pairs(sexp(R"((:Q "a\"b\\c" :N 3 :STATE :TODO))")) ==
          R"(((:N . 3) (:Q . "a\"b\\c") (:STATE . :TODO)))");
  }
  SECTION("keys sort by name, byte order; equal keys keep their order") {
    CHECK(print_attribute_pairs(sexp(R"((:B 1 :A-B 2 :A 3 :B 4))")) == "((:A . 3) (:A-B . 2) (:B . 1) (:B . 4))");
  }
}

TEST_CASE("non-ASCII text is hashed as UTF-8", "[memory]") {
  // sha256 of the UTF-8 bytes of the hashed text, computed independently.
  const std::string expected = "6821060b46bdcc57af4cdd98f5af67529b09daa01535ffcf418bd4274e8efe72";
  MemoryStore store([] { return kTime; });
  auto id = store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "n2" :TITLE "Über 日本 🎉")))"));
  REQUIRE(id.has_value());
  CHECK(store.find("n2")->content == "Über 日本 🎉\n");
  CHECK(store.find("n2")->hash == expected);
  CHECK(passepartout::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("a parent's hash covers its children's hashes", "[memory]") {
  MemoryStore store([] { return kTime; });
  REQUIRE(store
              .ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "p1" :TITLE "P") :RAW-CONTENT "body"
                                :CONTENTS ((:TYPE :PARAGRAPH :PROPERTIES (:ID "c1")))))"))
              .has_value());
  auto parent = store.find("p1");
  auto child = store.find("c1");
  REQUIRE(parent != nullptr);
  REQUIRE(child != nullptr);
  CHECK(child->hash == "c401c3a85a80bb3fe7e03f93c4125e0b3cbe581cb8a2567ec1cccbb35de60722");
  CHECK(parent->hash == "3384617cdf38e93d23d9ab30d7518f920371382c7010def1ea3c410c9ad5fcd4");
  CHECK(parent->child_hashes == std::vector<std::string>{child->hash});
  CHECK(passepartout::merkle_hash(*parent) == parent->hash);

  SECTION("a changed child changes its parent's hash") {
    REQUIRE(store
                .ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "p1" :TITLE "P") :RAW-CONTENT "body"
                                  :CONTENTS ((:TYPE :PARAGRAPH :PROPERTIES (:ID "c1" :EXTRA "x")))))"))
                .has_value());
    CHECK(store.find("c1")->hash != child->hash);
    CHECK(store.find("p1")->hash != parent->hash);
  }
}

TEST_CASE("hash shape is 64 lower-case hex digits", "[memory]") {
  CHECK(passepartout::is_sha256_hex(std::string(64, 'f')));
  CHECK_FALSE(passepartout::is_sha256_hex(std::string(64, 'F')));
  CHECK_FALSE(passepartout::is_sha256_hex(std::string(63, 'a')));
  CHECK_FALSE(passepartout::is_sha256_hex(std::string(63, 'a') + "g"));
}

TEST_CASE("sha256_hex matches the FIPS 180-2 test vectors", "[memory][digest]") {
  CHECK(passepartout::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(passepartout::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(passepartout::sha256_hex(std::string(1'000'000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("random_hex gives the asked number of bytes as lower-case hex, different each time", "[memory][digest]") {
  const std::string first = passepartout::random_hex(32);
  const std::string second = passepartout::random_hex(32);
  CHECK(first.size() == 64);
  CHECK(passepartout::is_sha256_hex(first));  // 64 lower-case hex digits
  CHECK(first != second);
  CHECK(passepartout::random_hex(0).empty());
}

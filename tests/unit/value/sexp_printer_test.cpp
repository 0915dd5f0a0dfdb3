// Tests for print_sexp: the exact text a Lisp peer receives, float and name
// quoting rules, and the round-trip law read(print(v)) == v on random Values.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"
#include "value/value_access.hpp"

using passepartout::print_sexp;
using passepartout::read_sexp;
using passepartout::to_sexp;
using passepartout::Value;

namespace {

std::string print_float(double d) { return to_sexp(Value::real(d)); }

// Reads `text` back and checks it is the Value printed.
void check_round_trip(const Value& v) {
  const std::string printed = to_sexp(v);
  INFO("printed: " << printed);
  auto back = read_sexp(printed);
  if (!back) INFO("error: " << back.error().message);
  REQUIRE(back.has_value());
  REQUIRE(*back == v);
  REQUIRE(to_sexp(*back) == printed);
}

}  // namespace

TEST_CASE("printer writes atoms as a Lisp peer reads them", "[value][printer]") {
  CHECK(to_sexp(Value()) == "NIL");
  CHECK(to_sexp(Value::t()) == "T");
  CHECK(to_sexp(Value::integer(0)) == "0");
  CHECK(to_sexp(Value::integer(-42)) == "-42");
  CHECK(to_sexp(Value::integer(INT64_MIN)) == "-9223372036854775808");
  CHECK(to_sexp(Value::keyword("event")) == ":EVENT");
  CHECK(to_sexp(Value::symbol("FOO")) == "FOO");
  CHECK(to_sexp(Value::string("hi")) == "\"hi\"");
}

TEST_CASE("printer separates list elements with single spaces", "[value][printer]") {
  const Value v = Value::plist(
      {{"TYPE", Value::keyword("EVENT")}, {"PAYLOAD", Value::plist({{"ACTION", Value::keyword("HANDSHAKE")}})}});
  CHECK(to_sexp(v) == "(:TYPE :EVENT :PAYLOAD (:ACTION :HANDSHAKE))");
  CHECK(to_sexp(Value::list({Value::list({Value::integer(1)}), Value::list({Value::integer(2)}), Value()})) ==
        "((1) (2) NIL)");
  CHECK(to_sexp(Value::list({Value(), Value::list({Value::list({Value::t()})})})) == "(NIL ((T)))");
}

TEST_CASE("printer appends to the caller's string", "[value][printer]") {
  std::string out = "000044";
  print_sexp(Value::list({Value::integer(1), Value::integer(2)}), out);
  CHECK(out == "000044(1 2)");
}

TEST_CASE("printer escapes only double quote and backslash in strings", "[value][printer]") {
  CHECK(to_sexp(Value::string("say \"hi\"")) == R"("say \"hi\"")");
  CHECK(to_sexp(Value::string("C:\\path")) == R"("C:\\path")");
  CHECK(to_sexp(Value::string("line\nnext\ttab")) == "\"line\nnext\ttab\"");
  CHECK(to_sexp(Value::string("naïve café 😀")) == "\"naïve café 😀\"");
  CHECK(to_sexp(Value::string("a longer string with \"quotes\" past the first words \\ end")) ==
        R"("a longer string with \"quotes\" past the first words \\ end")");
  CHECK(to_sexp(Value::string("\"\"\"\"\"\"\"\"\"")) == R"("\"\"\"\"\"\"\"\"\"")");
  // Short strings are checked a word at a time: a quote or backslash in either word, at either end.
  CHECK(to_sexp(Value::string("12345678901\"3")) == R"("12345678901\"3")");
  CHECK(to_sexp(Value::string("1234567890123\\")) == R"("1234567890123\\")");
  CHECK(to_sexp(Value::string("\\234567890123")) == R"("\\234567890123")");
  CHECK(to_sexp(Value::string("")) == R"("")");
  CHECK(to_sexp(Value::string("12345678901234")) == R"("12345678901234")");
}

TEST_CASE("printer puts keyword names in bars when they would not read back", "[value][printer]") {
  CHECK(to_sexp(Value::keyword("session-id")) == ":SESSION-ID");
  CHECK(to_sexp(Value::keyword("Mixed Case")) == ":|MIXED CASE|");
  CHECK(to_sexp(Value::keyword("a(b")) == ":|A(B|");
  CHECK(to_sexp(Value::keyword("a|b")) == ":|A\\|B|");
  CHECK(to_sexp(Value::keyword("a\\b")) == ":|A\\\\B|");
  CHECK(to_sexp(Value::keyword("#foo")) == ":|#FOO|");
  CHECK(to_sexp(Value::keyword("a#b")) == ":A#B");
  CHECK(to_sexp(Value::keyword("")) == ":||");
  CHECK(to_sexp(Value::keyword("café")) == ":|CAFé|");
  CHECK(to_sexp(Value::keyword("12")) == ":12");
  for (const char* special : {"a;b", "a\"b", "a'b", "a`b", "a,b", "a:b", "a\tb", "..."}) {
    INFO(special);
    const std::string printed = to_sexp(Value::keyword(special));
    CHECK(printed.substr(0, 2) == ":|");
  }
}

TEST_CASE("printer quotes keyword names the same at every length and position", "[value][printer]") {
  // Short upper-case names are checked eight bytes at a time; the result must
  // not depend on where in the name a special character sits.
  for (std::size_t length = 1; length <= 16; ++length) {
    for (std::size_t at = 0; at < length; ++at) {
      for (const char* special : {"_", " ", "|", "a", "\xC3\xA9"}) {
        std::string name(length, 'K');
        name.replace(at, 1, special);
        const Value keyword = Value::keyword(name);
        const std::string printed = to_sexp(keyword);
        INFO("name: " << name << " printed: " << printed);
        const bool bars = std::string_view(special) == " " || std::string_view(special) == "|" ||
                          std::string_view(special) == "\xC3\xA9";
        if (bars) {
          CHECK(printed.substr(0, 2) == ":|");
        } else {
          CHECK(printed == ":" + std::string(keyword.text()));
        }
        check_round_trip(keyword);
      }
    }
    check_round_trip(Value::keyword(std::string(length, 'Q')));
    CHECK(to_sexp(Value::keyword(std::string(length, '-'))) == ":" + std::string(length, '-'));
  }
}

TEST_CASE("printer puts symbol names in bars when they would not read back", "[value][printer]") {
  CHECK(to_sexp(Value::symbol("FOO-BAR")) == "FOO-BAR");
  CHECK(to_sexp(Value::symbol("foo")) == "|foo|");
  CHECK(to_sexp(Value::symbol("12")) == "|12|");
  CHECK(to_sexp(Value::symbol("1.5")) == "|1.5|");
  CHECK(to_sexp(Value::symbol("1/2")) == "|1/2|");
  CHECK(to_sexp(Value::symbol("1+")) == "1+");
  CHECK(to_sexp(Value::symbol("-")) == "-");
  CHECK(to_sexp(Value::symbol("NIL")) == "|NIL|");
  CHECK(to_sexp(Value::symbol("T")) == "|T|");
  CHECK(to_sexp(Value::symbol(".")) == "|.|");
  CHECK(to_sexp(Value::symbol("")) == "||");
  CHECK(to_sexp(Value::symbol("a b")) == "|a b|");
  CHECK(to_sexp(Value::symbol("X:Y")) == "|X:Y|");
  CHECK(to_sexp(Value::symbol("#X")) == "|#X|");
}

TEST_CASE("printer writes single-float-exact values plainly", "[value][printer][float]") {
  CHECK(print_float(1.5) == "1.5");
  CHECK(print_float(-0.5) == "-0.5");
  CHECK(print_float(100.0) == "100.0");
  CHECK(print_float(0.0) == "0.0");
  CHECK(print_float(-0.0) == "-0.0");
  CHECK(print_float(1e7) == "1.0e7");
  CHECK(print_float(1234567.0) == "1234567.0");
  CHECK(print_float(0.125) == "0.125");
  CHECK(print_float(0.0009765625) == "9.765625e-4");
  CHECK(print_float(std::ldexp(1.0, 64)) == "1.8446744073709552e19");
  CHECK(print_float(static_cast<double>(0.1F)) == "0.10000000149011612");
}

TEST_CASE("printer keeps double precision with the d exponent marker", "[value][printer][float]") {
  CHECK(print_float(0.1) == "0.1d0");
  CHECK(print_float(-0.001) == "-0.001d0");
  CHECK(print_float(1.2345678901234e20) == "1.2345678901234d20");
  CHECK(print_float(1e20) == "1.0d20");
  CHECK(print_float(123456789.0) == "1.23456789d8");
  CHECK(print_float(1e-5) == "1.0d-5");
  CHECK(print_float(3.141592653589793) == "3.141592653589793d0");
  CHECK(print_float(std::numeric_limits<double>::max()) == "1.7976931348623157d308");
  CHECK(print_float(std::numeric_limits<double>::denorm_min()) == "5.0d-324");
}

TEST_CASE("printer writes NaN and infinities as NIL", "[value][printer][float]") {
  CHECK(print_float(std::numeric_limits<double>::quiet_NaN()) == "NIL");
  CHECK(print_float(std::numeric_limits<double>::infinity()) == "NIL");
  CHECK(print_float(-std::numeric_limits<double>::infinity()) == "NIL");
}

TEST_CASE("printed floats read back as the same double", "[value][printer][float]") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 5000; ++i) {
    const std::uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (!std::isfinite(d)) continue;
    check_round_trip(Value::real(d));
    check_round_trip(Value::real(static_cast<double>(static_cast<float>(i) / 7.0F)));
  }
}

TEST_CASE("printer does not nest the call stack for deep lists", "[value][printer]") {
  Value v = Value::string("core");
  for (int i = 0; i < 300; ++i) v = Value::list({Value::integer(i), v});
  const std::string printed = to_sexp(v);
  CHECK(printed.substr(0, 8) == "(299 (29");
  CHECK(printed.substr(printed.size() - 306) == "\"core\"" + std::string(300, ')'));
}

namespace {

// Random Values of every kind, with names and strings drawn from characters
// that stress quoting: bars, backslashes, quotes, colons, case, non-ASCII.
class ValueGenerator {
 public:
  explicit ValueGenerator(std::uint64_t seed) : rng_(seed) {}

  Value next(int depth = 0) {
    switch (pick(depth < 4 ? 9 : 8)) {
      case 0:
        return Value();
      case 1:
        return Value::t();
      case 2:
        return Value::integer(random_integer());
      case 3:
        return Value::real(random_float());
      case 4:
        return Value::string(random_text());
      case 5:
        return Value::keyword(random_text());
      case 6:
        return Value::symbol(random_text());
      case 7:
        return Value::symbol(random_number_like());
      default: {
        std::vector<Value> items;
        const std::size_t n = pick(7);
        for (std::size_t i = 0; i < n; ++i) items.push_back(next(depth + 1));
        return Value::list(items);
      }
    }
  }

 private:
  std::size_t pick(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }

  std::int64_t random_integer() {
    switch (pick(4)) {
      case 0:
        return static_cast<std::int64_t>(rng_());
      case 1:
        return std::numeric_limits<std::int64_t>::min();
      case 2:
        return std::numeric_limits<std::int64_t>::max();
      default:
        return static_cast<std::int64_t>(pick(2000)) - 1000;
    }
  }

  double random_float() {
    switch (pick(4)) {
      case 0: {
        const std::uint64_t bits = rng_();
        double d;
        std::memcpy(&d, &bits, sizeof d);
        return std::isfinite(d) ? d : 0.5;
      }
      case 1:
        return static_cast<double>(static_cast<float>(pick(100000)) / 64.0F);
      case 2:
        return static_cast<double>(pick(1000)) / 10.0;
      default:
        return std::ldexp(static_cast<double>(pick(1000)), static_cast<int>(pick(120)) - 60);
    }
  }

  std::string random_text() {
    static const char* const kPieces[] = {"a",  "Z",  "q", "-",   "_", "*",  "1", "9", ".", ":", "|",
                                          "\\", "\"", "(", ")",   ";", "'",  "`", ",", "#", " ", "\t",
                                          "\n", "é",  "😀", "NIL", "T", "x1", "+", "/", "e"};
    std::string out;
    const std::size_t n = pick(20);
    for (std::size_t i = 0; i < n; ++i) out += kPieces[pick(std::size(kPieces))];
    return out;
  }

  std::string random_number_like() {
    static const char* const kPieces[] = {"1", "23", "+", "-", ".", "/", "e", "d", "5"};
    std::string out;
    const std::size_t n = 1 + pick(5);
    for (std::size_t i = 0; i < n; ++i) out += kPieces[pick(std::size(kPieces))];
    return out;
  }

  std::mt19937_64 rng_;
};

}  // namespace

TEST_CASE("printing then reading random Values gives them back", "[value][printer][property]") {
  ValueGenerator generator(0x5EED);
  for (int i = 0; i < 4000; ++i) {
    const Value v = generator.next();
    check_round_trip(v);
  }
}

TEST_CASE("printer leaves chosen keys out of property lists, whatever their length", "[value][printer]") {
  const std::string long_name(70, 'L');                        // past the length bitmap
  const std::string medium_name = "A-KEY-LONGER-THAN-INLINE";  // compared as text
  const std::string_view drop[] = {"X", medium_name, long_name};
  const auto printed = [&](const std::string& text) {
    auto value = read_sexp(text);
    REQUIRE(value.has_value());
    std::string out = "> ";
    print_sexp(*value, out, drop);
    return out;
  };
  CHECK(printed("(:X 1 :Y 2)") == "> (:Y 2)");
  CHECK(printed("(:Y 2 :" + medium_name + " 3)") == "> (:Y 2)");
  CHECK(printed("(:" + long_name + " (1 2) :Y \"kept\")") == "> (:Y \"kept\")");
  CHECK(printed("(:Y (:X 1) :Z (:" + long_name + " 5 :W 6))") == "> (:Y NIL :Z (:W 6))");
  // Keys that only share a length or a prefix with a dropped one stay.
  CHECK(printed("(:Q 1 :" + std::string(70, 'M') + " 2 :XX 3)") == "> (:Q 1 :" + std::string(70, 'M') + " 2 :XX 3)");
  // Not property lists: printed whole.
  CHECK(printed("(:X 1 :Y)") == "> (:X 1 :Y)");
  CHECK(printed("(1 :X 2 3)") == "> (1 :X 2 3)");
  // No keys to drop: the plain printer.
  std::string plain;
  print_sexp(*read_sexp("(:X 1)"), plain, {});
  CHECK(plain == "(:X 1)");

  SECTION("a filter prepared once prints the same and says which keys it holds") {
    const passepartout::KeyFilter filter(drop);
    const Value value = *read_sexp("(:Y (:X 1) :Z (:" + long_name + " 5 :W 6))");
    std::string out;
    passepartout::print_sexp_ascii(value, out, filter);
    CHECK(out == "(:Y NIL :Z (:W 6))");
    CHECK(filter.contains(Value::keyword("x")));
    CHECK(filter.contains(Value::keyword(medium_name)));
    CHECK(filter.contains(Value::keyword(long_name)));
    CHECK_FALSE(filter.contains(Value::keyword("XX")));
    CHECK_FALSE(filter.contains(Value::string("X")));  // keys are keywords
    CHECK(passepartout::KeyFilter().empty());
  }
}

TEST_CASE("a preprinted copy has a node of its own and prints the same text", "[value][printer]") {
  using passepartout::preprinted_copy;
  using passepartout::ValueAccess;
  const Value entry = *read_sexp("(:GATE \"policy\" :RESULT :PASSED)");
  const Value stored = ValueAccess::preprinted_list(entry, "(:STORED)", 0);
  const Value copy = preprinted_copy(stored);
  CHECK(copy == stored);
  CHECK(to_sexp(copy) == "(:STORED)");      // the text itself is copied, not printed again
  CHECK(stored.use_count_for_test() == 1);  // the copy holds no reference to the original's node
  CHECK(copy.use_count_for_test() == 1);
  CHECK(preprinted_copy(entry).use_count_for_test() == 2);  // not preprinted: the same list back
  CHECK(preprinted_copy(Value::integer(3)) == Value::integer(3));
}

TEST_CASE("a preprinted list prints as it did, by copying its text", "[value][printer]") {
  using passepartout::preprint;
  using passepartout::ValueAccess;
  const Value entry = *read_sexp("(:GATE \"shell-guard\" :VERSION \"1.0.0\" :RESULT :PASSED)");
  const Value trace = preprint(Value::list({preprint(entry), entry}));
  CHECK(trace == Value::list({entry, entry}));
  CHECK(to_sexp(trace) == "(" + to_sexp(entry) + " " + to_sexp(entry) + ")");
  CHECK(preprint(Value::string("not a list")) == Value::string("not a list"));
  CHECK(preprint(Value()).is_nil());

  // Inside ordinary lists, and in lists made from it, it is printed the same.
  const Value reply = Value::plist({{"TYPE", Value::keyword("REQUEST")}, {"GATE-TRACE", trace}});
  CHECK(to_sexp(reply.with("STATUS", Value::keyword("DONE"))) ==
        "(:TYPE :REQUEST :GATE-TRACE " + to_sexp(Value::list({entry, entry})) + " :STATUS :DONE)");

  // The text is what is printed: a list whose node holds another text prints that.
  const Value marked = ValueAccess::preprinted_list(entry, "(:STORED)", 0);
  CHECK(to_sexp(marked) == "(:STORED)");
  CHECK(to_sexp(Value::list({marked, Value::t()})) == "((:STORED) T)");
  const std::string_view drop[] = {"SOCKET"};
  std::string filtered;
  print_sexp(marked, filtered, drop);
  CHECK(filtered == "(:STORED)");  // no keyword of the list may be SOCKET: the text stands

  // A printer that leaves out a key the list may hold walks the list instead.
  const std::string_view drop_result[] = {"RESULT"};
  const Value holding = ValueAccess::preprinted_list(entry, "(:STORED)", passepartout::detail::keyword_mark("RESULT"));
  filtered.clear();
  print_sexp(holding, filtered, drop_result);
  CHECK(filtered == "(:GATE \"shell-guard\" :VERSION \"1.0.0\")");
  filtered.clear();
  print_sexp(preprint(entry), filtered, drop_result);
  CHECK(filtered == "(:GATE \"shell-guard\" :VERSION \"1.0.0\")");
}

TEST_CASE("print_sexp_ascii says whether every byte it wrote is ASCII", "[value][printer]") {
  using passepartout::preprint;
  using passepartout::print_sexp_ascii;
  using passepartout::ValueAccess;
  const auto ascii = [](const Value& value, std::span<const std::string_view> drop = {}) {
    std::string out = "\xC3\xA9";  // what was there before is not looked at
    const bool all_ascii = print_sexp_ascii(value, out, drop);
    std::string expected = "\xC3\xA9";
    print_sexp(value, expected, drop);
    CHECK(out == expected);  // the same text as print_sexp
    return all_ascii;
  };
  const std::string long_plain(40, 'x');
  CHECK(ascii(*read_sexp("(:TYPE :REQUEST :TEXT \"plain\" :N 12 :F 1.5 :S SYM :T T :NIL NIL)")));
  CHECK(ascii(Value::list({Value::string(long_plain), Value::string("with \"quotes\" and \\")})));
  CHECK(ascii(Value::keyword("lower-case")));  // written in bars, still ASCII
  CHECK(ascii(Value()));

  // Non-ASCII text in every place text is written: short and long strings,
  // strings with escapes, keywords and symbols, a preprinted list, deep lists.
  CHECK_FALSE(ascii(Value::string("caf\xC3\xA9")));
  CHECK_FALSE(ascii(Value::list({Value::string(long_plain + "\xC3\xA9")})));
  CHECK_FALSE(ascii(Value::list({Value::string(long_plain + "\xC3\xA9" + long_plain)})));
  CHECK_FALSE(ascii(Value::list({Value::string("\"quoted\" caf\xC3\xA9")})));
  CHECK_FALSE(ascii(Value::list({Value::keyword("CAF\xC3\x89")})));
  CHECK_FALSE(ascii(Value::list({Value::symbol("CAF\xC3\x89")})));
  const Value accented = preprint(Value::list({Value::string("\xC3\xA9t\xC3\xA9")}));
  CHECK_FALSE(ascii(Value::list({Value::keyword("A"), accented})));
  CHECK(ascii(Value::list({Value::keyword("A"), preprint(*read_sexp("(:GATE \"g\")"))})));
  const std::string_view drop[] = {"SOCKET"};
  CHECK_FALSE(ascii(Value::list({Value::keyword("A"), accented}), drop));
  // At every offset of strings short and long, with and without an escape.
  for (std::size_t size = 2; size <= 50; ++size) {
    for (std::size_t at = 0; at + 2 <= size; ++at) {
      std::string text(size, 'a');
      text.replace(at, 2, "\xC3\xA9");
      INFO("size " << size << ", at " << at);
      CHECK_FALSE(ascii(Value::list({Value::string(text)})));
      CHECK_FALSE(ascii(Value::list({Value::string(text + "\"")})));
      CHECK(ascii(Value::list({Value::string(std::string(size, 'a'))})));
    }
  }
  Value deep = Value::string("\xC3\xA9");
  for (int i = 0; i < 200; ++i) deep = Value::list({deep});
  CHECK_FALSE(ascii(deep));
  Value deep_plain = Value::string("e");
  for (int i = 0; i < 200; ++i) deep_plain = Value::list({deep_plain});
  CHECK(ascii(deep_plain));
}

TEST_CASE("a quote or backslash is escaped, and read back, at every offset of a string", "[value][printer][reader]") {
  // Strings are scanned 16, then 8, then 1 byte at a time: a special byte at
  // each offset of strings up to 50 bytes lands in every step, and a
  // non-ASCII byte before it must not hide it.
  for (const char special : {'"', '\\'}) {
    for (std::size_t size = 1; size <= 50; ++size) {
      for (std::size_t at = 0; at < size; ++at) {
        std::string text(size, 'a');
        text[at] = special;
        if (at >= 2) text.replace(0, 2, "\xC3\xA9");
        std::string expected = "\"";
        for (const char c : text) {
          if (c == '"' || c == '\\') expected.push_back('\\');
          expected.push_back(c);
        }
        expected.push_back('"');
        const std::string printed = to_sexp(Value::string(text));
        REQUIRE(printed == expected);
        auto read = read_sexp(printed);
        REQUIRE(read.has_value());
        REQUIRE(*read == Value::string(text));
      }
    }
  }
}

TEST_CASE("the reader finds a string's end past long plain runs, and a trailing backslash leaves it open",
          "[value][reader]") {
  for (std::size_t size = 0; size <= 40; ++size) {
    const std::string plain(size, 'b');
    auto read = read_sexp("(\"" + plain + "\" :NEXT)");
    REQUIRE(read.has_value());
    CHECK(*read == Value::list({Value::string(plain), Value::keyword("NEXT")}));
    CHECK_FALSE(read_sexp("\"" + plain).has_value());
    CHECK_FALSE(read_sexp("\"" + plain + "\\").has_value());
    CHECK_FALSE(read_sexp("\"" + plain + "\\\"").has_value());  // the quote is escaped
  }
}

TEST_CASE("a keyword is the same keyword with or without the plain-name hint", "[sexp][print][value]") {
  using passepartout::Kind;
  using passepartout::ValueAccess;
  using namespace passepartout::key_literals;
  // The hint lets the printer skip its check; nothing else may see it.
  const auto made = [](std::string_view name, bool plain) {
    Value keyword;
    std::memcpy(ValueAccess::inline_bytes(keyword), name.data(), name.size());
    if (plain) {
      ValueAccess::set_plain_keyword(keyword, name.size());
    } else {
      ValueAccess::set_inline_text(keyword, Kind::keyword, name.size());
    }
    return keyword;
  };
  for (const std::string_view name : {"A", "PAYLOAD", "RULE-COUNT", "GATE-TRACE-123", "X9"}) {
    INFO(name);
    const Value hinted = made(name, true);
    const Value bare = made(name, false);
    CHECK(ValueAccess::is_plain_keyword(hinted));
    CHECK_FALSE(ValueAccess::is_plain_keyword(bare));
    CHECK(hinted == bare);
    CHECK(hinted.text() == name);
    CHECK(bare.text() == name);
    CHECK(to_sexp(hinted) == ":" + std::string(name));
    CHECK(to_sexp(bare) == ":" + std::string(name));
    CHECK(hinted.is_keyword(name));
    CHECK(bare.is_keyword(name));
    // Found by a name at run time and by a key fixed at compile time, either way round.
    const Value list = Value::list({bare, Value::integer(1), hinted, Value::integer(2)});
    CHECK(list.get(name) == &list.items()[1]);
    const Value other = Value::list({hinted, Value::integer(3)});
    CHECK(other.get(name) == &other.items()[1]);
  }
  const Value payload = made("PAYLOAD", false);
  CHECK(payload.is_keyword("PAYLOAD"_key));
  CHECK(Value::list({payload, Value::integer(1)}).at("PAYLOAD"_key) == Value::integer(1));
  CHECK(Value::list({made("PAYLOAD", true), Value::integer(1)}).at("PAYLOAD"_key) == Value::integer(1));

  // Who sets it: the reader, Value::keyword and compile-time keys, for names
  // of 'A'-'Z', '0'-'9' and '-' only.
  for (const std::string_view text : {":type", ":TYPE", ":rule-count", ":X-1", "(:a :B)"}) {
    INFO(text);
    auto read = read_sexp(text);
    REQUIRE(read.has_value());
    const Value& keyword = read->is_list() ? read->items()[0] : *read;
    CHECK(ValueAccess::is_plain_keyword(keyword));
  }
  for (const std::string_view text : {":foo.bar", ":A*", ":|a b|", ":ÉTÉ", ":A_B"}) {
    INFO(text);
    auto read = read_sexp(text);
    REQUIRE(read.has_value());
    CHECK_FALSE(ValueAccess::is_plain_keyword(*read));
    CHECK(to_sexp(*read) == to_sexp(Value::keyword(read->text())));  // printed by the checking path
  }
  CHECK(ValueAccess::is_plain_keyword(Value::keyword("session-id")));
  CHECK(ValueAccess::is_plain_keyword(Value::keyword("SESSION-ID"_key)));
  CHECK_FALSE(ValueAccess::is_plain_keyword(Value::keyword("a.b")));
  CHECK_FALSE(ValueAccess::is_plain_keyword(Value::keyword("A-VERY-LONG-KEYWORD-NAME")));  // not inline
  CHECK(to_sexp(Value::keyword("a.b")) == ":A.B");
  CHECK(to_sexp(Value::keyword("|")) == ":|\\||");
}

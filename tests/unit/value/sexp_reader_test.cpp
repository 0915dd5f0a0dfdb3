// Tests for read_sexp: every datum the wire carries, every reader macro it
// refuses, the limits, and the exact error messages with their byte offsets.
#include <catch2/catch.hpp>

#include <string>

#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

using passepartout::ErrorCode;
using passepartout::Kind;
using passepartout::read_sexp;
using passepartout::read_sexp_prefix;
using passepartout::ReaderLimits;
using passepartout::to_sexp;
using passepartout::Utf8;
using passepartout::Value;

namespace {

Value read_ok(std::string_view text) {
  auto result = read_sexp(text);
  INFO("reading: " << text);
  if (!result) INFO("error: " << result.error().message);
  REQUIRE(result.has_value());
  return *result;
}

std::string reprint(std::string_view text) { return to_sexp(read_ok(text)); }

std::string error_of(std::string_view text, const ReaderLimits& limits = {}) {
  auto result = read_sexp(text, limits);
  INFO("reading: " << text);
  REQUIRE_FALSE(result.has_value());
  return result.error().message;
}

ErrorCode code_of(std::string_view text, const ReaderLimits& limits = {}) {
  auto result = read_sexp(text, limits);
  REQUIRE_FALSE(result.has_value());
  return result.error().code;
}

}  // namespace

TEST_CASE("reader reads the framing test message into upper-case keywords", "[value][reader]") {
  const std::string printed = reprint("(:type :EVENT :payload (:action :handshake))");
  CHECK(printed == "(:TYPE :EVENT :PAYLOAD (:ACTION :HANDSHAKE))");
  CHECK(printed.size() == 0x2C);
}

TEST_CASE("reader reads a signal into a plist", "[value][reader]") {
  const Value v = read_ok(R"((:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :USER-INPUT :TEXT "hi")))");
  CHECK(v.at("type") == Value::keyword("EVENT"));
  CHECK(v.path({"meta", "source"}) == Value::keyword("TUI"));
  CHECK(v.path({"payload", "text"}) == Value::string("hi"));
}

TEST_CASE("reader rejects #. read-time evaluation with its byte offset", "[value][reader]") {
  // test-read-eval-rce-blocked: nothing is evaluated, the whole read fails.
  CHECK(error_of("(#.(setf x :PWNED))") == "byte 1: found '#.', but '#' reader macros are not supported");
  CHECK(code_of("(#.(setf x :PWNED))") == ErrorCode::invalid_input);
}

TEST_CASE("reader rejects every # dispatch macro", "[value][reader]") {
  CHECK(error_of("#+sbcl x") == "byte 0: found '#+', but '#' reader macros are not supported");
  CHECK(error_of("(a #-sbcl x)") == "byte 3: found '#-', but '#' reader macros are not supported");
  CHECK(error_of(R"((#\x))") == "byte 1: found '#\\', but '#' reader macros are not supported");
  CHECK(error_of("#(1 2)") == "byte 0: found '#(', but '#' reader macros are not supported");
  CHECK(error_of("(:a #:foo)") == "byte 4: found '#:', but '#' reader macros are not supported");
  CHECK(error_of("#'car") == "byte 0: found '#'', but '#' reader macros are not supported");
  CHECK(error_of("#") == "byte 0: found '#', but '#' reader macros are not supported");
  CHECK(error_of("# ") == "byte 0: found '#', but '#' reader macros are not supported");
}

TEST_CASE("reader keeps '#' inside a symbol, where it is no dispatch", "[value][reader]") {
  CHECK(read_ok("a#b") == Value::symbol("A#B"));
}

TEST_CASE("reader rejects quote, backquote and comma", "[value][reader]") {
  CHECK(error_of("'x") == "byte 0: found a quote ('), but reader macros are not supported");
  CHECK(error_of("(a `(b ,c))") == "byte 3: found a backquote (`), but reader macros are not supported");
  CHECK(error_of("(b ,c)") == "byte 3: found a comma (,), but reader macros are not supported");
  CHECK(error_of("(a')") == "byte 2: found a quote ('), but reader macros are not supported");
}

TEST_CASE("reader rejects dotted pairs", "[value][reader]") {
  CHECK(error_of("(a . b)") == "byte 3: found a dotted pair, but only proper lists are supported");
  CHECK(error_of(".") == "byte 0: found a dotted pair, but only proper lists are supported");
  CHECK(error_of("(a ...)") == "byte 3: found the token '...', but a token of only dots is not allowed");
}

TEST_CASE("reader reads NIL, () and T in any case", "[value][reader]") {
  CHECK(read_ok("NIL").is_nil());
  CHECK(read_ok("nil").is_nil());
  CHECK(read_ok("Nil").is_nil());
  CHECK(read_ok("()").is_nil());
  CHECK(read_ok("(  )").is_nil());
  CHECK(read_ok("T").is_true());
  CHECK(read_ok("t").is_true());
  CHECK(reprint("(nil () t)") == "(NIL NIL T)");
}

TEST_CASE("reader reads integers with signs and a trailing dot", "[value][reader]") {
  CHECK(read_ok("-12") == Value::integer(-12));
  CHECK(read_ok("+7") == Value::integer(7));
  CHECK(read_ok("12.") == Value::integer(12));
  CHECK(read_ok("-12.") == Value::integer(-12));
  CHECK(read_ok("0") == Value::integer(0));
  CHECK(read_ok("007") == Value::integer(7));
  CHECK(read_ok("9223372036854775807") == Value::integer(INT64_MAX));
  CHECK(read_ok("-9223372036854775808") == Value::integer(INT64_MIN));
}

TEST_CASE("reader rejects integers that overflow 64 bits", "[value][reader]") {
  CHECK(error_of("9223372036854775808") ==
        "byte 0: found the integer '9223372036854775808', which does not fit in 64 bits");
  CHECK(error_of("(1 -9223372036854775809)") ==
        "byte 3: found the integer '-9223372036854775809', which does not fit in 64 bits");
  CHECK(error_of("123456789012345678901234567890") ==
        "byte 0: found the integer '123456789012345678901234567890', which does not fit in 64 bits");
}

TEST_CASE("reader reads floats with every exponent marker", "[value][reader]") {
  CHECK(read_ok("1.5") == Value::real(1.5));
  CHECK(read_ok("-0.5") == Value::real(-0.5));
  CHECK(read_ok(".5") == Value::real(0.5));
  CHECK(read_ok("-.5") == Value::real(-0.5));
  CHECK(read_ok("+.5") == Value::real(0.5));
  CHECK(read_ok("1e10") == Value::real(1e10));
  CHECK(read_ok("1E10") == Value::real(1e10));
  CHECK(read_ok("1.5d0") == Value::real(1.5));
  CHECK(read_ok("1.5D3") == Value::real(1500.0));
  CHECK(read_ok("2.0f0") == Value::real(2.0));
  CHECK(read_ok("2.5s-1") == Value::real(0.25));
  CHECK(read_ok("2.5L+1") == Value::real(25.0));
  CHECK(read_ok("1.e2") == Value::real(100.0));
  CHECK(read_ok("0.1d0") == Value::real(0.1));
  CHECK(read_ok("1.7976931348623157d308") == Value::real(1.7976931348623157e308));
  CHECK(read_ok("1.5").kind() == Kind::real);
}

TEST_CASE("reader rejects floats outside the double range", "[value][reader]") {
  CHECK(error_of("1d400") == "byte 0: found the float '1d400', which is out of the double range");
  CHECK(code_of("1d400") == ErrorCode::invalid_input);
}

TEST_CASE("reader reads ratios as floats, or integers when they divide evenly", "[value][reader]") {
  CHECK(read_ok("1/2") == Value::real(0.5));
  CHECK(read_ok("-3/4") == Value::real(-0.75));
  CHECK(read_ok("4/2") == Value::integer(2));
  CHECK(read_ok("0/5") == Value::integer(0));
  CHECK(error_of("1/0") == "byte 0: found the ratio '1/0', which divides by zero");
  CHECK(error_of("1/99999999999999999999") ==
        "byte 0: found the ratio '1/99999999999999999999', whose parts do not fit in 64 bits");
}

TEST_CASE("reader treats number-like tokens that are not numbers as symbols", "[value][reader]") {
  CHECK(read_ok("1+") == Value::symbol("1+"));
  CHECK(read_ok("-") == Value::symbol("-"));
  CHECK(read_ok("+") == Value::symbol("+"));
  CHECK(read_ok("1.5x") == Value::symbol("1.5X"));
  CHECK(read_ok("1/") == Value::symbol("1/"));
  CHECK(read_ok("1e") == Value::symbol("1E"));
  CHECK(read_ok("..a") == Value::symbol("..A"));
}

TEST_CASE("reader reads strings with backslash escapes and raw newlines", "[value][reader]") {
  CHECK(read_ok(R"("hello")") == Value::string("hello"));
  CHECK(read_ok(R"("")") == Value::string(""));
  CHECK(read_ok(R"("a \"quoted\" word")") == Value::string("a \"quoted\" word"));
  CHECK(read_ok(R"("back\\slash")") == Value::string("back\\slash"));
  CHECK(read_ok(R"("\x\n")") == Value::string("xn"));  // Lisp: \x reads as x
  CHECK(read_ok("\"line one\nline two\tTabbed\"") == Value::string("line one\nline two\tTabbed"));
  CHECK(read_ok(R"("a string long enough to be stored on the heap \"with\" escapes")") ==
        Value::string("a string long enough to be stored on the heap \"with\" escapes"));
  CHECK(read_ok(R"("semi ; colon ( and ) parens")") == Value::string("semi ; colon ( and ) parens"));
}

TEST_CASE("reader reports an unterminated string with where it started", "[value][reader]") {
  CHECK(error_of(R"((:a "abc))") == "byte 9: unterminated string (started at byte 4)");
  CHECK(error_of(R"("ends in a backslash\)") == "byte 21: unterminated string (started at byte 0)");
}

TEST_CASE("reader keeps non-ASCII text intact", "[value][reader]") {
  CHECK(read_ok(R"("naïve café")") == Value::string("naïve café"));
  CHECK(read_ok(R"("emoji 😀 日本語")") == Value::string("emoji 😀 日本語"));
  CHECK(reprint(R"((:TEXT "naïve café 😀"))") == R"((:TEXT "naïve café 😀"))");
}

TEST_CASE("reader upper-cases keywords, even inside bars", "[value][reader]") {
  CHECK(read_ok(":name") == Value::keyword("NAME"));
  CHECK(read_ok(":name").text() == "NAME");
  CHECK(read_ok(":|Mixed Case|").text() == "MIXED CASE");
  CHECK(read_ok(":a|b c|d").text() == "AB CD");
  CHECK(read_ok(":\\a").text() == "A");
  CHECK(read_ok(":||").text().empty());
  CHECK(read_ok(":12").text() == "12");
  CHECK(read_ok(":12").is_keyword());
  CHECK(read_ok(":a-very-long-keyword-name").text() == "A-VERY-LONG-KEYWORD-NAME");
}

TEST_CASE("reader upper-cases bare symbols and keeps escaped characters", "[value][reader]") {
  CHECK(read_ok("foo") == Value::symbol("FOO"));
  CHECK(read_ok("|foo|") == Value::symbol("foo"));
  CHECK(read_ok("|Mixed Case|") == Value::symbol("Mixed Case"));
  CHECK(read_ok("ab|cD|ef") == Value::symbol("ABcDEF"));
  CHECK(read_ok("f\\oo") == Value::symbol("FoO"));
  CHECK(read_ok("|a\\|b|") == Value::symbol("a|b"));
  CHECK(read_ok("|a\\\\b|") == Value::symbol("a\\b"));
  CHECK(read_ok("||") == Value::symbol(""));
  CHECK(read_ok("|12|") == Value::symbol("12"));
  CHECK(read_ok("|NIL|") == Value::symbol("NIL"));
  CHECK(read_ok("|a:b|") == Value::symbol("a:b"));
  CHECK(read_ok("a\\:b") == Value::symbol("A:B"));
  CHECK(read_ok("|.|") == Value::symbol("."));
  CHECK(read_ok("café") == Value::symbol("CAFé"));
}

TEST_CASE("reader rejects package prefixes", "[value][reader]") {
  CHECK(error_of("cl-user::x") ==
        "byte 0: found the symbol 'cl-user::x' with a package marker, but package prefixes are not supported");
  CHECK(error_of("(a foo:bar)") ==
        "byte 3: found the symbol 'foo:bar' with a package marker, but package prefixes are not supported");
  CHECK(error_of("::x") ==
        "byte 0: found the symbol '::x' with a package marker, but package prefixes are not supported");
  CHECK(error_of("|foo|:bar") ==
        "byte 0: found the symbol '|foo|:bar' with a package marker, but package prefixes are not supported");
  CHECK(error_of(":a:b") ==
        "byte 0: found the symbol ':a:b' with a package marker, but package prefixes are not supported");
}

TEST_CASE("reader rejects a lone colon", "[value][reader]") {
  CHECK(error_of(":") == "byte 0: found ':' alone, expected a keyword name after it");
  CHECK(error_of("(:a : b)") == "byte 4: found ':' alone, expected a keyword name after it");
}

TEST_CASE("reader reports unterminated escapes", "[value][reader]") {
  CHECK(error_of("(|abc)") == "byte 6: unterminated |...| (started at byte 1)");
  CHECK(error_of("abc\\") == "byte 3: input ends after '\\', expected a character to escape");
}

TEST_CASE("reader reports unbalanced parentheses", "[value][reader]") {
  CHECK(error_of("(a (b c)") == "byte 8: unterminated list (started at byte 0), expected ')'");
  CHECK(error_of("((a) (b") == "byte 7: unterminated list (started at byte 5), expected ')'");
  CHECK(error_of(")") == "byte 0: found ')' with no list open");
  CHECK(error_of("(a))") == "byte 3: unexpected text after the datum");
}

TEST_CASE("reader needs exactly one datum", "[value][reader]") {
  CHECK(error_of("") == "byte 0: end of input, expected a datum");
  CHECK(error_of("   ; only a comment") == "byte 19: end of input, expected a datum");
  CHECK(error_of("(:A 1) (:B 2)") == "byte 7: unexpected text after the datum");
  CHECK(error_of("42 x") == "byte 3: unexpected text after the datum");
}

TEST_CASE("reader skips whitespace and comments around and inside the datum", "[value][reader]") {
  CHECK(read_ok("  \t\r\n(a ; comment (with parens\n b)  ; trailing\n") ==
        Value::list({Value::symbol("A"), Value::symbol("B")}));
  CHECK(read_ok("; leading\n42 ; trailing") == Value::integer(42));
  CHECK(read_ok("(a\fb)") == Value::list({Value::symbol("A"), Value::symbol("B")}));
}

TEST_CASE("reader terminates tokens at parentheses and quotes", "[value][reader]") {
  CHECK(reprint(R"((a(b)c"d"e))") == R"((A (B) C "d" E))");
}

TEST_CASE("reader reads names and integers alike at the inline-storage boundaries", "[value][reader]") {
  // Short plain tokens take a faster path than long or escaped ones; both must agree.
  CHECK(read_ok(":abcdefghijklmn").text() == "ABCDEFGHIJKLMN");    // 14 bytes, inline
  CHECK(read_ok(":abcdefghijklmno").text() == "ABCDEFGHIJKLMNO");  // 15 bytes, on the heap
  CHECK(read_ok("abcdefghijklmn") == Value::symbol("ABCDEFGHIJKLMN"));
  CHECK(read_ok("abcdefghijklmno") == Value::symbol("ABCDEFGHIJKLMNO"));
  CHECK(read_ok("(:a)") == Value::list({Value::keyword("A")}));
  CHECK(read_ok(":a") == Value::keyword("A"));
  CHECK(read_ok("(nil t)") == Value::list({Value(), Value::t()}));
  CHECK(read_ok("(nIl)") == Value::list({Value()}));
  CHECK(read_ok("(ti nils)") == Value::list({Value::symbol("TI"), Value::symbol("NILS")}));
  CHECK(read_ok("123456789012345678") == Value::integer(123456789012345678));
  CHECK(read_ok("1234567890123456789") == Value::integer(1234567890123456789));
  CHECK(read_ok("(-5 +6 0)") == Value::list({Value::integer(-5), Value::integer(6), Value::integer(0)}));
  CHECK(read_ok("(1 2)") == Value::list({Value::integer(1), Value::integer(2)}));
  CHECK(read_ok("(7)") == Value::list({Value::integer(7)}));
  CHECK(read_ok(R"((:k\ey :a|b|))") == Value::list({Value::keyword("KEY"), Value::keyword("AB")}));
}

TEST_CASE("reader prefix reads the first datum and reports what it consumed", "[value][reader]") {
  std::size_t consumed = 0;
  auto first = read_sexp_prefix("  (:A 1) (:B 2)", &consumed);
  REQUIRE(first.has_value());
  CHECK(to_sexp(*first) == "(:A 1)");
  CHECK(consumed == 8);

  auto token = read_sexp_prefix("42 trailing ) garbage (", &consumed);
  REQUIRE(token.has_value());
  CHECK(*token == Value::integer(42));
  CHECK(consumed == 2);

  auto string = read_sexp_prefix(R"("s"x)", &consumed);
  REQUIRE(string.has_value());
  CHECK(consumed == 3);

  auto no_count = read_sexp_prefix("x y", nullptr);
  CHECK(no_count.has_value());
}

TEST_CASE("reader prefix still validates the whole input", "[value][reader]") {
  std::size_t consumed = 0;
  auto result = read_sexp_prefix("(:A 1) \xFF", &consumed);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().message == "byte 7: invalid UTF-8 sequence starting with 0xFF");
  auto empty = read_sexp_prefix("  ", &consumed);
  REQUIRE_FALSE(empty.has_value());
  CHECK(empty.error().message == "byte 2: end of input, expected a datum");
}

TEST_CASE("reader prefix of text the caller checked reads the same without scanning it again", "[value][reader]") {
  for (const std::string_view text : {"(:A 1) (:B 2)", "(:TEXT \"caf\xC3\xA9 \xE2\x9C\x93\")", "  foo ", "\"x\""}) {
    INFO(text);
    std::size_t unchecked_consumed = 0;
    std::size_t checked_consumed = 0;
    auto unchecked = read_sexp_prefix(text, &unchecked_consumed);
    auto checked = read_sexp_prefix(text, &checked_consumed, ReaderLimits{}, Utf8::checked);
    REQUIRE(unchecked.has_value());
    REQUIRE(checked.has_value());
    CHECK(*checked == *unchecked);
    CHECK(checked_consumed == unchecked_consumed);
  }
  // The check skipped is the caller's to make: unchecked, the same bytes are refused.
  CHECK_FALSE(read_sexp_prefix("(:A \"\xFF\")", nullptr).has_value());
}

TEST_CASE("reader reads keywords of every length the same with input after them or not", "[value][reader]") {
  const std::string names = "ABCDEFGHIJKLMNOPQR";
  for (std::size_t length = 1; length <= names.size(); ++length) {
    for (const std::string_view after : {" 1)", ")", " (:X 1 :Y 2 :Z 3 :W 4 :V 5))", "\t\"a long string after it\")"}) {
      std::string name = names.substr(0, length);
      name[length / 2] = length % 3 == 0 ? '-' : static_cast<char>('0' + length % 10);  // digits and '-' are plain too
      const std::string text = "(:" + name + std::string(after);
      INFO(text);
      auto read = read_sexp(text);
      REQUIRE(read.has_value());
      CHECK(read->items()[0] == Value::keyword(name));
      CHECK(read->items()[0].text() == name);
      // Lower case reads as upper case, whichever way it is read.
      std::string lower = name;
      for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      auto folded = read_sexp("(:" + lower + std::string(after));
      REQUIRE(folded.has_value());
      CHECK(folded->items()[0] == Value::keyword(name));
    }
  }
  // A keyword glued to what cannot end a token is read whole (keywords are upper-cased, bars or not).
  CHECK(to_sexp(*read_sexp("(:AB|C d|E 1 2 3 4 5 6 7 8 9)")) == "(:|ABC DE| 1 2 3 4 5 6 7 8 9)");
  CHECK(to_sexp(*read_sexp("(:ABC\xC3\xA9 1 2 3 4 5 6 7 8 9)")) == "(:|ABC\xC3\xA9| 1 2 3 4 5 6 7 8 9)");
}

TEST_CASE("reader rejects input over the size limit before parsing it", "[value][reader]") {
  ReaderLimits limits;
  limits.max_bytes = 1048576;
  const std::string big(2000000, '(');
  CHECK(error_of(big, limits) == "byte 0: input is 2000000 bytes, the limit is 1048576");
  CHECK(code_of(big, limits) == ErrorCode::limit_exceeded);

  limits.max_bytes = 5;
  CHECK(read_sexp("(a b)", limits).has_value());
  CHECK(error_of("(a b )", limits) == "byte 0: input is 6 bytes, the limit is 5");
}

TEST_CASE("reader rejects nesting deeper than the limit", "[value][reader]") {
  const std::string ok = std::string(256, '(') + std::string(256, ')');
  CHECK(read_sexp(ok).has_value());
  const std::string deep = std::string(40, ' ') + std::string(257, '(') + std::string(257, ')');
  CHECK(error_of(deep) == "byte 296: nesting deeper than 256");
  CHECK(code_of(deep) == ErrorCode::limit_exceeded);

  ReaderLimits limits;
  limits.max_depth = 2;
  CHECK(read_sexp("(a (b))", limits).has_value());
  CHECK(error_of("(a (b (c)))", limits) == "byte 6: nesting deeper than 2");
  CHECK_FALSE(read_sexp("(a) (b)", limits).has_value());
}

TEST_CASE("reader rejects invalid UTF-8 with its byte offset", "[value][reader]") {
  CHECK(error_of("(:TEXT \"caf\xC3\")") == "byte 11: invalid UTF-8 sequence starting with 0xC3");
  CHECK(error_of("\xED\xA0\x80") == "byte 0: invalid UTF-8 sequence starting with 0xED");
  CHECK(error_of("(a \xC0\x80)") == "byte 3: invalid UTF-8 sequence starting with 0xC0");
  CHECK(code_of("\xFF") == ErrorCode::invalid_input);
}

TEST_CASE("reader never mangles odd-length lists", "[value][reader]") {
  // The Lisp sanitiser padded odd lists with NIL; reading and printing must not.
  CHECK(reprint("(:X (1 2 3))") == "(:X (1 2 3))");
  CHECK(reprint(R"(("a" "b" "c"))") == R"(("a" "b" "c"))");
}

TEST_CASE("reader shortens long tokens in error messages", "[value][reader]") {
  const std::string token = std::string(60, '9');
  CHECK(error_of(token) ==
        "byte 0: found the integer '" + std::string(40, '9') + "...', which does not fit in 64 bits");
}

TEST_CASE("reader can be used again after an error", "[value][reader]") {
  CHECK_FALSE(read_sexp("((a b) (c #.d))").has_value());
  CHECK(reprint("((a b) (c d))") == "((A B) (C D))");
}

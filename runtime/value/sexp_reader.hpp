// read_sexp: the safe s-expression reader for text from the wire, the LLM and
// files. Nothing is evaluated and nothing is interned.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

// Bounds checked before anything is allocated for the datum.
struct ReaderLimits {
  std::size_t max_bytes = 16 * 1024 * 1024;  // whole input, checked before parsing
  std::size_t max_depth = 256;               // nested lists; the top-level list is depth 1
};

// Reads exactly one datum from `text`: whitespace and `;` comments may
// surround it, anything else after it is an error.
//
// The subset of the Common Lisp reader a Lisp peer's printer produces:
//   NIL, () (any case)          -> NIL           T (any case) -> T
//   -12 +7 12.                  -> integer       (int64; overflow is an error)
//   1.5 .5 1e10 1.5d0 2.0f0     -> float         (exponent markers e s f d l, any case;
//                                                  every float is read as a double)
//   1/2                         -> float 0.5     (a ratio that divides evenly, 4/2,
//                                                  is the integer 2, as in Lisp)
//   "a \"b\" \\"                -> string        (backslash escapes the next character;
//                                                  raw newlines and tabs are kept)
//   :name :|Mixed Case|         -> keyword       (always upper-cased)
//   foo |Foo| f\oo              -> symbol        (upper-cased except inside |...| or
//                                                  after a backslash)
//   (a b c)                     -> list
// Rejected with an error naming the byte offset: invalid UTF-8, input longer
// than max_bytes (before parsing), nesting deeper than max_depth, every '#'
// dispatch (#. #+ #- #\x #( #: ...), quote, backquote and comma, dotted pairs,
// package prefixes (cl-user::x, foo:bar), a lone ':', tokens of only dots.
// Messages read `byte <offset>: <what was found, what was expected>`; the code
// is limit_exceeded for size and depth, invalid_input otherwise.
//
// Thread-safe; uses per-thread scratch space.
Result<Value> read_sexp(std::string_view text, const ReaderLimits& limits = {});

// Whether the caller has already checked that the whole text is valid UTF-8
// (a frame decoder that counted its code points, a parser that repaired it):
// the reader then does not scan it again.
enum class Utf8 : bool { unchecked, checked };

// Reads the first datum of `text` and ignores what follows it, as a Lisp peer
// does; `*consumed` (when not null) receives the offset just past the datum.
// The whole of `text` must still be valid UTF-8 and within max_bytes.
Result<Value> read_sexp_prefix(std::string_view text, std::size_t* consumed, const ReaderLimits& limits = {},
                               Utf8 utf8 = Utf8::unchecked);

}  // namespace passepartout

// print_sexp: Values as the single-line s-expressions a Lisp peer reads back
// (the payload of a wire frame).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "value/value.hpp"

namespace passepartout {

// Appends `value` to `out`: no pretty-printing, one space between elements.
//   NIL, T; integers in decimal;
//   strings in double quotes, escaping only `"` and `\` (newlines, tabs raw);
//   keywords `:NAME`, symbols `NAME`, written `:|...|` / `|...|` (with `|`
//     and `\` escaped) when the bare form would not read back identically:
//     empty names, lower-case letters, non-ASCII characters, whitespace, control
//     characters, ( ) " ; ' ` , | \ :, a leading '#', only dots, and for
//     symbols a name that reads as a number, NIL or T;
//   floats with the shortest digits that read back as the same double, in
//     positional form for exponents -3..6 and as mantissa and exponent
//     otherwise, always with a '.'. A value exactly representable as a single
//     float prints with no marker or 'e' (`1.5`, `100.0`, `1.0e7`), which a
//     Lisp peer reads as a single float of the same value; any other value
//     uses the double marker 'd' (`0.1d0`, `1.2345678901234d20`, `1.0d20`) so
//     the peer keeps double precision. NaN and infinities print as NIL: Lisp
//     has no portable syntax for them.
// For any Value v that read_sexp produces, read_sexp(to_sexp(v)) == v.
// Lists nested deeper than a few dozen levels continue on a heap stack, so no
// depth exhausts the call stack. Safe to call from any number of threads at once.
void print_sexp(const Value& value, std::string& out);

// print_sexp, leaving out of every property list (a list of even length with a
// keyword at every even position), at any depth, each pair whose key is one of
// `drop_keys` (upper-case names without ':'); a property list left empty
// prints as NIL. Other lists print whole. The same text as printing a copy with
// those pairs removed, without making the copy.
void print_sexp(const Value& value, std::string& out, std::span<const std::string_view> drop_keys);

// print_sexp with `drop_keys` (none when empty), telling whether every byte
// it appended is ASCII: then the text is valid UTF-8 with one code point per
// byte, and a framer need not scan it. False means some byte may not be.
bool print_sexp_ascii(const Value& value, std::string& out, std::span<const std::string_view> drop_keys);

// The printed form of `value` as a new string.
std::string to_sexp(const Value& value);

// A copy of `value` that prints as it prints now, by copying that text: for
// constant lists printed again and again (a snapshot's gate trace in every
// reply). It costs the text once more in memory, held until the last copy of
// the result goes. Equal to `value`; lists made from it (with(), list())
// are ordinary lists that print their preprinted elements by copying. A
// printer leaving keys out uses the text unless one of those keys may occur
// in the list. Other kinds come back as they are.
Value preprint(const Value& value);
// An equal preprinted list in a node of its own (a reference count of its
// own), with the same items, text and keyword marks as `preprinted`, which
// preprint() made: for copies that different threads use without printing
// them again. Anything that is not a preprinted list comes back as it is.
Value preprinted_copy(const Value& preprinted);

}  // namespace passepartout

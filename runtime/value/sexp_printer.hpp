// print_sexp: Values as the single-line s-expressions a Lisp peer reads back
// (the payload of a wire frame).
#pragma once

#include <string>

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

// The printed form of `value` as a new string.
std::string to_sexp(const Value& value);

}  // namespace passepartout

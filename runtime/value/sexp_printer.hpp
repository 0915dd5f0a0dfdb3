// print_sexp: Values as the single-line s-expressions a Lisp peer reads back
// (the payload of a wire frame).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "value/value.hpp"

namespace passepartout {

// Keys to leave out of printed property lists (see print_sexp below), prepared
// once: preparing costs about what printing a dozen atoms does, so a caller
// that prints with the same keys again and again keeps one. `names`
// (upper-case, without ':') must outlive the filter. Immutable: any number of
// threads may print with one.
class KeyFilter {
 public:
  KeyFilter() noexcept = default;  // leaves nothing out
  explicit KeyFilter(std::span<const std::string_view> names) noexcept;

  bool empty() const noexcept { return names_.empty(); }
  // Whether `key` is a keyword whose name is one of the names. A bit per
  // name length passes over almost every key without looking at its text;
  // names that fit inline are then compared as two words, longer ones as text.
  bool contains(const Value& key) const noexcept;
  // detail::keyword_mark() of every name: a preprinted list none of whose
  // keywords has one of these bits set loses nothing.
  std::uint64_t marks() const noexcept { return marks_; }

 private:
  friend struct KeyFilterProbe;  // contains(), inline in the printer's loop

  struct Short {
    std::size_t size;
    std::uint64_t low;   // bytes 0..7 of the name, zero-padded
    std::uint64_t high;  // bytes 8..13
  };
  static constexpr std::size_t kMaxShort = 4;
  std::span<const std::string_view> names_;
  std::uint64_t marks_ = 0;
  std::uint64_t sizes_ = 0;  // bit n: a name of n bytes (n < 64)
  std::array<Short, kMaxShort> short_{};
  std::size_t short_count_ = 0;
  bool all_short_ = true;
  bool has_long_ = false;  // a name of 64 bytes or more, which sizes_ cannot mark
};

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
// The same with the keys prepared.
bool print_sexp_ascii(const Value& value, std::string& out, const KeyFilter& drop_keys);

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

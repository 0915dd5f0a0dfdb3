// passepartout/value.hpp: the values a skill reads and builds, seen through the host table.
// ValueRef is a borrowed view of a host-owned value; Context builds new values in a hook's call.
//
// Every value a skill sees (signal, action, config, state) is owned by the host
// and reached only through the `pp_host_api` it was given: a ValueRef holds the
// table, the hook's `pp_call` and the opaque handle, and copies nothing. Reading
// never fails and never allocates; a missing value reads as NIL. Building goes
// through the host into the current call and throws when the host refuses.
//
// Header-only, C++17 or later; includes only the standard library and abi.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "passepartout/abi.h"
#include "passepartout/detail/text.hpp"

namespace passepartout {

/// The kind of a value; mirrors PP_KIND_* (a kind the host adds later reads as nil).
enum class ValueKind : std::int32_t {
  nil = PP_KIND_NIL,          ///< NIL: false and the empty list
  t = PP_KIND_T,              ///< T: true
  integer = PP_KIND_INTEGER,  ///< signed 64-bit integer
  real = PP_KIND_FLOAT,       ///< IEEE double
  string = PP_KIND_STRING,    ///< UTF-8 text
  keyword = PP_KIND_KEYWORD,  ///< :NAME, compared ignoring ASCII case
  symbol = PP_KIND_SYMBOL,    ///< bare symbol
  list = PP_KIND_LIST,        ///< non-empty list (property lists are lists)
};

class Context;

/// A borrowed, read-only view of one host-owned value.
///
/// Lifetime: a ValueRef is valid as long as the value it views: signals,
/// actions and state until the hook that received them returns, values built
/// in a hook until that hook returns (the constructor's included), and the
/// config until the instance is destroyed. It also remembers the call it was
/// read or built in; building from it (context(), with(), print()) is only
/// valid while that hook runs. Of everything a skill sees, only the config
/// (Skill::config(), and text read from it) may be kept across hooks.
///
/// Threads: reading is safe from any thread; a ValueRef is a plain triple of
/// pointers and copying it is free.
class ValueRef {
 public:
  class iterator;

  /// A view of nothing, with no host: reads as NIL, cannot build.
  ValueRef() noexcept = default;

  /// A view of `value` (NULL reads as NIL) read through `host`, building in
  /// `call` (NULL: this ref cannot build). Made by the SDK; skills rarely need it.
  ValueRef(const pp_host_api* host, pp_call* call, const pp_value* value) noexcept
      : host_(host), call_(call), value_(value) {}

  // --- kind ------------------------------------------------------------------

  /// The kind of the value; nil for a NULL handle or an unknown kind.
  ValueKind kind() const noexcept {
    if (host_ == nullptr) return ValueKind::nil;
    const pp_kind k = host_->kind(value_);
    return (k >= PP_KIND_NIL && k <= PP_KIND_LIST) ? static_cast<ValueKind>(k) : ValueKind::nil;
  }
  /// Whether the value is NIL (also false and the empty list).
  bool is_nil() const noexcept { return kind() == ValueKind::nil; }
  /// Whether the value is T.
  bool is_t() const noexcept { return kind() == ValueKind::t; }
  /// Whether the value is an integer.
  bool is_integer() const noexcept { return kind() == ValueKind::integer; }
  /// Whether the value is a float (integers are not floats, though as_float() reads them).
  bool is_float() const noexcept { return kind() == ValueKind::real; }
  /// Whether the value is a string.
  bool is_string() const noexcept { return kind() == ValueKind::string; }
  /// Whether the value is a keyword.
  bool is_keyword() const noexcept { return kind() == ValueKind::keyword; }
  /// Whether the value is the keyword `name`, ignoring ASCII case; the leading
  /// ':' is optional (`is_keyword("shell")` and `is_keyword(":SHELL")` agree).
  bool is_keyword(std::string_view name) const noexcept {
    return is_keyword() && sdk_detail::keyword_names_equal(text(), name);
  }
  /// Whether the value is a symbol.
  bool is_symbol() const noexcept { return kind() == ValueKind::symbol; }
  /// Whether the value is a non-empty list (NIL is the empty list but not a list here).
  bool is_list() const noexcept { return kind() == ValueKind::list; }
  /// True unless the value is NIL, as a Lisp condition reads it.
  explicit operator bool() const noexcept { return !is_nil(); }

  // --- scalars ---------------------------------------------------------------

  /// The integer; 0 when the value is not an integer.
  std::int64_t as_integer() const noexcept { return host_ != nullptr ? host_->integer(value_) : 0; }
  /// The number as a double (integers convert); 0.0 when the value is not a number.
  double as_float() const noexcept { return host_ != nullptr ? host_->real(value_) : 0.0; }
  /// The bytes of a string, or the name of a keyword (upper-case, no ':') or
  /// symbol; empty for other kinds. Valid as long as the value.
  std::string_view text() const noexcept {
    if (host_ == nullptr) return {};
    std::size_t len = 0;
    const char* bytes = host_->text(value_, &len);
    return bytes != nullptr ? std::string_view(bytes, len) : std::string_view();
  }

  // --- lists and property lists ---------------------------------------------

  /// Number of elements of a list; 0 for NIL and non-lists.
  std::size_t size() const noexcept { return host_ != nullptr ? host_->length(value_) : 0; }
  /// Element `index` of a list; a NIL ref when out of range or not a list.
  ValueRef operator[](std::size_t index) const noexcept {
    return host_ != nullptr ? ValueRef(host_, call_, host_->at(value_, index)) : ValueRef();
  }
  /// In a property list, the value after the keyword `key` (ignoring ASCII
  /// case; the leading ':' is optional); a NIL ref when absent. Chains read
  /// through absent keys: `signal.get("PAYLOAD").get("TEXT").text()` is "" if
  /// either is missing.
  ValueRef get(std::string_view key) const noexcept {
    if (host_ == nullptr) return ValueRef();
    return ValueRef(host_, call_, host_->get(value_, sdk_detail::bytes_of(key), key.size()));
  }
  /// Whether the property list has the keyword `key` (even with a NIL value).
  bool has(std::string_view key) const noexcept {
    return host_ != nullptr && host_->get(value_, sdk_detail::bytes_of(key), key.size()) != nullptr;
  }
  /// The first element, for range-for over a list (NIL and non-lists are empty).
  iterator begin() const noexcept;
  /// Past the last element.
  iterator end() const noexcept;

  // --- building --------------------------------------------------------------

  /// A copy of this property list with `key` set to `value` (replaced where
  /// present, appended otherwise); this value is unchanged. Built in this ref's
  /// call, or, when it has none (the config), in `value`'s call.
  /// Throws std::logic_error when neither has a call, std::invalid_argument
  /// when this is not a property list or `key` is not a valid keyword name.
  ValueRef with(std::string_view key, const ValueRef& value) const;
  /// The value printed as an s-expression (what a Lisp peer reads), e.g.
  /// `(:TOOL "shell" :ARGS ("ls"))`. Needs a call: throws std::logic_error
  /// on a ref without one (the config outside create).
  std::string print() const;
  /// The builder for this ref's call. Throws std::logic_error when the ref has
  /// no call (e.g. the config after create: build from a hook's arguments instead).
  Context context() const;

  // --- the boundary ----------------------------------------------------------

  /// The opaque host handle (NULL for a missing value), for calling abi.h directly.
  const pp_value* handle() const noexcept { return value_; }
  /// The host table this ref reads through (NULL for a default-constructed ref).
  const pp_host_api* host() const noexcept { return host_; }
  /// The call this ref builds in (NULL when it cannot build).
  pp_call* call() const noexcept { return call_; }

 private:
  const pp_host_api* host_ = nullptr;
  pp_call* call_ = nullptr;
  const pp_value* value_ = nullptr;
};

/// Iterates over the elements of a list, yielding ValueRefs by value.
class ValueRef::iterator {
 public:
  /// Standard iterator traits: an input iterator whose reference is a ValueRef.
  using iterator_category = std::input_iterator_tag;
  using value_type = ValueRef;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = ValueRef;

  /// A singular iterator.
  iterator() noexcept = default;

  /// The current element.
  ValueRef operator*() const noexcept { return list_[index_]; }
  /// Advances to the next element.
  iterator& operator++() noexcept {
    ++index_;
    return *this;
  }
  /// Advances, returning the previous position.
  iterator operator++(int) noexcept {
    iterator before = *this;
    ++index_;
    return before;
  }
  /// Whether both are at the same position (of the same list).
  friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.index_ == b.index_; }
  /// Whether the positions differ.
  friend bool operator!=(const iterator& a, const iterator& b) noexcept { return a.index_ != b.index_; }

 private:
  friend class ValueRef;
  iterator(const ValueRef& list, std::size_t index) noexcept : list_(list), index_(index) {}

  ValueRef list_;
  std::size_t index_ = 0;
};

inline ValueRef::iterator ValueRef::begin() const noexcept { return iterator(*this, 0); }
inline ValueRef::iterator ValueRef::end() const noexcept { return iterator(*this, size()); }

/// One key and value of a property list being built: `{"TEXT", ctx.string("hi")}`.
struct Property {
  /// The keyword name; the leading ':' is optional.
  std::string_view key;
  /// The value (a NIL ref stands for NIL).
  ValueRef value;
};

/// Builds values in one hook's call. The values it makes are owned by the host
/// and live until that hook returns; the host copies what it keeps (a verdict's
/// action and reason, a prompt, exported state).
///
/// Obtain one from a hook's argument (`action.context()`) or as export_state's
/// parameter. Builders throw std::invalid_argument when the host refuses the
/// input (text that is not valid UTF-8, an empty keyword or symbol name); an
/// exception escaping a hook fails that hook (a gate then blocks).
///
/// Threads: the same as the hook it was obtained in; never keep it past the hook.
class Context {
 public:
  /// A builder for `call` through `host`; both must be non-NULL and valid for
  /// the hook being run. Made by the SDK; skills use ValueRef::context().
  Context(const pp_host_api* host, pp_call* call) noexcept : host_(host), call_(call) {}

  /// NIL.
  ValueRef nil() const { return checked(host_->make_nil(call_), "NIL"); }
  /// T.
  ValueRef t() const { return checked(host_->make_t(call_), "T"); }
  /// T when `condition` holds, NIL otherwise.
  ValueRef boolean(bool condition) const { return condition ? t() : nil(); }
  /// An integer.
  ValueRef integer(std::int64_t value) const { return checked(host_->make_integer(call_, value), "an integer"); }
  /// A float.
  ValueRef real(double value) const { return checked(host_->make_float(call_, value), "a float"); }
  /// A string from UTF-8 `text` (copied). Throws std::invalid_argument if not valid UTF-8.
  ValueRef string(std::string_view text) const {
    return checked(host_->make_string(call_, sdk_detail::bytes_of(text), text.size()),
                   "a string (the text is not valid UTF-8)");
  }
  /// A keyword; the leading ':' is optional and the name compares ignoring
  /// ASCII case. Throws std::invalid_argument if empty or not valid UTF-8.
  ValueRef keyword(std::string_view name) const {
    return checked(host_->make_keyword(call_, sdk_detail::bytes_of(name), name.size()),
                   "a keyword (the name is empty or not valid UTF-8)");
  }
  /// A symbol. Throws std::invalid_argument if `name` is empty or not valid UTF-8.
  ValueRef symbol(std::string_view name) const {
    return checked(host_->make_symbol(call_, sdk_detail::bytes_of(name), name.size()),
                   "a symbol (the name is empty or not valid UTF-8)");
  }
  /// A list of `items` (NIL when empty); the items are shared, not copied.
  ValueRef list(std::initializer_list<ValueRef> items) const { return make_list(items.begin(), items.size()); }
  /// A list of `items` (NIL when empty); the items are shared, not copied.
  ValueRef list(const std::vector<ValueRef>& items) const { return make_list(items.data(), items.size()); }
  /// A property list `(:KEY1 value1 :KEY2 value2 ...)`, in the order given:
  /// `ctx.plist({{"TOOL", ctx.string("shell")}, {"ARGS", ctx.list({})}})`.
  /// Throws std::invalid_argument if a key is not a valid keyword name.
  ValueRef plist(std::initializer_list<Property> entries) const {
    std::vector<const pp_value*> handles;
    handles.reserve(entries.size() * 2);
    for (const Property& entry : entries) {
      handles.push_back(keyword(entry.key).handle());
      handles.push_back(handle_of(entry.value));
    }
    return checked(host_->make_list(call_, handles.data(), handles.size()), "a property list");
  }

  /// The host table this context builds through.
  const pp_host_api* host() const noexcept { return host_; }
  /// The call the built values belong to.
  pp_call* call() const noexcept { return call_; }

 private:
  friend class ValueRef;

  // The handle to pass for `value`: missing values (NULL) stand for NIL,
  // because the host's builders reject NULL items.
  const pp_value* handle_of(const ValueRef& value) const {
    return value.handle() != nullptr ? value.handle() : nil().handle();
  }

  ValueRef make_list(const ValueRef* items, std::size_t count) const {
    std::vector<const pp_value*> handles;
    handles.reserve(count);
    for (std::size_t i = 0; i < count; ++i) handles.push_back(handle_of(items[i]));
    return checked(host_->make_list(call_, handles.data(), handles.size()), "a list");
  }

  // Wraps what a host builder returned; NULL means the host refused the input.
  ValueRef checked(const pp_value* built, const char* what) const {
    if (built == nullptr) {
      std::string message = "passepartout: the host could not build ";
      message.append(what);
      throw std::invalid_argument(message);
    }
    return ValueRef(host_, call_, built);
  }

  const pp_host_api* host_;
  pp_call* call_;
};

inline Context ValueRef::context() const {
  if (host_ == nullptr || call_ == nullptr) {
    throw std::logic_error(
        "passepartout: this value has no call to build in (the config is read-only after "
        "create; build from a hook's arguments or its Context instead)");
  }
  return Context(host_, call_);
}

inline ValueRef ValueRef::with(std::string_view key, const ValueRef& value) const {
  const Context ctx = call_ != nullptr ? context() : value.context();
  const pp_value* plist = ctx.handle_of(*this);
  const pp_value* built =
      ctx.host()->plist_put(ctx.call(), plist, sdk_detail::bytes_of(key), key.size(), ctx.handle_of(value));
  if (built == nullptr) {
    std::string message = "passepartout: cannot set :";
    message.append(sdk_detail::bytes_of(key), key.size());
    message.append(": the value is not a property list or the key is not a keyword name");
    throw std::invalid_argument(message);
  }
  return ValueRef(ctx.host(), ctx.call(), built);
}

inline std::string ValueRef::print() const {
  const Context ctx = context();
  const pp_value* printed = host_->print(call_, ctx.handle_of(*this));
  if (printed == nullptr) throw std::invalid_argument("passepartout: the host could not print a value");
  return std::string(ValueRef(host_, call_, printed).text());
}

}  // namespace passepartout

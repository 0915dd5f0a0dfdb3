// The JSON bridge: a SAX handler that builds Values straight from nlohmann's
// parser (no intermediate document), and the document-level conversions.
#include "value/json_bridge.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/ascii.hpp"
#include "value/json_bridge_detail.hpp"
#include "value/value_access.hpp"

namespace passepartout {

namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// An object key as a keyword: upper-cased, and unlike Value::keyword() never
// losing a leading ':', so that writing the Value back gives the same key.
Value keyword_from_key(std::string_view key) {
  Value keyword;
  char* out = ValueAccess::init_text(keyword, Kind::keyword, key.size());
  for (const char c : key) *out++ = ascii_upper(c);
  ValueAccess::mark_if_plain(keyword);
  return keyword;
}

Value integer_from_unsigned(std::uint64_t value) {
  if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return Value::real(static_cast<double>(value));
  }
  return Value::integer(static_cast<std::int64_t>(value));
}

// Receives parser events and assembles Values on a stack: an open object or
// array keeps its elements (keys as keywords) above its base index.
class ValueBuilder {
 public:
  explicit ValueBuilder(std::size_t max_depth) : max_depth_(max_depth) {}

  bool null() { return push(Value()); }
  bool boolean(bool value) { return push(Value::boolean(value)); }
  bool number_integer(Json::number_integer_t value) { return push(Value::integer(value)); }
  bool number_unsigned(Json::number_unsigned_t value) { return push(integer_from_unsigned(value)); }
  bool number_float(Json::number_float_t value, const Json::string_t& /*text*/) { return push(Value::real(value)); }
  bool string(Json::string_t& text) { return push(Value::string(text)); }
  bool binary(Json::binary_t& /*bytes*/) { return false; }  // never produced by the JSON syntax
  bool key(Json::string_t& name) {
    items_.push_back(keyword_from_key(name));
    return true;
  }
  bool start_object(std::size_t /*size*/) { return open(); }
  bool end_object() { return close(); }
  bool start_array(std::size_t /*size*/) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t position, const std::string& /*last_token*/, const nlohmann::detail::exception& error) {
    // `position` counts the characters read, the offending one included.
    const std::size_t offset = position > 0 ? position - 1 : 0;
    std::string reason = error.what();
    if (const std::size_t colon = reason.find(": ");
        colon != std::string::npos && reason.find("parse error") != std::string::npos) {
      reason.erase(0, colon + 2);
    } else if (const std::size_t bracket = reason.find("] "); bracket != std::string::npos) {
      reason.erase(0, bracket + 2);
    }
    // nlohmann echoes the raw bytes it read, which may be invalid UTF-8.
    if (const std::size_t echo = reason.find("; last read:"); echo != std::string::npos) reason.erase(echo);
    error_ = Error{ErrorCode::invalid_input, "byte " + std::to_string(offset) + ": invalid JSON: " + reason};
    return false;
  }

  // True when parsing stopped because an object or array opened past max_depth.
  bool too_deep() const noexcept { return too_deep_; }
  Error take_error() { return std::move(error_); }
  Value take_result() {
    Value result = std::move(items_.front());
    items_.clear();
    return result;
  }

 private:
  bool push(Value value) {
    items_.push_back(std::move(value));
    return true;
  }
  bool open() {
    if (bases_.size() >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    bases_.push_back(items_.size());
    return true;
  }
  bool close() {
    const std::size_t base = bases_.back();
    bases_.pop_back();
    Value list = ValueAccess::list_from_moved(std::span<Value>(items_.data() + base, items_.size() - base));
    items_.resize(base);
    return push(std::move(list));
  }

  std::size_t max_depth_;
  std::vector<Value> items_;
  std::vector<std::size_t> bases_;
  bool too_deep_ = false;
  Error error_;
};

// Counts '[' and '{' outside strings to find where nesting first exceeds
// max_depth; only run after the parser stopped for depth.
std::size_t offset_of_depth(std::string_view json, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return json.size();
}

Value scalar_to_value(const Json& json) {
  switch (json.type()) {
    case Json::value_t::boolean:
      return Value::boolean(json.get<bool>());
    case Json::value_t::number_integer:
      return Value::integer(json.get<std::int64_t>());
    case Json::value_t::number_unsigned:
      return integer_from_unsigned(json.get<std::uint64_t>());
    case Json::value_t::number_float:
      return Value::real(json.get<double>());
    case Json::value_t::string:
      return Value::string(json.get_ref<const std::string&>());
    default:
      return Value();  // null, empty structures, binary, discarded
  }
}

bool is_proper_plist(std::span<const Value> items) noexcept {
  if (items.empty() || items.size() % 2 != 0) return false;
  for (std::size_t i = 0; i < items.size(); i += 2) {
    if (!items[i].is_keyword()) return false;
  }
  return true;
}

}  // namespace

Result<Value> json_to_value(std::string_view json, std::size_t max_depth) {
  ValueBuilder builder(max_depth);
  const bool ok = Json::sax_parse(json.begin(), json.end(), &builder);
  if (ok) return builder.take_result();
  if (builder.too_deep()) {
    return fail(ErrorCode::limit_exceeded, "byte " + std::to_string(offset_of_depth(json, max_depth)) +
                                               ": nesting deeper than " + std::to_string(max_depth));
  }
  return Unexpected<Error>(builder.take_error());
}

Value json_dom_to_value(const Json& json) {
  if (!json.is_structured() || json.empty()) return scalar_to_value(json);
  // Iterative, so a deep document cannot exhaust the stack.
  struct Frame {
    const Json* container;
    Json::const_iterator next;
    std::size_t base;
  };
  std::vector<Value> items;
  std::vector<Frame> frames;
  frames.push_back(Frame{&json, json.cbegin(), 0});
  for (;;) {
    Frame& frame = frames.back();
    if (frame.next == frame.container->cend()) {
      const std::size_t base = frame.base;
      Value list = ValueAccess::list_from_moved(std::span<Value>(items.data() + base, items.size() - base));
      items.resize(base);
      frames.pop_back();
      if (frames.empty()) return list;
      items.push_back(std::move(list));
      continue;
    }
    const Json::const_iterator current = frame.next++;
    if (frame.container->is_object()) items.push_back(keyword_from_key(current.key()));
    const Json& child = *current;
    if (child.is_structured() && !child.empty()) {
      frames.push_back(Frame{&child, child.cbegin(), items.size()});
    } else {
      items.push_back(scalar_to_value(child));
    }
  }
}

OrderedJson value_to_json_dom(const Value& value, JsonKeys keys) {
  switch (value.kind()) {
    case Kind::nil:
      return nullptr;
    case Kind::t:
      return true;
    case Kind::integer:
      return value.as_integer();
    case Kind::real:
      // JSON has no NaN or infinities; dump() would write null for them too.
      return std::isfinite(value.as_float()) ? OrderedJson(value.as_float()) : OrderedJson(nullptr);
    case Kind::string:
    case Kind::symbol:
      return std::string(value.text());
    case Kind::keyword:
      return ascii_lower(value.text());
    case Kind::list: {
      const std::span<const Value> items = value.items();
      if (is_proper_plist(items)) {
        OrderedJson object = OrderedJson::object();
        for (std::size_t i = 0; i < items.size(); i += 2) {
          std::string key = ascii_lower(items[i].text());
          if (keys == JsonKeys::snake_case) std::replace(key.begin(), key.end(), '-', '_');
          // A repeated key keeps its first value, as plist lookup does.
          if (!object.contains(key)) object.emplace(std::move(key), value_to_json_dom(items[i + 1], keys));
        }
        return object;
      }
      OrderedJson array = OrderedJson::array();
      for (const Value& item : items) array.push_back(value_to_json_dom(item, keys));
      return array;
    }
  }
  return nullptr;
}

std::string value_to_json(const Value& value) {
  return value_to_json_dom(value).dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

}  // namespace passepartout

// Implements pp_host_api: reading and building Values for skills, logging, errors.
// Every member tolerates NULL handles (they read as NIL), as abi.h promises.
#include "skills/host_api.hpp"

#include <string_view>

#include "base/log.hpp"
#include "base/utf8.hpp"
#include "value/sexp_printer.hpp"

const pp_value* pp_call::keep(passepartout::Value value) {
  built.push_front(std::move(value));
  return passepartout::to_handle(built.front());
}

namespace passepartout {
namespace {

const Value kNil;

std::string_view view(const char* bytes, size_t len) {
  return bytes == nullptr ? std::string_view() : std::string_view(bytes, len);
}

LogLevel to_log_level(pp_log_level level) {
  switch (level) {
    case PP_LOG_DEBUG:
      return LogLevel::debug;
    case PP_LOG_WARN:
      return LogLevel::warn;
    case PP_LOG_ERROR:
      return LogLevel::error;
    default:
      return LogLevel::info;  // unknown levels log as info (abi.h)
  }
}

void host_log(pp_self* self, pp_log_level level, const char* message, size_t len) {
  std::string_view component = self != nullptr ? std::string_view(self->skill_name) : "skill";
  std::string_view text = view(message, len);
  if (!is_valid_utf8(text)) {
    log_message(to_log_level(level), component, "(log line with invalid UTF-8 dropped)");
    return;
  }
  log_message(to_log_level(level), component, text);
}

void host_set_error(pp_call* call, const char* message, size_t len) {
  if (call == nullptr) return;
  std::string_view text = view(message, len);
  if (is_valid_utf8(text)) {
    call->error.assign(text);
  } else {
    call->error = "(error text with invalid UTF-8)";
  }
}

pp_kind host_kind(const pp_value* v) { return static_cast<pp_kind>(from_handle(v).kind()); }
int64_t host_integer(const pp_value* v) { return from_handle(v).as_integer(); }
double host_real(const pp_value* v) { return from_handle(v).as_float(); }

const char* host_text(const pp_value* v, size_t* len) {
  std::string_view text = from_handle(v).text();
  if (len != nullptr) *len = text.size();
  return text.empty() ? "" : text.data();
}

size_t host_length(const pp_value* v) { return from_handle(v).size(); }

const pp_value* host_at(const pp_value* list, size_t index) {
  auto items = from_handle(list).items();
  return index < items.size() ? to_handle(items[index]) : nullptr;
}

const pp_value* host_get(const pp_value* plist, const char* key, size_t len) {
  const Value* found = from_handle(plist).get(view(key, len));
  return found != nullptr ? to_handle(*found) : nullptr;
}

const pp_value* host_make_nil(pp_call* call) { return call ? call->keep(Value::nil()) : nullptr; }
const pp_value* host_make_t(pp_call* call) { return call ? call->keep(Value::t()) : nullptr; }
const pp_value* host_make_integer(pp_call* call, int64_t value) {
  return call ? call->keep(Value::integer(value)) : nullptr;
}
const pp_value* host_make_float(pp_call* call, double value) { return call ? call->keep(Value::real(value)) : nullptr; }

// Strings, keywords and symbols: UTF-8 checked here, because skills hand us raw bytes.
const pp_value* make_text(pp_call* call, const char* bytes, size_t len, Kind kind) {
  if (call == nullptr) return nullptr;
  std::string_view text = view(bytes, len);
  if (!is_valid_utf8(text)) {
    call->error = "text is not valid UTF-8";
    return nullptr;
  }
  if (kind == Kind::string) return call->keep(Value::string(text));
  if (kind == Kind::keyword && !text.empty() && text.front() == ':') text.remove_prefix(1);
  if (text.empty()) {
    call->error = kind == Kind::keyword ? "a keyword needs a name" : "a symbol needs a name";
    return nullptr;
  }
  return call->keep(kind == Kind::keyword ? Value::keyword(text) : Value::symbol(text));
}

const pp_value* host_make_string(pp_call* call, const char* bytes, size_t len) {
  return make_text(call, bytes, len, Kind::string);
}
const pp_value* host_make_keyword(pp_call* call, const char* name, size_t len) {
  return make_text(call, name, len, Kind::keyword);
}
const pp_value* host_make_symbol(pp_call* call, const char* name, size_t len) {
  return make_text(call, name, len, Kind::symbol);
}

const pp_value* host_make_list(pp_call* call, const pp_value* const* items, size_t count) {
  if (call == nullptr || (items == nullptr && count > 0)) return nullptr;
  std::vector<Value> values;
  values.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (items[i] == nullptr) {
      call->error = "make_list: item " + std::to_string(i) + " is NULL";
      return nullptr;
    }
    values.push_back(from_handle(items[i]));
  }
  return call->keep(Value::list(values));
}

const pp_value* host_plist_put(pp_call* call, const pp_value* plist, const char* key, size_t len,
                               const pp_value* value) {
  if (call == nullptr || value == nullptr) return nullptr;
  const Value& base = from_handle(plist);
  std::string_view name = view(key, len);
  if (!base.is_sequence() || name.empty() || !is_valid_utf8(name)) {
    call->error = "plist_put needs a list and a keyword name";
    return nullptr;
  }
  return call->keep(base.with(name, from_handle(value)));
}

const pp_value* host_print(pp_call* call, const pp_value* v) {
  if (call == nullptr) return nullptr;
  return call->keep(Value::string(to_sexp(from_handle(v))));
}

constexpr pp_host_api kHostApi = {
    sizeof(pp_host_api), PP_ABI_MAJOR,   PP_ABI_MINOR,      host_log,        host_set_error,   host_kind,
    host_integer,        host_real,      host_text,         host_length,     host_at,          host_get,
    host_make_nil,       host_make_t,    host_make_integer, host_make_float, host_make_string, host_make_keyword,
    host_make_symbol,    host_make_list, host_plist_put,    host_print,
};

static_assert(sizeof(pp_host_api) >= PP_HOST_API_SIZE_1_0);

}  // namespace

const pp_host_api& host_api() noexcept { return kHostApi; }

const Value& from_handle(const pp_value* handle) noexcept {
  return handle != nullptr ? *reinterpret_cast<const Value*>(handle) : kNil;
}

}  // namespace passepartout

// The stub host's pp_host_api: NULL reads as NIL, builders check UTF-8 like the real host.
#include "stub_host.hpp"

#include <cstdio>
#include <string_view>

bool pp_self::logged(pp_log_level level, const std::string& line) {
  const std::lock_guard<std::mutex> lock(lines_mutex);
  for (const auto& entry : lines) {
    if (entry.first == level && entry.second == line) return true;
  }
  return false;
}

namespace stub {
namespace {

const pp_value kNil;

const pp_value& read(const pp_value* v) { return v != nullptr ? *v : kNil; }

std::string upper(std::string_view name) {
  if (!name.empty() && name.front() == ':') name.remove_prefix(1);
  std::string out(name);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// Structural UTF-8 check (lead and continuation bytes); enough for tests.
bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    if (lead < 0x80) {
      extra = 0;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      extra = 1;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      extra = 3;
    } else {
      return false;
    }
    if (extra >= text.size() - i) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += extra + 1;
  }
  return true;
}

std::string_view view(const char* bytes, size_t len) {
  return bytes != nullptr ? std::string_view(bytes, len) : std::string_view();
}

void host_log(pp_self* self, pp_log_level level, const char* message, size_t len) {
  if (self == nullptr) return;
  const std::lock_guard<std::mutex> lock(self->lines_mutex);
  self->lines.emplace_back(level, std::string(view(message, len)));
}

void host_set_error(pp_call* call, const char* message, size_t len) {
  if (call != nullptr) call->error.assign(view(message, len));
}

pp_kind host_kind(const pp_value* v) { return read(v).kind; }
int64_t host_integer(const pp_value* v) { return read(v).kind == PP_KIND_INTEGER ? read(v).integer : 0; }
double host_real(const pp_value* v) {
  if (read(v).kind == PP_KIND_FLOAT) return read(v).real;
  if (read(v).kind == PP_KIND_INTEGER) return static_cast<double>(read(v).integer);
  return 0.0;
}
const char* host_text(const pp_value* v, size_t* len) {
  const pp_value& value = read(v);
  const bool textual = value.kind == PP_KIND_STRING || value.kind == PP_KIND_KEYWORD || value.kind == PP_KIND_SYMBOL;
  if (len != nullptr) *len = textual ? value.text.size() : 0;
  return textual ? value.text.c_str() : "";
}
size_t host_length(const pp_value* v) { return read(v).items.size(); }
const pp_value* host_at(const pp_value* list, size_t index) {
  return index < read(list).items.size() ? read(list).items[index] : nullptr;
}
const pp_value* host_get(const pp_value* plist, const char* key, size_t len) {
  const std::string wanted = upper(view(key, len));
  const auto& items = read(plist).items;
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (read(items[i]).kind == PP_KIND_KEYWORD && read(items[i]).text == wanted) return items[i + 1];
  }
  return nullptr;
}

const pp_value* host_make_nil(pp_call* call) { return call->keep(pp_value{}); }
const pp_value* host_make_t(pp_call* call) {
  pp_value v;
  v.kind = PP_KIND_T;
  return call->keep(std::move(v));
}
const pp_value* host_make_integer(pp_call* call, int64_t value) {
  pp_value v;
  v.kind = PP_KIND_INTEGER;
  v.integer = value;
  return call->keep(std::move(v));
}
const pp_value* host_make_float(pp_call* call, double value) {
  pp_value v;
  v.kind = PP_KIND_FLOAT;
  v.real = value;
  return call->keep(std::move(v));
}
const pp_value* make_text(pp_call* call, pp_kind kind, std::string_view text) {
  if (!valid_utf8(text)) {
    call->error = "text is not valid UTF-8";
    return nullptr;
  }
  pp_value v;
  v.kind = kind;
  if (kind == PP_KIND_KEYWORD) {
    v.text = upper(text);
  } else {
    v.text = std::string(text);
  }
  if (kind != PP_KIND_STRING && v.text.empty()) {
    call->error = "a name is empty";
    return nullptr;
  }
  return call->keep(std::move(v));
}
const pp_value* host_make_string(pp_call* call, const char* bytes, size_t len) {
  return make_text(call, PP_KIND_STRING, view(bytes, len));
}
const pp_value* host_make_keyword(pp_call* call, const char* name, size_t len) {
  return make_text(call, PP_KIND_KEYWORD, view(name, len));
}
const pp_value* host_make_symbol(pp_call* call, const char* name, size_t len) {
  return make_text(call, PP_KIND_SYMBOL, view(name, len));
}
const pp_value* host_make_list(pp_call* call, const pp_value* const* items, size_t count) {
  if (count == 0) return host_make_nil(call);
  pp_value v;
  v.kind = PP_KIND_LIST;
  for (size_t i = 0; i < count; ++i) {
    if (items[i] == nullptr) return nullptr;
    v.items.push_back(items[i]);
  }
  return call->keep(std::move(v));
}
const pp_value* host_plist_put(pp_call* call, const pp_value* plist, const char* key, size_t len,
                               const pp_value* value) {
  const pp_value& base = read(plist);
  if (value == nullptr || (base.kind != PP_KIND_NIL && base.kind != PP_KIND_LIST)) return nullptr;
  const std::string name = upper(view(key, len));
  if (name.empty()) return nullptr;
  pp_value copy = base;
  copy.kind = PP_KIND_LIST;
  for (std::size_t i = 0; i + 1 < copy.items.size(); i += 2) {
    if (read(copy.items[i]).kind == PP_KIND_KEYWORD && read(copy.items[i]).text == name) {
      copy.items[i + 1] = value;
      return call->keep(std::move(copy));
    }
  }
  copy.items.push_back(make_text(call, PP_KIND_KEYWORD, name));
  copy.items.push_back(value);
  return call->keep(std::move(copy));
}
const pp_value* host_print(pp_call* call, const pp_value* v) { return make_text(call, PP_KIND_STRING, stub::print(v)); }

constexpr pp_host_api kHost = {
    sizeof(pp_host_api), PP_ABI_MAJOR,   PP_ABI_MINOR,      host_log,        host_set_error,   host_kind,
    host_integer,        host_real,      host_text,         host_length,     host_at,          host_get,
    host_make_nil,       host_make_t,    host_make_integer, host_make_float, host_make_string, host_make_keyword,
    host_make_symbol,    host_make_list, host_plist_put,    host_print,
};

}  // namespace

const pp_host_api& host() { return kHost; }

const pp_value* nil(pp_call& call) { return host_make_nil(&call); }
const pp_value* integer(pp_call& call, std::int64_t value) { return host_make_integer(&call, value); }
const pp_value* string(pp_call& call, std::string text) { return make_text(&call, PP_KIND_STRING, text); }
const pp_value* keyword(pp_call& call, std::string name) { return make_text(&call, PP_KIND_KEYWORD, name); }
const pp_value* list(pp_call& call, std::vector<const pp_value*> items) {
  return host_make_list(&call, items.data(), items.size());
}
const pp_value* plist(pp_call& call, std::initializer_list<std::pair<std::string, const pp_value*>> entries) {
  std::vector<const pp_value*> items;
  for (const auto& entry : entries) {
    items.push_back(keyword(call, entry.first));
    items.push_back(entry.second);
  }
  return list(call, std::move(items));
}

std::string print(const pp_value* v) {
  const pp_value& value = read(v);
  switch (value.kind) {
    case PP_KIND_T:
      return "T";
    case PP_KIND_INTEGER:
      return std::to_string(value.integer);
    case PP_KIND_FLOAT: {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%g", value.real);
      return buffer;
    }
    case PP_KIND_STRING: {
      std::string out = "\"";
      for (char c : value.text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      return out + "\"";
    }
    case PP_KIND_KEYWORD:
      return ":" + value.text;
    case PP_KIND_SYMBOL:
      return value.text;
    case PP_KIND_LIST: {
      std::string out = "(";
      for (std::size_t i = 0; i < value.items.size(); ++i) {
        if (i > 0) out += ' ';
        out += print(value.items[i]);
      }
      return out + ")";
    }
    default:
      return "NIL";
  }
}

}  // namespace stub

// merkle_hash: the hashed text and the attribute printing it needs.
#include "memory/merkle_hash.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

// The key's name as the Lisp `~a` directive printed it for sorting: a
// keyword's name without the colon, a string's text, anything else printed.
std::string sort_key(const Value& key) {
  if (key.is_keyword() || key.is_string() || key.is_symbol()) return std::string(key.text());
  return to_sexp(key);
}

void print_pair(const Value& key, const Value& value, std::string& out) {
  out += '(';
  print_sexp(key, out);
  if (value.is_list()) {
    for (const Value& item : value.items()) {
      out += ' ';
      print_sexp(item, out);
    }
  } else if (!value.is_nil()) {
    out += " . ";
    print_sexp(value, out);
  }
  out += ')';
}

}  // namespace

std::string print_attribute_pairs(const Value& attributes) {
  auto items = attributes.items();
  if (items.empty()) return "NIL";
  // A trailing key without a value pairs with NIL, as walking a plist by two does.
  const Value nil;
  struct Pair {
    std::string sort_key;
    const Value* key;
    const Value* value;
  };
  std::vector<Pair> pairs;
  pairs.reserve((items.size() + 1) / 2);
  for (std::size_t i = 0; i < items.size(); i += 2) {
    pairs.push_back({sort_key(items[i]), &items[i], i + 1 < items.size() ? &items[i + 1] : &nil});
  }
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) { return a.sort_key < b.sort_key; });
  std::string out = "(";
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (i != 0) out += ' ';
    print_pair(*pairs[i].key, *pairs[i].value, out);
  }
  out += ')';
  return out;
}

std::string merkle_hash_input(std::string_view id, const Value& type, const Value& attributes, std::string_view content,
                              std::span<const std::string> child_hashes) {
  std::string data;
  data.reserve(64 + id.size() + content.size() + 64 * child_hashes.size());
  data.append("ID:").append(id);
  data.append("|TYPE:");
  print_sexp(type, data);
  data.append("|ATTRS:").append(print_attribute_pairs(attributes));
  data.append("|CONTENT:").append(content);
  data.append("|CHILDREN:");
  for (const std::string& child : child_hashes) data.append(child);
  return data;
}

std::string merkle_hash(std::string_view id, const Value& type, const Value& attributes, std::string_view content,
                        std::span<const std::string> child_hashes) {
  return sha256_hex(merkle_hash_input(id, type, attributes, content, child_hashes));
}

std::string merkle_hash(const MemoryObject& object) {
  return merkle_hash(object.id, object.type, object.attributes, object.content, object.child_hashes);
}

bool is_sha256_hex(std::string_view text) noexcept {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace passepartout

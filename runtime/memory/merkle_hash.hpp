// merkle_hash: the SHA-256 Merkle hash that names every version of a memory
// object, computed over the object's own fields and its children's hashes.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "base/digest.hpp"  // sha256_hex
#include "memory/memory_object.hpp"
#include "value/value.hpp"

namespace passepartout {

// The attributes as the Lisp system printed them for hashing: `(key . value)`
// pairs sorted by key name (byte order), printed readably, e.g.
// `((:ID . "n1") (:TITLE . "T"))`. A list value prints as its elements after the
// key, `(:TAGS "a" "b")`, and NIL as `(:KEY)`, as a Lisp printer writes a cons
// whose tail is a list; no attributes print as `NIL`.
std::string print_attribute_pairs(const Value& attributes);

// The exact text that is hashed:
//   ID:<id>|TYPE:<type printed, e.g. :HEADLINE>|ATTRS:<print_attribute_pairs>|CONTENT:<content>|CHILDREN:<child hashes,
//   concatenated>
std::string merkle_hash_input(std::string_view id, const Value& type, const Value& attributes, std::string_view content,
                              std::span<const std::string> child_hashes);

// Lower-case hex SHA-256 of merkle_hash_input()'s UTF-8 bytes. Any code point
// is accepted (the Lisp system refused characters above U+00FF and hashed
// Latin-1 as single bytes, so hashes of non-ASCII text differ from it).
std::string merkle_hash(std::string_view id, const Value& type, const Value& attributes, std::string_view content,
                        std::span<const std::string> child_hashes);

// merkle_hash() of `object`'s fields (not its stored `hash`): what the hash should be.
std::string merkle_hash(const MemoryObject& object);

// True for 64 lower-case hex digits: the shape of every hash above.
bool is_sha256_hex(std::string_view text) noexcept;

}  // namespace passepartout

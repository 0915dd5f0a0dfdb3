// sexp("..."): a Value from s-expression text in a test, REQUIREd to read.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "value/sexp_reader.hpp"

namespace passepartout::testing {

inline Value sexp(std::string_view text) {
  auto value = read_sexp(text);
  INFO(std::string(text) << (value ? std::string() : ": " + value.error().message));
  REQUIRE(value.has_value());
  return *value;
}

}  // namespace passepartout::testing

// value.hpp included alone into C++17, with the project's warnings: it must stand on its own.
#include "passepartout/value.hpp"

#include <type_traits>

static_assert(std::is_trivially_copyable_v<passepartout::ValueRef>, "a ValueRef is three pointers");
static_assert(std::is_nothrow_default_constructible_v<passepartout::ValueRef>, "a default ref is NIL");

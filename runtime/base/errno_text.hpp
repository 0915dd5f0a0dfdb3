// The system's text for an errno value, safe to call from any thread
// (std::strerror may share one buffer between threads; the standard library's
// error category formats into the string it returns).
#pragma once

#include <string>
#include <system_error>

namespace passepartout {

inline std::string errno_text(int error) { return std::generic_category().message(error); }

}  // namespace passepartout

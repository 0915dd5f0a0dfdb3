// HTTP header fields as the transport and the drivers pass them: name and
// value in order (a response's names lower-cased by the transport).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace passepartout {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

}  // namespace passepartout

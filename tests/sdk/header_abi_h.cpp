// abi.h included alone into C++17, with the project's warnings: it must stand on its own.
#include "passepartout/abi.h"

static_assert(PP_SKILL_API_SIZE_1_0 == sizeof(pp_skill_api), "ABI 1.0 covers the whole table");
static_assert(PP_HOST_API_SIZE_1_0 == sizeof(pp_host_api), "ABI 1.0 covers the whole host table");

// abi.h included alone into C++17, with the project's warnings: it must stand on its own.
#include "passepartout/abi.h"

#include <cstddef>

static_assert(PP_SKILL_API_SIZE_1_4 == sizeof(pp_skill_api), "ABI 1.4 covers the whole table");
static_assert(PP_SKILL_API_SIZE_1_2 == offsetof(pp_skill_api, actuator_specs), "ABI 1.2 ends where 1.3 begins");
static_assert(PP_SKILL_API_SIZE_1_1 == offsetof(pp_skill_api, config_keys), "ABI 1.1 ends where 1.2 begins");
static_assert(PP_SKILL_API_SIZE_1_0 == offsetof(pp_skill_api, tools), "ABI 1.0 ends where 1.1 begins");
static_assert(PP_HOST_API_SIZE_1_0 == sizeof(pp_host_api), "ABI 1.0 covers the whole host table");
static_assert(PP_ABI_MAJOR == 1 && PP_ABI_MINOR == 4, "this header describes ABI 1.4");

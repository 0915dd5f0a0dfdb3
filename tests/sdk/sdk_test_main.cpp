// The Catch2 main of the SDK tests (separate from the runtime's suite: the SDK
// is tested without linking the host).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

// The one Catch2 main of the unit and integration suite.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

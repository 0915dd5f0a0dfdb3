// The Catch2 main of the SDK tests (separate from the runtime's suite: the SDK
// is tested without linking the host).
#include "support/catch_session.hpp"

int main(int argc, char* argv[]) { return passepartout::testing::run_catch_session(argc, argv); }

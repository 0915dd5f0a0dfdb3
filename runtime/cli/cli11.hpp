// CLI11, included through here: GCC 12 reports a "potential null pointer
// dereference" inside its string splitting once inlined (a false positive in
// the standard library's vector reallocation); silenced for CLI11's header only.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <CLI/CLI.hpp>
#pragma GCC diagnostic pop

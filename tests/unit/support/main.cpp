//===- main.cpp - Catch2 entry point of the unit tests --------------------===//
//
// Kept alone in its own file so that Catch2's runner is compiled once, not
// with every change to a test file.
//
//===----------------------------------------------------------------------===//

#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

//===- Library.cpp - libqgemm.so ------------------------------------------===//
//
// The shared library is assembled from the static component libraries (see
// runtime/CMakeLists.txt); this file only anchors the target.
//
//===----------------------------------------------------------------------===//
#include "qgemm/Compiler.h"

//===- DisplayPath.h - File names as messages show them ---------*- C++ -*-===//
#ifndef QGEMM_DISPLAYPATH_H
#define QGEMM_DISPLAYPATH_H

#include "qgemm/Export.h"

#include <string>
#include <string_view>

namespace qgemm {

/// A file name as messages show it: control characters (C0, DEL, C1) and
/// bytes that are not UTF-8 written as \xHH, so that a name cannot drive
/// the terminal, and cut to 256 bytes with "..." as echoed JSON paths are,
/// so that a name longer than PATH_MAX does not flood the message
/// (SpecParse.cpp). SpecError::str() shows its file this way.
QGEMM_API std::string displayPath(std::string_view path);

} // namespace qgemm

#endif // QGEMM_DISPLAYPATH_H

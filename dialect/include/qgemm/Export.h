//===- Export.h - Symbol visibility of the public qgemm API -----*- C++ -*-===//
//
// libqgemm.so is built with hidden visibility and links LLVM/MLIR statically;
// only declarations marked QGEMM_API are exported from it.
//
//===----------------------------------------------------------------------===//
#ifndef QGEMM_EXPORT_H
#define QGEMM_EXPORT_H

#define QGEMM_API __attribute__((visibility("default")))

#endif // QGEMM_EXPORT_H

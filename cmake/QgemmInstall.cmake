# Install rules of libqgemm.so for C and C++ users:
#
#   cmake --install build --prefix P
#
# puts under P
#   lib/libqgemm.so                    LLVM/MLIR inside, only qgemm symbols out
#   include/qgemm/qgemm.h              the C API (its umbrella header)
#   include/qgemm/qgemm_*.h            the C API's topic headers it includes
#   include/qgemm/{Runtime,...}.h      the C++ API and the headers it includes
#   lib/cmake/qgemm/                   find_package(qgemm) -> qgemm::qgemm
#   lib/pkgconfig/qgemm.pc             pkg-config --cflags --libs qgemm
#   share/qgemm/tuning/*.json          the shipped tuning databases
#
# Nothing else is installed: the component archives (the MLIR libraries'
# own install rules are off, LLVM_INSTALL_TOOLCHAIN_ONLY in the top-level
# CMakeLists), tools and tests stay in the build tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The public headers: the C API, the C++ Runtime API and every header it
# includes. CudaDriver.h is left out: it needs cuda.h, and Runtime.h only
# forward-declares the driver. BuildIR.h (MLIR types) is internal.
# Each op's C++ args (<Op>Args.h, included by Runtime.h) by their name, and
# the C API's topic headers (qgemm_*.h, included by qgemm.h) by theirs.
file(GLOB _qgemm_op_args_headers CONFIGURE_DEPENDS
  ${QGEMM_SOURCE_DIR}/runtime/include/qgemm/*Args.h)
file(GLOB _qgemm_c_topic_headers CONFIGURE_DEPENDS
  ${QGEMM_SOURCE_DIR}/runtime/include/qgemm/qgemm_*.h)
# Each op's contract (<Op>Contract.h, included by Spec.h through
# OpRegistry.def) by their name.
file(GLOB _qgemm_contract_headers CONFIGURE_DEPENDS
  ${QGEMM_SOURCE_DIR}/dialect/include/qgemm/*Contract.h)
set(QGEMM_PUBLIC_HEADERS
  ${QGEMM_SOURCE_DIR}/runtime/include/qgemm/qgemm.h
  ${_qgemm_c_topic_headers}
  ${QGEMM_SOURCE_DIR}/runtime/include/qgemm/Runtime.h
  ${QGEMM_SOURCE_DIR}/runtime/include/qgemm/Plans.h
  ${QGEMM_SOURCE_DIR}/runtime/include/qgemm/Ops.def
  ${_qgemm_op_args_headers}
  ${QGEMM_SOURCE_DIR}/runtime/include/qgemm/KernelCache.h
  ${QGEMM_SOURCE_DIR}/compiler/include/qgemm/Compiler.h
  ${QGEMM_SOURCE_DIR}/compiler/include/qgemm/Spec.h
  ${QGEMM_SOURCE_DIR}/dialect/include/qgemm/OpRegistry.def
  ${_qgemm_contract_headers}
  ${QGEMM_SOURCE_DIR}/dialect/include/qgemm/BuildTarget.h
  ${QGEMM_SOURCE_DIR}/dialect/include/qgemm/Export.h
  ${QGEMM_SOURCE_DIR}/dialect/include/qgemm/KernelConfig.h
  ${QGEMM_SOURCE_DIR}/dialect/include/qgemm/KernelConfigFields.def
  ${QGEMM_SOURCE_DIR}/dialect/include/qgemm/KernelFamilies.def
  ${QGEMM_SOURCE_DIR}/dialect/include/qgemm/Tuning.h)

install(TARGETS qgemm EXPORT qgemmTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${QGEMM_PUBLIC_HEADERS}
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/qgemm)
# The shipped tuning databases (docs/TUNING.md): "tuning": "auto" looks for
# <libdir>/../share/qgemm/tuning/<gpu>.json.
install(DIRECTORY ${QGEMM_SOURCE_DIR}/tuning/
  DESTINATION ${CMAKE_INSTALL_DATADIR}/qgemm/tuning
  FILES_MATCHING PATTERN "*.json")

set(QGEMM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/qgemm)
install(EXPORT qgemmTargets NAMESPACE qgemm:: DESTINATION ${QGEMM_CMAKE_DIR})
configure_package_config_file(
  ${QGEMM_SOURCE_DIR}/cmake/qgemmConfig.cmake.in
  ${QGEMM_BINARY_DIR}/qgemmConfig.cmake
  INSTALL_DESTINATION ${QGEMM_CMAKE_DIR})
# 0.x: every minor version may change the C++ API; the C API has its own
# version (QGEMM_API_VERSION in qgemm.h).
write_basic_package_version_file(
  ${QGEMM_BINARY_DIR}/qgemmConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${QGEMM_BINARY_DIR}/qgemmConfig.cmake
  ${QGEMM_BINARY_DIR}/qgemmConfigVersion.cmake
  DESTINATION ${QGEMM_CMAKE_DIR})

# pkg-config: paths relative to the .pc file, so an installed tree can move.
file(RELATIVE_PATH QGEMM_PC_TO_PREFIX
  /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${QGEMM_SOURCE_DIR}/cmake/qgemm.pc.in
  ${QGEMM_BINARY_DIR}/qgemm.pc @ONLY)
install(FILES ${QGEMM_BINARY_DIR}/qgemm.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

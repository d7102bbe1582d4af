# Link MLIR and LLVM statically into qgemm (ARCHITECTURE.md, "Bundle LLVM/MLIR
# statically"). Debian builds LLVM with LLVM_LINK_LLVM_DYLIB, so every imported
# MLIR target names the 150 MB `LLVM` dylib in its interface. We rewrite those
# interfaces to name the static LLVM component archives instead, and drop the
# absolute libz3.so that LLVMSupport carries (qgemm never uses the SMT solver).

set(QGEMM_LLVM_COMPONENTS
  nvptxcodegen nvptxdesc nvptxinfo core support irreader irprinter asmparser
  bitreader bitwriter linker passes target targetparser mc mcparser analysis
  transformutils codegen frontendopenmp frontendoffloading object binaryformat
  demangle)
llvm_map_components_to_libnames(QGEMM_LLVM_STATIC_LIBS ${QGEMM_LLVM_COMPONENTS})

# Every imported target the MLIR and LLVM packages define.
get_directory_property(_qgemm_imported IMPORTED_TARGETS)
foreach(_t IN LISTS _qgemm_imported)
  get_target_property(_type ${_t} TYPE)
  if(NOT _type STREQUAL "STATIC_LIBRARY" AND NOT _type STREQUAL "INTERFACE_LIBRARY")
    continue()
  endif()
  get_target_property(_libs ${_t} INTERFACE_LINK_LIBRARIES)
  if(NOT _libs)
    continue()
  endif()
  set(_new "")
  foreach(_l IN LISTS _libs)
    if(_l STREQUAL "LLVM")
      list(APPEND _new ${QGEMM_LLVM_STATIC_LIBS})
    elseif(_l MATCHES "libz3")
      # dropped: see above
    else()
      list(APPEND _new ${_l})
    endif()
  endforeach()
  set_target_properties(${_t} PROPERTIES INTERFACE_LINK_LIBRARIES "${_new}")
endforeach()

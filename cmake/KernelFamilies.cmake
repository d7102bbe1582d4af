# The source files of every kernel family, one folder per family per layer.
#
#   qgemm_family_sources(<out-var> <lib-dir>)
#
# reads the families from dialect/include/qgemm/KernelFamilies.def (the
# enumerator of each QGEMM_KERNEL_FAMILY line) and lists the .cpp files of
# <lib-dir>/<Enumerator>/, so a new family's folder is built without an edit
# here or in the layer's CMakeLists.txt. A family whose folder holds no
# source is an error: each layer's registry links its entry by name.
set(QGEMM_KERNEL_FAMILIES_DEF
    "${CMAKE_CURRENT_LIST_DIR}/../dialect/include/qgemm/KernelFamilies.def")
set_property(DIRECTORY "${CMAKE_SOURCE_DIR}" APPEND PROPERTY
             CMAKE_CONFIGURE_DEPENDS "${QGEMM_KERNEL_FAMILIES_DEF}")

function(qgemm_kernel_families out)
  file(STRINGS "${QGEMM_KERNEL_FAMILIES_DEF}" lines
       REGEX "^QGEMM_KERNEL_FAMILY\\(")
  set(families)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^QGEMM_KERNEL_FAMILY\\(([A-Za-z0-9_]+),.*" "\\1"
           family "${line}")
    list(APPEND families "${family}")
  endforeach()
  set(${out} "${families}" PARENT_SCOPE)
endfunction()

function(qgemm_family_sources out libdir)
  qgemm_kernel_families(families)
  set(sources)
  foreach(family IN LISTS families)
    file(GLOB found CONFIGURE_DEPENDS "${libdir}/${family}/*.cpp")
    if(NOT found)
      message(FATAL_ERROR "kernel family ${family} (KernelFamilies.def) has "
                          "no source in ${libdir}/${family}/")
    endif()
    list(SORT found)
    list(APPEND sources ${found})
  endforeach()
  set(${out} "${sources}" PARENT_SCOPE)
endfunction()

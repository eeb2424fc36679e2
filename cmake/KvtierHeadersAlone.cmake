# Every public header compiles on its own, twice in one translation unit (its
# own includes suffice and its guard holds): CCCL's habit. One generated
# source per header, built with `all`, so a header that leans on what its
# includers happened to include first fails the build where it is.
file(GLOB_RECURSE kvtier_public_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/kvtier/*.hpp)
set(kvtier_header_sources)
foreach(header IN LISTS kvtier_public_headers)
  file(RELATIVE_PATH name ${PROJECT_SOURCE_DIR}/include ${header})
  # CUDA's headers exist only with the toolkit.
  if(NOT KVTIER_WITH_CUDA AND name MATCHES "kvtier/(kernels/(group_kernels|kv_kernels|page_pattern_kernels)|memory/cuda_check|memory/cuda_runtime)\\.hpp")
    continue()
  endif()
  string(MAKE_C_IDENTIFIER ${name} id)
  set(source ${CMAKE_BINARY_DIR}/headers_alone/${id}.cpp)
  file(CONFIGURE OUTPUT ${source} CONTENT "#include \"${name}\"\n#include \"${name}\"\n" @ONLY)
  list(APPEND kvtier_header_sources ${source})
endforeach()
add_library(kvtier_headers_alone OBJECT ${kvtier_header_sources})
target_include_directories(kvtier_headers_alone PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(kvtier_headers_alone PRIVATE nlohmann_json::nlohmann_json kvtier_warnings)
if(KVTIER_WITH_CUDA)
  target_link_libraries(kvtier_headers_alone PRIVATE CUDA::cudart)
endif()

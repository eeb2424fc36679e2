# Every third-party dependency comes from Debian packages (scripts/install-deps.sh).
# They are found through CMAKE_PREFIX_PATH first, so the same packages unpacked
# into a prefix (scripts/fetch-device-deps.sh, for a machine with no registry)
# work without installing anything into /.
find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_library(XXHASH_LIBRARY xxhash REQUIRED)
add_library(kvtier_xxhash INTERFACE)
target_include_directories(kvtier_xxhash SYSTEM INTERFACE ${XXHASH_INCLUDE_DIR})
target_link_libraries(kvtier_xxhash INTERFACE ${XXHASH_LIBRARY})
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
if(KVTIER_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(KVTIER_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

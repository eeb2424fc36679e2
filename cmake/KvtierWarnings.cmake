# Warnings every kvtier C++ target carries (not applied to nvcc device passes).
# KVTIER_WARNINGS_AS_ERRORS turns them into errors; CI sets it (the
# environment variable of that name gives the default), a user's build with
# another compiler version does not fail on a new warning. Not in sanitizer
# builds: GCC's flow warnings (-Wmaybe-uninitialized) misfire inside libstdc++
# under their instrumentation, and the release build compiles the same sources.
set(kvtier_werror_default OFF)
if(DEFINED ENV{KVTIER_WARNINGS_AS_ERRORS})
  set(kvtier_werror_default $ENV{KVTIER_WARNINGS_AS_ERRORS})
endif()
option(KVTIER_WARNINGS_AS_ERRORS "Warnings fail the build (CI)" ${kvtier_werror_default})
add_library(kvtier_warnings INTERFACE)
target_compile_options(kvtier_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${KVTIER_WARNINGS_AS_ERRORS}>,$<NOT:$<BOOL:${KVTIER_SANITIZER}>>>:-Werror>
  # A unity source includes the .cpp files, so GCC takes a class they define
  # for a header's and warns on its anonymous-namespace members: not a header here.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<BOOL:${KVTIER_UNITY_BUILD}>>:-Wno-subobject-linkage>)

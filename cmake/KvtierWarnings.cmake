# Warnings every kvtier C++ target carries (not applied to nvcc device passes).
add_library(kvtier_warnings INTERFACE)
target_compile_options(kvtier_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>)

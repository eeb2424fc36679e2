# One switch per sanitizer preset; applied to every target below this point.
if(KVTIER_SANITIZER STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(KVTIER_SANITIZER STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(KVTIER_SANITIZER STREQUAL "fuzzer")
  # Coverage-guided fuzzing (clang's libFuzzer) with ASan + UBSan: every
  # target is instrumented; only the fuzz targets link the fuzzer's main.
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KVTIER_SANITIZER=fuzzer needs clang (the fuzz preset sets it)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(NOT KVTIER_SANITIZER STREQUAL "")
  message(FATAL_ERROR "KVTIER_SANITIZER must be empty, 'address', 'thread' or 'fuzzer', not '${KVTIER_SANITIZER}'")
endif()
if(NOT KVTIER_SANITIZER STREQUAL "")
  # -O1, as the sanitizers' own docs advise: about 1.6x faster to compile than
  # -O2 and still fast enough to run every test (tests/CMakeLists.txt builds
  # the test code itself at -O0).
  add_compile_options(-O1)
  # Line tables are all a sanitizer report needs (file:line in every frame);
  # RelWithDebInfo's full -g made these builds about 2.5x slower to compile.
  add_compile_options(-g1)
endif()

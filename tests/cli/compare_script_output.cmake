# Runs `kvtier script SCRIPT` and compares its stdout and exit status with the
# expected ones. Usage: cmake -DKVTIER=... -DSCRIPT=... -DEXPECTED=... -DEXPECTED_RC=... -P this
execute_process(COMMAND ${KVTIER} script ${SCRIPT} OUTPUT_VARIABLE actual RESULT_VARIABLE rc)
file(READ ${EXPECTED} expected)
if(NOT rc STREQUAL EXPECTED_RC)
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECTED_RC}\n${actual}")
endif()
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "output differs from ${EXPECTED}\n--- expected\n${expected}--- actual\n${actual}")
endif()

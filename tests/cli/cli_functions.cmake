# run_cli and expect_match, shared by the command's test scripts (WORK_DIR:
# where the command runs).
# Runs the command; fails the test unless it exits with `expected`.
# Leaves stdout/stderr in cli_out/cli_err.
function(run_cli expected)
  execute_process(COMMAND "${MOEINT4_CLI}" ${ARGN}
    WORKING_DIRECTORY "${WORK_DIR}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT "${rc}" STREQUAL "${expected}")
    message(FATAL_ERROR "moeint4 ${ARGN}: exit ${rc}, expected ${expected}\n"
      "stdout:\n${out}\nstderr:\n${err}")
  endif()
  set(cli_out "${out}" PARENT_SCOPE)
  set(cli_err "${err}" PARENT_SCOPE)
endfunction()

function(expect_match text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: no match for '${regex}' in:\n${text}")
  endif()
endfunction()

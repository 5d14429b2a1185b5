# Runs an MPI job that must fail: non-zero exit within LIMIT seconds, output matching EXPECT.
# Arguments: -DMPIEXEC -DRANKS -DJOB -DMODE -DEXPECT -DLIMIT
string(TIMESTAMP start "%s")
execute_process(COMMAND ${MPIEXEC} -n ${RANKS} --oversubscribe ${JOB} ${MODE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
message("${out}${err}")
message("exit: ${rc}, ${seconds} s")
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0; it must fail")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the job's output lacks \"${EXPECT}\"")
endif()
if(seconds GREATER ${LIMIT})
  message(FATAL_ERROR "the job took ${seconds} s to fail (limit ${LIMIT} s)")
endif()

# Multi-process tests of the mpi backend, under mpirun (included from tests/CMakeLists.txt).
# Skipped without MPI and under sanitizers (Open MPI's own leaks and races would drown them).
if(NOT TESSERA_HAVE_MPI OR TESSERA_SANITIZE)
  return()
endif()

set(TESSERA_MPI_TEST_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
foreach(ranks 2 3 4)
  add_test(NAME collectives/mpi_${ranks}_ranks
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} --oversubscribe
                   $<TARGET_FILE:collectives_tests> "[mpi]")
  set_tests_properties(collectives/mpi_${ranks}_ranks PROPERTIES TIMEOUT 300 RUN_SERIAL ON
                       ENVIRONMENT "${TESSERA_MPI_TEST_ENV}")
endforeach()
add_test(NAME collectives/mpi_4_ranks_unchecked
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 --oversubscribe
                 $<TARGET_FILE:collectives_tests> "[mpi]")
set_tests_properties(collectives/mpi_4_ranks_unchecked PROPERTIES TIMEOUT 300 RUN_SERIAL ON
                     ENVIRONMENT "${TESSERA_MPI_TEST_ENV};TESSERA_TEST_MPI_UNCHECKED=1")

# Small collectives go through shared memory on one machine; this entry keeps them on MPI, the
# path they take across machines.
add_test(NAME collectives/mpi_4_ranks_without_shared_memory
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 --oversubscribe
                 $<TARGET_FILE:collectives_tests> "[mpi]")
set_tests_properties(collectives/mpi_4_ranks_without_shared_memory PROPERTIES TIMEOUT 300
                     RUN_SERIAL ON ENVIRONMENT "${TESSERA_MPI_TEST_ENV};TESSERA_MPI_SHARED_MEMORY=0")

# Open MPI over TCP alone (no shared-memory transport), send/recv on a fresh connection: messages
# of different tags between two ranks may then arrive out of order (Note [Completing every
# request] in collectives/mpi/process_group_mpi.cpp; before it, 1 in 6 of these runs hung, and
# about half when run by hand).
add_test(NAME collectives/mpi_4_ranks_tcp_only
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 --oversubscribe
                 $<TARGET_FILE:collectives_tests> "mpi: a send larger than its recv*")
set_tests_properties(collectives/mpi_4_ranks_tcp_only PROPERTIES TIMEOUT 300 RUN_SERIAL ON
                     ENVIRONMENT
                     "${TESSERA_MPI_TEST_ENV};TESSERA_MPI_SHARED_MEMORY=0;OMPI_MCA_btl=tcp,self")

add_executable(mpi_fault_job collectives/mpi_fault_job.cpp)
target_link_libraries(mpi_fault_job PRIVATE Tessera::tessera tessera_warnings)
target_include_directories(mpi_fault_job PRIVATE ${PROJECT_SOURCE_DIR})
foreach(mode throw timeout)
  if(mode STREQUAL "throw")
    set(expect "rank 2: uncaught exception: rank 2 fails on purpose")
  else()
    set(expect "rank [023]: \\[all_reduce\\] timed out after 1000 ms")
  endif()
  add_test(NAME collectives/mpi_fault_${mode}
           COMMAND ${CMAKE_COMMAND} -DMPIEXEC=${MPIEXEC_EXECUTABLE} -DRANKS=4
                   -DJOB=$<TARGET_FILE:mpi_fault_job> -DMODE=${mode} "-DEXPECT=${expect}"
                   -DLIMIT=20 -P ${CMAKE_CURRENT_SOURCE_DIR}/collectives/expect_job_failure.cmake)
  set_tests_properties(collectives/mpi_fault_${mode} PROPERTIES TIMEOUT 180 RUN_SERIAL ON
                       ENVIRONMENT "${TESSERA_MPI_TEST_ENV}")
endforeach()

# The DTensor property test under mpirun -n 4 (included from tests/CMakeLists.txt). Skipped
# without MPI and under sanitizers, as the collectives' MPI tests.
if(NOT TESSERA_HAVE_MPI OR TESSERA_SANITIZE)
  return()
endif()

add_test(NAME dtensor/mpi_4_ranks
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 --oversubscribe
                 $<TARGET_FILE:dtensor_tests> "[mpi]")
set_tests_properties(dtensor/mpi_4_ranks PROPERTIES TIMEOUT 600 RUN_SERIAL ON
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

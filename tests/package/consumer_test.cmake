# Builds and runs an outside project that uses Tessera one of the ways an engine does, from a
# clean scratch directory. Arguments: -DMODE -DBUILD_DIR -DSOURCE_DIR -DWORK_DIR -DGENERATOR
# -DTESSERA_SOURCE_DIR -DISA_VARIANTS -DWERROR -DCUDA (the parent build's options, so that a
# source build compiles as the parent did and ccache serves it from the parent's objects).
#   install:      cmake --install into a prefix, then find_package(Tessera) from it
#   relocated:    the same, with the prefix moved elsewhere after installing
#   subdirectory: add_subdirectory(tessera) (static), with GENERATOR
#   fetchcontent: FetchContent_MakeAvailable(tessera), with GENERATOR
file(REMOVE_RECURSE ${WORK_DIR})
set(configure_args -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release)
if(MODE STREQUAL "install" OR MODE STREQUAL "relocated")
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                  RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "cmake --install failed (${rc})")
  endif()
  set(prefix ${WORK_DIR}/prefix)
  if(MODE STREQUAL "relocated")
    file(RENAME ${WORK_DIR}/prefix ${WORK_DIR}/moved)
    set(prefix ${WORK_DIR}/moved)
  endif()
  list(APPEND configure_args -DCMAKE_PREFIX_PATH=${prefix})
elseif(MODE STREQUAL "subdirectory" OR MODE STREQUAL "fetchcontent")
  list(APPEND configure_args -DTESSERA_SOURCE_DIR=${TESSERA_SOURCE_DIR}
       -DTESSERA_ISA_VARIANTS=${ISA_VARIANTS} -DTESSERA_WERROR=${WERROR} -DTESSERA_CUDA=${CUDA})
else()
  message(FATAL_ERROR "unknown MODE ${MODE}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} ${configure_args} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the ${MODE} consumer failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build -j2 RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the ${MODE} consumer failed (${rc})")
endif()
execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}${err}")
if(rc OR NOT out MATCHES "consumer OK")
  message(FATAL_ERROR "the ${MODE} consumer program failed (${rc})")
endif()

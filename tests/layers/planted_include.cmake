# Copies include/seqpar and tools/check_layers.py to WORK, adds an include of the trainer
# to core/dtype.hpp (a layer including the top one), and requires check_layers.py to fail
# with a line naming that file and line.
file(REMOVE_RECURSE "${WORK}")
file(COPY "${SOURCE}/include" DESTINATION "${WORK}")
file(READ "${WORK}/include/seqpar/core/dtype.hpp" text)
string(REGEX MATCHALL "\n" lines "${text}")
list(LENGTH lines count)
math(EXPR planted "${count} + 1")
file(APPEND "${WORK}/include/seqpar/core/dtype.hpp" "#include \"seqpar/train/trainer.hpp\"\n")
execute_process(COMMAND "${PYTHON}" "${SOURCE}/tools/check_layers.py" "${WORK}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "check_layers.py passed a tree in which core/dtype.hpp includes train/trainer.hpp")
endif()
if(NOT out MATCHES "include/seqpar/core/dtype.hpp:${planted}: layer 'core' includes 'train'")
  message(FATAL_ERROR "check_layers.py failed without naming include/seqpar/core/dtype.hpp:${planted}")
endif()
file(REMOVE_RECURSE "${WORK}")

# A SIGTERM ends seqgpt_ner at a step boundary: every rank stops after the same step with a
# checkpoint of it, metrics.jsonl ends the attempt with an "interrupted" event naming the
# step, signal and checkpoint, the lock is released, the exit code is 128 + 15 and the
# message says how to resume; the resumed run continues from that checkpoint with each step
# in the metrics once. The signal goes to the process the lock names (world rank 0) when
# its output shows step 3 (signal_at.sh); under a launcher the other ranks learn it at the
# step boundary.
#   cmake -DEXE=<seqgpt_ner> -DOUT=<scratch dir> [-DMPIEXEC="mpirun;..." -DNP_FLAG=-np]
#         -P stop_check.cmake
include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
set(run_out "${OUT}/run")
if(MPIEXEC)
  set(command ${MPIEXEC} ${NP_FLAG} 2 "${EXE}" train --threads 1)
else()
  set(command "${EXE}" train --ranks 2)
endif()
set(common --out "${run_out}" --batch 8 --no-eval --seed 5 --plan dp2 --max-steps 400
           --logging_steps 1 --save_steps 1000)
execute_process(COMMAND ${command} ${common}
                COMMAND sh "${CMAKE_CURRENT_LIST_DIR}/signal_at.sh" "${run_out}/seqgpt_ner.lock" 3
                RESULTS_VARIABLE rcs OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
list(GET rcs 0 rc)
set(out "${out}${err}")
if(NOT rc EQUAL 143)
  message(FATAL_ERROR "a run sent SIGTERM exited with '${rc}', expected 143 (128 + 15):\n${out}")
endif()
if(NOT out MATCHES "stopped after step ([0-9]+) by SIGTERM \\(rank 0\\); checkpoint ([^;]+);")
  message(FATAL_ERROR "no 'stopped after step N by SIGTERM (rank 0); checkpoint ...':\n${out}")
endif()
set(n "${CMAKE_MATCH_1}")
set(checkpoint "${CMAKE_MATCH_2}")
expect("${out}" "--resume_from_checkpoint")
if(n LESS 3 OR n GREATER_EQUAL 400 OR NOT checkpoint STREQUAL "${run_out}/step-${n}.safetensors"
   OR NOT EXISTS "${checkpoint}")
  message(FATAL_ERROR "stopped after step ${n} with checkpoint '${checkpoint}':\n${out}")
endif()
math(EXPR next "${n} + 1")
string(FIND "${out}" "step ${next}/" past)
if(NOT past EQUAL -1)
  message(FATAL_ERROR "a rank went on past step ${n}:\n${out}")
endif()
if(EXISTS "${run_out}/seqgpt_ner.lock")
  message(FATAL_ERROR "the stopped run left its lock behind")
endif()
file(STRINGS "${run_out}/metrics.jsonl" rows REGEX "\"event\":\"interrupted\"")
list(LENGTH rows interrupted)
if(NOT interrupted EQUAL 1 OR NOT rows MATCHES "\"signal\":\"SIGTERM\"" OR NOT rows MATCHES
                                                                     "\"step\":${n}[,}]")
  message(FATAL_ERROR "metrics.jsonl: expected one interrupted event of step ${n}: ${rows}")
endif()

# The same command resumed: from that checkpoint, each step in the metrics once.
math(EXPR until "${n} + 2")
execute_process(COMMAND ${command} ${common} --resume_from_checkpoint --stop_after ${until}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the resumed run exited with ${rc}:\n${out}${err}")
endif()
expect("${out}" "resumed from ${checkpoint} at step ${n}")
file(STRINGS "${run_out}/metrics.jsonl" rows REGEX "\"event\":\"train\"")
set(steps "")
foreach(row IN LISTS rows)
  string(REGEX MATCH "\"step\":([0-9]+)" _ "${row}")
  list(APPEND steps "${CMAKE_MATCH_1}")
endforeach()
set(want "")
foreach(s RANGE 1 ${until})
  list(APPEND want ${s})
endforeach()
if(NOT steps STREQUAL want)
  message(FATAL_ERROR "metrics.jsonl train steps '${steps}', expected '${want}'")
endif()
message(STATUS "stopped after step ${n} by SIGTERM, resumed to step ${until}")

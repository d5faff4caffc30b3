# What the example's cmake -P checks share (included by faults_check, controls_check,
# mpirun_check and resume_check).

# ner_run(<expected rc> <output variable> args...): runs seqgpt_ner (EXE) on thread ranks,
# checks its exit code and returns stdout and stderr together.
function(ner_run want var)
  execute_process(COMMAND "${EXE}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL want)
    message(FATAL_ERROR "seqgpt_ner ${ARGN}: exit code ${rc}, expected ${want}:\n${out}\n${err}")
  endif()
  set(${var} "${out}${err}" PARENT_SCOPE)
endfunction()

# expect(<text> <what>): `what` occurs in `text`.
function(expect text what)
  string(FIND "${text}" "${what}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${what}' in:\n${text}")
  endif()
endfunction()

# micro(<loss> <var>): a loss in millionths. CMake has no floating point; losses lie in
# [0, 20) and are written as plain decimals.
function(micro value var)
  if(NOT value MATCHES "^([0-9]+)\\.([0-9]+)$")
    message(FATAL_ERROR "loss '${value}' is not a plain decimal")
  endif()
  set(whole "${CMAKE_MATCH_1}")
  string(SUBSTRING "${CMAKE_MATCH_2}000000" 0 6 frac)
  string(REGEX REPLACE "^0+([0-9])" "\\1" frac "${frac}")
  math(EXPR v "${whole} * 1000000 + ${frac}")
  set(${var} ${v} PARENT_SCOPE)
endfunction()

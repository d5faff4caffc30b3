# What the example's cmake -P checks share (included by every check script of this folder).

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

# train_losses(<run folder> <var>): the run's train losses in millionths, step by step.
function(train_losses dir var)
  file(STRINGS "${dir}/metrics.jsonl" lines REGEX "\"event\":\"train\"")
  set(out "")
  foreach(line IN LISTS lines)
    string(JSON loss GET "${line}" loss)
    micro("${loss}" m)
    list(APPEND out ${m})
  endforeach()
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

# near(<what> <losses> <reference losses> <per million>): as many losses, each within
# `per million` of the reference's, relative.
function(near what got want ppm)
  list(LENGTH got n)
  list(LENGTH want m)
  if(NOT n EQUAL m OR n EQUAL 0)
    message(FATAL_ERROR "${what}: losses ${got} against ${want}: not as many steps")
  endif()
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    list(GET got ${i} a)
    list(GET want ${i} b)
    math(EXPR diff "${a} - ${b}")
    if(diff LESS 0)
      math(EXPR diff "-${diff}")
    endif()
    math(EXPR scaled "${diff} * 1000000")
    math(EXPR bound "${b} * ${ppm}")
    if(scaled GREATER bound)
      math(EXPR step "${i} + 1")
      message(FATAL_ERROR "${what}: step ${step}'s loss ${a} (millionths) is not within ${ppm} per million of ${b}: ${got} against ${want}")
    endif()
  endforeach()
  message(STATUS "${what}: losses (millionths) ${got} against ${want}")
endfunction()

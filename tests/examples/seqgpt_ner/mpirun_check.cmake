# seqgpt_ner launched as mpirun and srun users launch it: one rank per process (MpiComm).
#   CHECK=plans     dp2, zero3x2 (2 processes) and tp2dp2 (4 processes) take the same steps
#                   as their thread ranks: the losses of metrics.jsonl agree; every rank's
#                   memory is reported, one line per process; only rank 0 prints
#   CHECK=resume    a checkpoint written by thread ranks resumes under mpirun and one written
#                   under mpirun resumes on thread ranks: the losses are an uninterrupted run's
#   CHECK=refusals  a job whose size the layout cannot take is refused, said once, before any
#                   data is read, as is --device cuda without the CUDA units or without GPUs
#                   (WITH_CUDA: 1 when built with them) and a folder another run holds; a
#                   failure on rank 0 while the others wait ends the whole job with its message
#   cmake -DEXE=<seqgpt_ner> -DMPIEXEC="mpirun;--oversubscribe" -DNP_FLAG=-n -DCHECK=plans
#         -DOUT=<scratch dir> [-DLAUNCHER=srun]
#         -P mpirun_check.cmake
# LAUNCHER (default mpirun) is the launcher's name as seqgpt_ner says it; with srun the check
# first asks Slurm for a one-task step and reports itself skipped when no controller answers
# (tools/start_slurm.sh starts a one-node cluster).
if(NOT LAUNCHER)
  set(LAUNCHER mpirun)
endif()
if(LAUNCHER STREQUAL "srun")
  execute_process(COMMAND ${MPIEXEC} ${NP_FLAG} 1 true RESULT_VARIABLE rc OUTPUT_QUIET
                  ERROR_VARIABLE err TIMEOUT 30)
  if(NOT rc EQUAL 0)
    message(STATUS "skipped: srun cannot run a one-task step here (no Slurm controller answers?"
                   " tools/start_slurm.sh starts a one-node cluster): ${rc} ${err}")
    return()
  endif()
endif()
file(REMOVE_RECURSE "${OUT}")
include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")
file(MAKE_DIRECTORY "${OUT}")
set(common --no-eval --quiet --seed 5 --threads 1)

# run(<np: 0 for threads> <want rc: ok|fail> <output var> args...): seqgpt_ner on thread ranks
# or under the launcher with np processes; returns stdout and stderr together.
function(run np want var)
  if(np EQUAL 0)
    set(command "${EXE}")
  else()
    set(command ${MPIEXEC} ${NP_FLAG} ${np} "${EXE}")
  endif()
  execute_process(COMMAND ${command} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err TIMEOUT 300)
  if(want STREQUAL "ok" AND NOT rc EQUAL 0)
    message(FATAL_ERROR "${command} ${ARGN}: exit code ${rc}:\n${out}\n${err}")
  elseif(want STREQUAL "fail" AND (rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$"))
    message(FATAL_ERROR "${command} ${ARGN}: exit code '${rc}', expected a failure:\n${out}\n${err}")
  endif()
  set(${var} "${out}${err}" PARENT_SCOPE)
endfunction()

# count(<text> <what> <var>): occurrences of `what` in `text`.
function(count text what var)
  string(REPLACE "${what}" "\n@@\n" marked "${text}")
  string(REGEX MATCHALL "\n@@\n" hits "${marked}")
  list(LENGTH hits n)
  set(${var} ${n} PARENT_SCOPE)
endfunction()

# The loss of each step, "step:loss", in step order, from a metrics.jsonl (which holds each
# step once, a resume superseding what it redid).
function(losses dir var)
  file(STRINGS "${dir}/metrics.jsonl" lines)
  set(result "")
  foreach(line IN LISTS lines)
    string(JSON event GET "${line}" event)
    if(event STREQUAL "train")
      string(JSON step GET "${line}" step)
      string(JSON loss GET "${line}" loss)
      list(APPEND result "${step}:${loss}")
    endif()
  endforeach()
  set(${var} "${result}" PARENT_SCOPE)
endfunction()

# same_losses(<what> <a> <b> <steps> <micro>): `steps` losses each, the same steps, at most
# `micro` millionths apart (the losses lie near 8: 80 is the plan tests' 1e-5 relative).
function(same_losses what a b steps tolerance)
  list(LENGTH a na)
  list(LENGTH b nb)
  if(NOT na EQUAL steps OR NOT nb EQUAL steps)
    message(FATAL_ERROR "${what}: ${na} and ${nb} losses, expected ${steps}:\n  ${a}\n  ${b}")
  endif()
  math(EXPR last "${steps} - 1")
  foreach(i RANGE ${last})
    list(GET a ${i} x)
    list(GET b ${i} y)
    string(REGEX REPLACE "^[0-9]+:" "" xv "${x}")
    string(REGEX REPLACE "^[0-9]+:" "" yv "${y}")
    string(REGEX REPLACE ":.*" "" xs "${x}")
    string(REGEX REPLACE ":.*" "" ys "${y}")
    micro("${xv}" xm)
    micro("${yv}" ym)
    math(EXPR d "${xm} - ${ym}")
    if(NOT xs STREQUAL ys OR d GREATER tolerance OR d LESS -${tolerance})
      message(FATAL_ERROR "${what}: step ${i}: ${x} vs ${y}: not the same step or more than "
                          "${tolerance}e-6 apart\n  ${a}\n  ${b}")
    endif()
  endforeach()
  message(STATUS "${what}: ${steps} losses within ${tolerance}e-6:\n  ${a}\n  ${b}")
endfunction()

# The ranks event of a metrics.jsonl (each rank's pid, memory and bytes), as JSON.
function(ranks_event dir var)
  file(STRINGS "${dir}/metrics.jsonl" lines REGEX "\"event\":\"ranks\"")
  set(${var} "${lines}" PARENT_SCOPE)
endfunction()

# expect_processes(<out> <dir> <np>): one memory line per rank, each from its own process,
# and the plan line once (only rank 0 prints).
function(expect_processes out dir np)
  math(EXPR top "${np} - 1")
  foreach(r RANGE ${top})
    expect("${out}" "  rank ${r}  pid ")
  endforeach()
  count("${out}" "peak memory per rank" lines)
  count("${out}" "rank(s) as processes" plan_lines)
  if(NOT lines EQUAL 1 OR NOT plan_lines EQUAL 1)
    message(FATAL_ERROR "${LAUNCHER}, ${np} processes: ${lines} memory tables and ${plan_lines} "
                        "plan lines, expected one of each (only rank 0 prints):\n${out}")
  endif()
  ranks_event("${dir}" event)
  string(JSON ranks LENGTH "${event}" ranks)
  string(JSON pid0 GET "${event}" ranks 0 pid)
  string(JSON pid1 GET "${event}" ranks 1 pid)
  string(JSON params GET "${event}" ranks ${top} by parameters)
  if(NOT ranks EQUAL np OR pid0 EQUAL pid1 OR params LESS_EQUAL 0)
    message(FATAL_ERROR "metrics.jsonl's ranks event: ${ranks} ranks (expected ${np}), pids "
                        "${pid0} and ${pid1} (expected two processes), rank ${top} holds "
                        "${params} parameter bytes:\n${event}")
  endif()
endfunction()

if(CHECK STREQUAL "plans")
  foreach(case IN ITEMS "dp2;2" "zero3x2;2" "tp2dp2;4")
    list(GET case 0 plan)
    list(GET case 1 np)
    run(0 ok out train --out "${OUT}/${plan}_threads" ${common} --batch 8 --plan ${plan} --max-steps 4)
    run(${np} ok out train --out "${OUT}/${plan}_mpi" ${common} --batch 8 --plan ${plan} --max-steps 4)
    losses("${OUT}/${plan}_threads" a)
    losses("${OUT}/${plan}_mpi" b)
    same_losses("${plan}: threads vs ${LAUNCHER} with ${np} processes" "${a}" "${b}" 4 1)
    expect("${out}" "${np} rank(s) as processes under ${LAUNCHER} (MpiComm)")
    expect_processes("${out}" "${OUT}/${plan}_mpi" ${np})
    foreach(f model.safetensors step-4.safetensors run.json tokenizer.json)
      if(NOT EXISTS "${OUT}/${plan}_mpi/${f}")
        message(FATAL_ERROR "${LAUNCHER}, ${np} processes, --plan ${plan} left no ${f}")
      endif()
    endforeach()
  endforeach()
elseif(CHECK STREQUAL "resume")
  # threads -> the launcher (dp2), and the launcher -> threads under another plan (zero3x2 ->
  # tp2 needs the checkpoint's canonical layout, not the writer's shards).
  set(steps --batch 8 --max-steps 6)
  run(0 ok out train --out "${OUT}/straight" ${common} ${steps} --plan dp2)
  run(0 ok out train --out "${OUT}/t2m" ${common} ${steps} --plan dp2 --stop-after 3)
  run(2 ok out train --out "${OUT}/t2m" ${common} ${steps} --plan dp2 --resume)
  expect("${out}" "resumed from ${OUT}/t2m/step-3.safetensors at step 3")
  run(2 ok out train --out "${OUT}/m2t" ${common} ${steps} --plan zero3x2 --stop-after 3)
  run(0 ok out train --out "${OUT}/m2t" ${common} ${steps} --plan tp2 --resume)
  expect("${out}" "resumed from ${OUT}/m2t/step-3.safetensors at step 3")
  losses("${OUT}/straight" a)
  losses("${OUT}/t2m" b)
  losses("${OUT}/m2t" c)
  same_losses("dp2 threads 3 steps + ${LAUNCHER} 3 steps vs 6 straight" "${a}" "${b}" 6 1)
  same_losses("zero3x2 ${LAUNCHER} 3 steps + tp2 threads 3 steps vs 6 straight" "${a}" "${c}" 6 1)
elseif(CHECK STREQUAL "refusals")
  # Before any data is read: a world the layout cannot take, said once by rank 0.
  run(2 fail out train --out "${OUT}/np" ${common} --plan tp2dp2 --max-steps 2)
  expect("${out}" "--plan tp2dp2 needs 4 ranks (tensor 2 x pipeline 1 x data 2), but ${LAUNCHER} started 2 processes")
  count("${out}" "needs 4 ranks" said)
  run(3 fail out train --out "${OUT}/np" ${common} --tensor-parallel 2 --max-steps 2)
  expect("${out}" "--tensor-parallel 2 over ${LAUNCHER} started 3 processes: 3 is not a multiple of tensor x pipeline = 2 x 1 = 2")
  count("${out}" "is not a multiple" said_too)
  if(NOT said EQUAL 1 OR NOT said_too EQUAL 1)
    message(FATAL_ERROR "a refused launch is said ${said} and ${said_too} times, expected once:\n${out}")
  endif()
  if(EXISTS "${OUT}/np")
    message(FATAL_ERROR "a refused job made ${OUT}/np")
  endif()
  # --device cuda: without the CUDA units refused before MPI starts; with them (on a machine
  # without GPUs) after every rank saw its node's GPUs. Either is said once.
  run(2 fail out train --out "${OUT}/gpu" ${common} --plan dp2 --max-steps 2 --device cuda)
  if(WITH_CUDA)
    set(why "--device cuda under ${LAUNCHER}: rank 0 (node")
  else()
    set(why "--device cuda: this seqgpt_ner was built without CUDA")
  endif()
  expect("${out}" "${why}")
  count("${out}" "${why}" said)
  if(NOT said EQUAL 1)
    message(FATAL_ERROR "the refused --device cuda is said ${said} times, expected once:\n${out}")
  endif()
  # Rank 0 cannot take the folder (pid 1 always lives) while rank 1 waits for it: every
  # rank refuses at once with rank 0's message, the lock untouched.
  file(MAKE_DIRECTORY "${OUT}/locked")
  file(WRITE "${OUT}/locked/seqgpt_ner.lock" "1\n")
  string(TIMESTAMP t0 "%s")
  run(2 fail out train --out "${OUT}/locked" ${common} --plan dp2 --max-steps 2)
  string(TIMESTAMP t1 "%s")
  math(EXPR waited "${t1} - ${t0}")
  expect("${out}" "seqgpt_ner: ${OUT}/locked: another run (pid 1) is using this output folder")
  count("${out}" "is using this output folder" said)
  if(waited GREATER 60 OR NOT said EQUAL 1)
    message(FATAL_ERROR "the refused job took ${waited} s to end and said so ${said} times")
  endif()
  file(READ "${OUT}/locked/seqgpt_ner.lock" owner)
  if(NOT owner STREQUAL "1\n")
    message(FATAL_ERROR "the live owner's lock was changed to '${owner}'")
  endif()
  # A failure of rank 0 alone (its metrics cannot be written) while the others wait for it
  # ends the whole job at once, with its message.
  file(MAKE_DIRECTORY "${OUT}/nometrics/metrics.jsonl")
  string(TIMESTAMP t0 "%s")
  run(2 fail out train --out "${OUT}/nometrics" ${common} --plan dp2 --max-steps 2)
  string(TIMESTAMP t1 "%s")
  math(EXPR waited "${t1} - ${t0}")
  expect("${out}" "seqgpt_ner: rank 0: ${OUT}/nometrics/metrics.jsonl: cannot be opened for appending metrics")
  if(waited GREATER 60)
    message(FATAL_ERROR "the failed job took ${waited} s to end")
  endif()
else()
  message(FATAL_ERROR "CHECK is '${CHECK}'; expected plans, resume or refusals")
endif()
message(STATUS "seqgpt_ner under ${LAUNCHER} (${CHECK}): all cases behave")

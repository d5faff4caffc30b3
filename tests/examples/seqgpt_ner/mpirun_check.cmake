# seqgpt_ner launched as mpirun and srun users launch it: one rank per process (MpiComm).
#   CHECK=plans     dp2, zero3x2 (2 processes) and tp2dp2 (4 processes) take the same steps
#                   as their thread ranks: the losses of metrics.jsonl agree; every rank's
#                   memory is reported, one line per process; only rank 0 prints
#   CHECK=layouts   8 processes under the layout flags: --tensor-parallel 2 (TP2 x DP4) and
#                   --tensor-parallel 2 --pipeline-parallel 2 (TP2 x PP2 x DP2) take the
#                   losses and end with the weights of one rank (the plan tests' tolerances:
#                   1e-5 and 1e-4 relative)
#   CHECK=zero      --zero-stage 1, 2 and 3 over 3, 5 and 6 processes: the losses and weights
#                   of one rank, and the bytes each rank sends in a step equal docs/plans.md's
#                   formulas
#   CHECK=resume    a checkpoint written by thread ranks resumes under mpirun and one written
#                   under mpirun resumes on thread ranks: the losses are an uninterrupted run's
#   CHECK=refusals  a job whose size the layout cannot take is refused, said once, before any
#                   data is read, as are processes given other options or schedules (MPMD),
#                   --device cuda without the CUDA units or without GPUs (WITH_CUDA: 1 when
#                   built with them) and a folder another run holds; a failure on rank 0 while
#                   the others wait ends the whole job with its message, as a --local_rank that
#                   is not the launcher's does
#   cmake -DEXE=<seqgpt_ner> -DMPIEXEC="mpirun;--oversubscribe" -DNP_FLAG=-n -DCHECK=plans
#         -DCOMPARE=<seqgpt_ner_compare_weights> -DOUT=<scratch dir> [-DLAUNCHER=srun]
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

# same_weights(<what> <a dir> <b dir>): model.safetensors of both within 1e-4 (relative L2 of
# every tensor, as the plan tests compare weights).
function(same_weights what a b)
  execute_process(COMMAND "${COMPARE}" "${a}/model.safetensors" "${b}/model.safetensors" 1e-4
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what}: the weights differ: ${out}${err}")
  endif()
  message(STATUS "${what}: ${out}")
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
elseif(CHECK STREQUAL "layouts")
  # One rank, then 8 processes as TP2 x DP4 (the brief's plan) and TP2 x PP2 x DP2 (an 8-GPU
  # server's tensor x pipeline x data layout).
  set(steps --batch 8 --max-steps 3)
  run(0 ok out train --out "${OUT}/single" ${common} ${steps} --plan single)
  losses("${OUT}/single" ref)
  foreach(case IN ITEMS "tp2dp4;--tensor-parallel;2" "tp2pp2dp2;--tensor-parallel;2;--pipeline-parallel;2")
    list(POP_FRONT case name)
    run(8 ok out train --out "${OUT}/${name}" ${common} ${steps} ${case})
    expect("${out}" "plan ${name} (")
    expect("${out}" "8 rank(s) as processes under ${LAUNCHER} (MpiComm)")
    expect_processes("${out}" "${OUT}/${name}" 8)
    losses("${OUT}/${name}" got)
    same_losses("${name} over 8 processes vs one rank" "${ref}" "${got}" 3 80)
    same_weights("${name} over 8 processes vs one rank" "${OUT}/single" "${OUT}/${name}")
  endforeach()
elseif(CHECK STREQUAL "zero")
  # ZeRO-1, -2 and -3 over 3, 5 and 6 processes, a batch of 30 rows (a micro-batch a rank:
  # m = 1), against one rank.
  set(steps --batch 30 --max-steps 3)
  run(0 ok out train --out "${OUT}/single" ${common} ${steps} --plan single)
  losses("${OUT}/single" ref)
  # TinyNer's units at tensor degree 1 (config/units.hpp): the embedding with its layernorm
  # (4608 x 128 + 2 x 128), two blocks (12 x 128^2 + 13 x 128 each), ln_f (2 x 128).
  set(units 590080 198272 198272 256)
  foreach(case IN ITEMS "1;3;2" "2;5;2" "3;6;3")
    list(GET case 0 stage)
    list(GET case 1 np)
    list(GET case 2 passes)
    run(${np} ok out train --out "${OUT}/zero${stage}" ${common} ${steps} --zero-stage ${stage})
    expect("${out}" "plan zero${stage}x${np} (Sharded<Zero${stage},${np}>; --zero-stage ${stage}): ${np} rank(s)")
    losses("${OUT}/zero${stage}" got)
    same_losses("ZeRO-${stage} over ${np} processes vs one rank" "${ref}" "${got}" 3 80)
    same_weights("ZeRO-${stage} over ${np} processes vs one rank" "${OUT}/single" "${OUT}/zero${stage}")
    # docs/plans.md: each unit's buffer padded to a multiple of D is cut into D shards of
    # ceil(n / D) elements; a reduce-scatter or an all-gather of it sends (D - 1) shards of
    # 4 bytes per rank: 2 passes a step for ZeRO-1, m + 1 for ZeRO-2, 3m for ZeRO-3 (m = 1
    # micro-batch). Besides, the loss sum and the gradient norm's sum (one double each)
    # are all-reduced: 2 (D - 1) x 8 bytes each.
    set(shards 0)
    foreach(n IN LISTS units)
      math(EXPR shards "${shards} + (${n} + ${np} - 1) / ${np}")
    endforeach()
    math(EXPR want "${passes} * (${np} - 1) * ${shards} * 4 + 2 * 2 * (${np} - 1) * 8")
    ranks_event("${OUT}/zero${stage}" event)
    math(EXPR top "${np} - 1")
    math(EXPR want3 "3 * ${want}")
    foreach(r RANGE ${top})
      string(JSON sent GET "${event}" ranks ${r} bytes_sent data)
      string(JSON taken GET "${event}" ranks ${r} steps)
      if(NOT taken EQUAL 3 OR NOT sent EQUAL want3)
        message(FATAL_ERROR "ZeRO-${stage} over ${np} processes: rank ${r} sent ${sent} bytes on "
                            "the data axis in ${taken} steps; docs/plans.md's formula gives "
                            "${want} a step")
      endif()
    endforeach()
    message(STATUS "ZeRO-${stage} over ${np} processes: every rank sent ${want} bytes a step "
                   "(${passes} passes of ${shards} elements x ${np}-1 ranks)")
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
  # Processes started with their own command lines (MPMD) that differ in what must be
  # equal: refused before the folder is looked at, naming each value and its ranks, once.
  if(LAUNCHER STREQUAL "mpirun")
    set(mpmd ${MPIEXEC} ${NP_FLAG} 1 "${EXE}" train --out "${OUT}/mpmd" ${common} --plan dp2
             --batch 8 --max-steps 2 : ${NP_FLAG} 1 "${EXE}" train --out "${OUT}/mpmd" ${common}
             --plan tp2 --batch 16 --seed 6 --max-steps 3)
    execute_process(COMMAND ${mpmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                    TIMEOUT 300)
    set(out "${out}${err}")
    if(rc EQUAL 0)
      message(FATAL_ERROR "${mpmd}: ranks that disagree were not refused:\n${out}")
    endif()
    foreach(what IN ITEMS "ranks disagree on what must be equal on all 2 of them"
                          "plan: rank 0 'dp2'; rank 1 'tp2'" "max_steps: rank 0 '2'; rank 1 '3'"
                          "ner.batch: rank 0 '8'; rank 1 '16'" "seed: rank 0 '5'; rank 1 '6'")
      expect("${out}" "${what}")
    endforeach()
    count("${out}" "ranks disagree" said)
    if(NOT said EQUAL 1 OR EXISTS "${OUT}/mpmd")
      message(FATAL_ERROR "a disagreement said ${said} times (expected once), or ${OUT}/mpmd made:\n${out}")
    endif()
    # Alike but for the schedules that decide which collectives run (saves, evaluations,
    # stops): refused at start-up, within seconds, not after the communicator's timeout.
    set(mpmd ${MPIEXEC} ${NP_FLAG} 1 "${EXE}" train --out "${OUT}/sched" ${common} --plan dp2
             --batch 8 --max-steps 4 --save_steps 1 --eval_steps 2 : ${NP_FLAG} 1 "${EXE}" train
             --out "${OUT}/sched" ${common} --plan dp2 --batch 8 --max-steps 4 --save_steps 2
             --eval_steps 3)
    string(TIMESTAMP t0 "%s")
    execute_process(COMMAND ${mpmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                    TIMEOUT 300)
    string(TIMESTAMP t1 "%s")
    math(EXPR waited "${t1} - ${t0}")
    set(out "${out}${err}")
    foreach(what IN ITEMS "save_steps: rank 0 '1'; rank 1 '2'" "eval_steps: rank 0 '2'; rank 1 '3'")
      expect("${out}" "${what}")
    endforeach()
    if(rc EQUAL 0 OR waited GREATER 60 OR EXISTS "${OUT}/sched")
      message(FATAL_ERROR "ranks with other schedules: exit code ${rc} after ${waited} s, or "
                          "${OUT}/sched made:\n${out}")
    endif()
  endif()
  # --local_rank (torch.distributed.launch's) must be the launcher's node-local rank: rank 1,
  # the node's second process, given 0 ends the job naming both.
  run(2 fail out train --out "${OUT}/local" ${common} --plan dp2 --max-steps 2 --local_rank 0)
  expect("${out}" "--local_rank 0, but ${LAUNCHER} (rank 1) makes this process number 1 on its node")
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
  # What only rank 0 sees (its metrics cannot be written) refuses every rank at once, with
  # rank 0's message, said once.
  file(MAKE_DIRECTORY "${OUT}/nometrics/metrics.jsonl")
  string(TIMESTAMP t0 "%s")
  run(2 fail out train --out "${OUT}/nometrics" ${common} --plan dp2 --max-steps 2)
  string(TIMESTAMP t1 "%s")
  math(EXPR waited "${t1} - ${t0}")
  expect("${out}" "seqgpt_ner: ${OUT}/nometrics/metrics.jsonl: cannot be opened for appending metrics")
  count("${out}" "cannot be opened for appending metrics" said)
  if(NOT said EQUAL 1)
    message(FATAL_ERROR "the refusal was said ${said} times")
  endif()
  if(waited GREATER 60)
    message(FATAL_ERROR "the failed job took ${waited} s to end")
  endif()
else()
  message(FATAL_ERROR "CHECK is '${CHECK}'; expected plans, layouts, zero, resume or refusals")
endif()
message(STATUS "seqgpt_ner under ${LAUNCHER} (${CHECK}): all cases behave")

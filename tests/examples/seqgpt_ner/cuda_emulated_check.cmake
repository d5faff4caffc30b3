# seqgpt_ner --device cuda on the emulated CUDA device of the tests (tests/emulation; the
# program built by preset emulated): bf16 and fp16 training on thread ranks (CudaThreadComm)
# and, under mpirun, on NCCL between processes; evaluation on the device; a CPU run resumed on
# the device and a device run resumed on the CPU. References: the CPU's fp32 run of the same
# data, batch and seed.
#   cmake -DEXE=<seqgpt_ner> -DOUT=<scratch dir> [-DMPIEXEC=mpirun
#         -DNP_FLAG=-n] -P cuda_emulated_check.cmake
file(REMOVE_RECURSE "${OUT}")
include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")
file(MAKE_DIRECTORY "${OUT}")
set(common --no-eval --quiet --seed 5 --batch 4 --max-steps 3)

# The reference: one rank on the CPU in fp32, the same 4-row batches.
ner_run(0 out train --out "${OUT}/cpu" ${common} --plan single --device cpu --precision fp32)
train_losses("${OUT}/cpu" cpu)

# Two thread ranks on one device in bf16 and fp16 (mixed: fp32 master weights, fp32 sums).
# Bound: 16-bit rounding of weights, activations and gradients; the CPU's own bf16 keeps
# within 1e-3 of fp32 over such steps (device_check.cmake), fp16 rounds finer.
foreach(precision IN ITEMS bf16 fp16)
  ner_run(0 out train --out "${OUT}/${precision}" ${common} --plan dp2 --device cuda
          --precision ${precision})
  expect("${out}" "2 rank(s) as threads of this process (CudaThreadComm) on cuda in ${precision}")
  if(NOT out MATCHES "rank 1  pid [0-9]+  cuda:0 ")
    message(FATAL_ERROR "no memory line of rank 1 on cuda:0:\n${out}")
  endif()
  train_losses("${OUT}/${precision}" got)
  near("--device cuda --precision ${precision}, 2 thread ranks" "${got}" "${cpu}" 1000)
endforeach()
file(STRINGS "${OUT}/fp16/metrics.jsonl" first REGEX "\"event\":\"train\"" LIMIT_COUNT 1)
string(JSON scale GET "${first}" loss_scale)
if(NOT scale GREATER 1)
  message(FATAL_ERROR "fp16 trained without a dynamic loss scale: loss_scale ${scale}")
endif()

# Generation on the device: greedy answers of the bf16 run's weights (loaded in fp32) are the
# CPU's, record for record.
set(eval_args --eval_limit 3 --max_new_tokens 12 --quiet)
foreach(device IN ITEMS cuda cpu)
  ner_run(0 out eval --out "${OUT}/bf16" --device ${device} ${eval_args})
  file(READ "${OUT}/bf16/dev.predictions.jsonl" predictions_${device})
endforeach()
if(predictions_cuda STREQUAL "" OR NOT predictions_cuda STREQUAL predictions_cpu)
  message(FATAL_ERROR "eval on cuda answered otherwise than on the cpu:\ncuda:\n${predictions_cuda}\ncpu:\n${predictions_cpu}")
endif()

# stop_and_resume(<dir> <reference> FIRST <args> THEN <args>): a run with the FIRST
# arguments stopped after 2 steps, resumed from its step-2 checkpoint with the THEN ones. Its
# first two losses must be those of <reference> (a list of losses: the stopped run's rows,
# each once), its third within 1e-3 of the CPU's fp32 third. Sets `out` to the resumed run's
# output.
function(stop_and_resume dir reference)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "FIRST;THEN")
  ner_run(0 out train --out "${OUT}/${dir}" ${common} ${arg_FIRST} --stop_after 2)
  ner_run(0 out train --out "${OUT}/${dir}" ${common} ${arg_THEN} --resume_from_checkpoint)
  expect("${out}" "step-2.safetensors at step 2")
  train_losses("${OUT}/${dir}" losses)
  string(REPLACE ";" " " what "${arg_FIRST} resumed with ${arg_THEN}")
  near("${what}" "${losses}" "${cpu}" 1000)
  list(SUBLIST losses 0 2 head)
  list(SUBLIST reference 0 2 want)
  if(NOT head STREQUAL want)
    message(FATAL_ERROR "the resumed run's first steps ${head} are not the stopped run's ${want}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

# A CPU run in fp32 resumes on the device in bf16, and a device run in bf16 on the CPU.
stop_and_resume(moved "${cpu}" FIRST --plan single --device cpu --precision fp32
                THEN --plan dp2 --device cuda --precision bf16)
expect("${out}" "on cuda in bf16")
train_losses("${OUT}/bf16" bf16)
stop_and_resume(back "${bf16}" FIRST --plan dp2 --device cuda --precision bf16
                THEN --plan single --device cpu --precision fp32)
expect("${out}" "on cpu in fp32")

# Under mpirun: a process per emulated GPU, NcclComm between them (the emulated NCCL over
# MPI): the thread ranks' losses, in each precision.
if(MPIEXEC)
  foreach(precision IN ITEMS bf16 fp16)
    execute_process(COMMAND ${MPIEXEC} ${NP_FLAG} 2 "${EXE}" train --out "${OUT}/mpirun_${precision}"
                            ${common} --plan dp2 --device cuda --precision ${precision}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "mpirun -np 2 seqgpt_ner --device cuda --precision ${precision}: exit code ${rc}:\n${out}\n${err}")
    endif()
    foreach(rank IN ITEMS 0 1)
      if(NOT out MATCHES "rank ${rank}  pid [0-9]+  cuda:${rank} ")
        message(FATAL_ERROR "rank ${rank} is not on cuda:${rank}:\n${out}")
      endif()
    endforeach()
    train_losses("${OUT}/mpirun_${precision}" got)
    train_losses("${OUT}/${precision}" threads)
    near("mpirun -np 2 --device cuda --precision ${precision} (NcclComm)" "${got}" "${threads}" 10)
  endforeach()
else()
  message(STATUS "no mpirun: the NCCL runs between processes are not checked")
endif()
message(STATUS "cuda check: seqgpt_ner --device cuda trains, evaluates and resumes on the emulated device")

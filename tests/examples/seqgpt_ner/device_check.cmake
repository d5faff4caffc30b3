# --device and --precision on a machine without a GPU: what the build refuses and with which
# message, and that --device cpu trains as before (its memory lines name the device).
#   cmake -DEXE=<seqgpt_ner> -DOUT=<scratch dir> -DWITH_CUDA=<0|1> -P device_check.cmake
# WITH_CUDA: whether the program holds the CUDA units (SEQPAR_NER_WITH_CUDA).
file(REMOVE_RECURSE "${OUT}")
include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")
file(MAKE_DIRECTORY "${OUT}")
set(common --no-eval --quiet --seed 5 --max-steps 1 --batch 4)

ner_run(0 out --help)
expect("${out}" "--device cpu|cuda")
expect("${out}" "--precision fp32|bf16|fp16")
ner_run(2 out train --out "${OUT}/bad" ${common} --device gpu)
expect("${out}" "--device is 'gpu'; expected cpu or cuda")
ner_run(2 out train --out "${OUT}/bad" ${common} --precision fp8)
expect("${out}" "--precision is 'fp8'; expected fp32, bf16 or fp16")
# fp16 on the CPU: this build compiles its CPU trainers in fp32 and bf16; refused before the
# data are read, as a DeepSpeed configuration's precision is.
ner_run(2 out train --out "${OUT}/bad" ${common} --precision fp16)
expect("${out}" "precision fp16 is not built for --device cpu in this seqgpt_ner; it has fp32, bf16 (fp16 trains with --device cuda)")
file(WRITE "${OUT}/fp16.json" [=[{"fp16": {"enabled": true, "initial_scale_power": 8}}]=])
ner_run(2 out train --out "${OUT}/bad" ${common} --deepspeed "${OUT}/fp16.json")
expect("${out}" "precision fp16 (from ${OUT}/fp16.json or --precision) is not built for --device cpu")

if(WITH_CUDA)
  # Thread ranks on a machine without a GPU: refused before the data are read or the output
  # folder is made (under a launcher, mpirun_check.cmake).
  ner_run(2 out train --out "${OUT}/gpu" ${common} --device cuda --plan dp2)
  expect("${out}" "--device cuda: this process sees no CUDA GPU")
  if(EXISTS "${OUT}/gpu")
    message(FATAL_ERROR "--device cuda without a GPU made ${OUT}/gpu")
  endif()
else()
  foreach(args IN ITEMS "--plan;dp2" "--precision;bf16" "--deepspeed;${OUT}/fp16.json")
    ner_run(2 out train --out "${OUT}/bad" ${common} --device cuda ${args})
    expect("${out}" "--device cuda: this seqgpt_ner was built without CUDA")
  endforeach()
  ner_run(2 out eval --out "${OUT}/bad" --device cuda)
  expect("${out}" "built without CUDA")
endif()

# The CPU path as before: fp32 on thread ranks, the device on the plan and memory lines.
ner_run(0 out train --out "${OUT}/cpu" ${common} --plan dp2 --device cpu --precision fp32)
expect("${out}" "plan dp2 (Replicated<2>; --zero-stage 0): 2 rank(s) as threads of this process (ThreadComm) on cpu in fp32")
if(NOT out MATCHES "rank 1  pid [0-9]+  cpu ")
  message(FATAL_ERROR "no memory line of rank 1 on cpu:\n${out}")
endif()
file(STRINGS "${OUT}/cpu/metrics.jsonl" ranks REGEX "\"event\":\"ranks\"")
if(NOT ranks MATCHES "\"device\":\"cpu\"")
  message(FATAL_ERROR "the ranks event names no device cpu: ${ranks}")
endif()
# The checkpoint records the device and precision (a resume may change them).
file(STRINGS "${OUT}/cpu/step-1.safetensors" header LIMIT_INPUT 65536 REGEX "\"device\"")
if(NOT header MATCHES "\"device\":\"cpu\"" OR NOT header MATCHES "\"precision\":\"fp32\"")
  message(FATAL_ERROR "the checkpoint's metadata names no device cpu and precision fp32")
endif()

# bf16 on the CPU (Bf16Mixed): --precision bf16 and --bf16 train the tiny model with the
# losses of the fp32 run within 1e-3 relative, step by step (the 16-bit rounding of weights,
# activations and gradients; fp32 master weights and moments).
set(few --no-eval --quiet --seed 5 --max-steps 6 --batch 8 --plan single)
ner_run(0 out train --out "${OUT}/fp32" ${few} --precision fp32)
train_losses("${OUT}/fp32" fp32)
foreach(flag IN ITEMS "--precision;bf16" "--bf16")
  string(REPLACE ";" "_" dir "bf16${flag}")
  ner_run(0 out train --out "${OUT}/${dir}" ${few} ${flag})
  expect("${out}" "on cpu in bf16")
  train_losses("${OUT}/${dir}" bf16)
  list(LENGTH fp32 n)
  list(LENGTH bf16 n16)
  if(NOT n EQUAL 6 OR NOT n16 EQUAL 6)
    message(FATAL_ERROR "expected 6 losses each: fp32 ${fp32}, bf16 ${bf16}")
  endif()
  near("${flag}" "${bf16}" "${fp32}" 1000)
endforeach()
message(STATUS "device check: --device and --precision refused and accepted as expected")

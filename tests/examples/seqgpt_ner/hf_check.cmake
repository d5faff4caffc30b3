# A trained run's model directory opens in Hugging Face transformers (config, weights,
# tokenizer) and generation there, as its generation_config.json says, writes the answer
# seqgpt_ner predict writes.
# Skipped, saying so, where Python has no transformers.
#   cmake -DEXE=<seqgpt_ner> -DPYTHON=<python3> -DTOOL=<tools/check_hf_dir.py> -DOUT=<scratch dir>
#         -P hf_check.cmake
execute_process(COMMAND "${PYTHON}" -c "import torch, transformers" RESULT_VARIABLE rc
                OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 0)
  message("skipped: transformers is not installed for ${PYTHON}")
  return()
endif()
file(REMOVE_RECURSE "${OUT}")
set(text "张伟在杭州的华鼎科技有限公司担任工程师。")

function(run var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

# Enough steps that the model's answers depend on the prompt; --export-hf puts the directory
# outside the run's folder. The run decodes by beam search with a penalty (not the tiny
# model's greedy default): generation_config.json must say so, and transformers' generate
# with it must answer as seqgpt_ner predict does with the same flags.
set(decoding --num-beams 3 --repetition-penalty 1.5)
run(out "${EXE}" train --out "${OUT}/run" --plan single --max-steps 40 --batch 8 --no-eval
    --quiet --seed 5 --export-hf "${OUT}/model" ${decoding})
foreach(f config.json generation_config.json model.safetensors tokenizer.json
          tokenizer_config.json special_tokens_map.json)
  if(NOT EXISTS "${OUT}/model/${f}")
    message(FATAL_ERROR "${OUT}/model/${f} is missing:\n${out}")
  endif()
endforeach()
file(READ "${OUT}/model/generation_config.json" gen)
string(JSON beams GET "${gen}" num_beams)
string(JSON penalty GET "${gen}" repetition_penalty)
if(NOT beams EQUAL 3 OR NOT penalty EQUAL 1.5)
  message(FATAL_ERROR "generation_config.json says num_beams ${beams}, repetition_penalty "
                      "${penalty}; the run decoded with 3 beams and a penalty of 1.5:\n${gen}")
endif()
run(line "${EXE}" predict --out "${OUT}/run" --text "${text}" ${decoding})
string(JSON answer GET "${line}" answer)
file(READ "${OUT}/run/run.json" info)
string(JSON n LENGTH "${info}" labels)
set(labels "")
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON l GET "${info}" labels ${i})
  list(APPEND labels "${l}")
endforeach()
list(JOIN labels "," labels)
run(out "${PYTHON}" "${TOOL}" "${OUT}/model" --text "${text}" --labels "${labels}"
    --answer "${answer}")
message(STATUS "${out}")

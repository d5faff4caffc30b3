# Which model a Hugging Face directory trains (--weights DIR): the compiled model whose shape
# its config.json describes; a published BLOOM shape this build did not compile is refused
# naming the SEQPAR_NER_MODELS that compiles it (also as --model), a shape no published BLOOM
# has is refused naming its fields. Refused before any weights are read: the directories hold
# a config.json and an empty weights file.
#   cmake -DEXE=<seqgpt_ner> -DOUT=<scratch dir> "-DMODELS=<SEQPAR_NER_MODELS>" -P models_check.cmake
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST)
file(REMOVE_RECURSE "${OUT}")
include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")
file(MAKE_DIRECTORY "${OUT}")
string(REPLACE "," ";" MODELS "${MODELS}")
set(common --no-eval --quiet --max-steps 1)

# hf_dir(<dir> <hidden> <layers> <heads>): a BLOOM directory of that shape, as published
# config.json files spell it.
function(hf_dir dir hidden layers heads)
  file(MAKE_DIRECTORY "${dir}")
  file(WRITE "${dir}/config.json" "{\"architectures\": [\"BloomForCausalLM\"], \"model_type\": \"bloom\", \"vocab_size\": 250880, \"hidden_size\": ${hidden}, \"n_layer\": ${layers}, \"n_head\": ${heads}, \"layer_norm_epsilon\": 1e-05}\n")
  file(WRITE "${dir}/model.safetensors" "")
endfunction()

# Published shapes (bigscience/bloom-*'s config.json): name in SEQPAR_NER_MODELS, hub name,
# hidden_size, n_layer, n_head.
set(shapes bloom1b1 bloom-1b1 1536 24 16  bloom1b7 bloom-1b7 2048 24 16
           bloom3b bloom-3b 2560 30 32  bloom7b1 bloom-7b1 4096 30 32)
list(JOIN MODELS ", " built)
list(JOIN MODELS ";" option)
set(refused 0)
while(shapes)
  list(POP_FRONT shapes name hub hidden layers heads)
  if(name IN_LIST MODELS)
    continue()
  endif()
  hf_dir("${OUT}/${hub}" ${hidden} ${layers} ${heads})
  ner_run(1 out train --out "${OUT}/run" ${common} --weights "${OUT}/${hub}")
  expect("${out}" "${OUT}/${hub}/config.json describes ${hub} (hidden ${hidden}, ${layers} layers, ${heads} heads); this seqgpt_ner is built for ${built}: rebuild with -DSEQPAR_NER_MODELS=\"${option};${name}\"")
  ner_run(1 out train --out "${OUT}/run" ${common} --model ${name})
  expect("${out}" "--model ${name}; this seqgpt_ner is built for ${built}: rebuild with -DSEQPAR_NER_MODELS=\"${option};${name}\"")
  math(EXPR refused "${refused} + 1")
endwhile()
if(EXISTS "${OUT}/run")
  message(FATAL_ERROR "a refused model made the output folder ${OUT}/run")
endif()

# A shape no published BLOOM has: refused naming config.json's fields.
hf_dir("${OUT}/odd" 2000 24 16)
ner_run(1 out train --out "${OUT}/run" ${common} --weights "${OUT}/odd")
expect("${out}" "${OUT}/odd/config.json: vocab_size 250880, hidden_size 2000, n_layer 24, n_head 16, layer_norm_epsilon 1e-05 is no published BLOOM shape")
expect("${out}" "bloom-1b7: hidden 2048, 24 layers, 16 heads")
ner_run(2 out train --out "${OUT}/run" ${common} --model bloom2b)
expect("${out}" "--model is 'bloom2b'; expected one of tiny, seqgpt560m, bloom1b1, bloom1b7, bloom3b, bloom7b1")
message(STATUS "seqgpt_ner: ${refused} published shapes this build lacks refused by name (built for ${built})")

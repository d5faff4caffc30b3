# A fine-tune as transformers' Trainer users run one (docs/ner.md#evaluation-and-the-best-model):
# evaluations by strategy on a dev sample, the best model by a metric, early stopping, the best
# checkpoint exported; the run folder and the model directory moved away from where they were
# made still evaluate, predict and resume; a launch script written for transformers' examples
# runs unchanged (LAUNCH_SCRIPT, under MPIEXEC where given).
include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")
file(REMOVE_RECURSE "${OUT}")
set(fx "${CMAKE_CURRENT_LIST_DIR}/../../data/fixtures")
file(MAKE_DIRECTORY "${OUT}/data")
configure_file("${fx}/classification_fixture.jsonl" "${OUT}/data/train.jsonl" COPYONLY)
configure_file("${fx}/classification_fixture.jsonl" "${OUT}/data/dev.jsonl" COPYONLY)
set(common --quiet --seed 5 --plan single --batch 2 --max_new_tokens 6)

# No improvement can beat a threshold of 2 in accuracy: the first evaluation stays the best,
# and two more without improvement end the run after step 3 of 20.
ner_run(0 out --data_dir "${OUT}/data" --output_dir "${OUT}/run" ${common} --max_steps 20
        --eval_strategy steps --eval_steps 1 --eval_limit 4 --metric_for_best_model accuracy
        --greater_is_better True --load_best_model_at_end True --early_stopping_patience 2
        --early_stopping_threshold 2 --save_total_limit 1 --per_device_eval_batch_size 3)
expect("${out}" "dev sample: 4 of 6 records (seed 5, stratified over 3 labels)")
expect("${out}" "stopped early after step 3: accuracy did not improve for 2 evaluation(s)")
expect("${out}" "best accuracy ")
expect("${out}" " at step 1 (step-1.safetensors): the final weights and the model directory are its")
file(READ "${OUT}/run/run.json" run)
string(JSON best_step GET "${run}" best step)
string(JSON tokenizer GET "${run}" tokenizer)
if(NOT best_step EQUAL 1 OR NOT tokenizer STREQUAL "tokenizer.json")
  message(FATAL_ERROR "run.json: best step '${best_step}', tokenizer '${tokenizer}'; expected 1 and "
                      "tokenizer.json (relative to the run folder)")
endif()
file(STRINGS "${OUT}/run/metrics.jsonl" evals ENCODING UTF-8 REGEX "\"event\":\"eval\"")
list(LENGTH evals n)
if(NOT n EQUAL 3)
  message(FATAL_ERROR "${n} eval rows, expected 3 (steps 1, 2, 3)")
endif()
list(GET evals 0 first)
string(JSON size GET "${first}" sample size)
string(JSON of GET "${first}" sample of)
string(JSON loss GET "${first}" loss)
if(NOT size EQUAL 4 OR NOT of EQUAL 6 OR loss STREQUAL "")
  message(FATAL_ERROR "eval row ${first}: expected its sample (4 of 6) and its loss")
endif()
file(STRINGS "${OUT}/run/metrics.jsonl" loaded ENCODING UTF-8 REGEX "\"event\":\"best_loaded\"")
expect("${loaded}" "\"step\":1")
# The best checkpoint survived a rotation that keeps one; the final weights are its.
foreach(f step-1.safetensors step-3.safetensors model.safetensors evaluations.json hf/seqgpt_task.json)
  if(NOT EXISTS "${OUT}/run/${f}")
    message(FATAL_ERROR "the run folder has no ${f}")
  endif()
endforeach()
if(EXISTS "${OUT}/run/step-2.safetensors")
  message(FATAL_ERROR "step-2.safetensors outlived the rotation (neither newest nor best)")
endif()

# Moved: the run folder, its model directory and the data, each somewhere else.
file(RENAME "${OUT}/run/hf" "${OUT}/model")
file(RENAME "${OUT}/run" "${OUT}/moved")
file(RENAME "${OUT}/data" "${OUT}/data2")
# The model directory alone answers: its task, labels and decoding beside config.json.
ner_run(0 out predict --weights "${OUT}/model" --output_dir "${OUT}/nowhere" --text "一句话")
expect("${out}" "{\"id\":1,\"task\":\"classification\"")
if(out MATCHES "majority")
  message(FATAL_ERROR "predict printed a baseline without training data:\n${out}")
endif()
# The moved run folder predicts, evaluates (its data named again) and resumes.
ner_run(0 out predict --output_dir "${OUT}/moved" --text "一句话" --max_new_tokens 6)
expect("${out}" "\"task\":\"classification\"")
ner_run(0 out eval --output_dir "${OUT}/moved" --data_dir "${OUT}/data2" --max_new_tokens 6)
expect("${out}" "dev: classification")
ner_run(0 out --data_dir "${OUT}/data2" --output_dir "${OUT}/moved" ${common} --max_steps 20
        --eval_strategy no --resume_from_checkpoint "${OUT}/moved/step-3.safetensors" --stop_after 4
        --save_total_limit 1)
expect("${out}" "resumed from ${OUT}/moved/step-3.safetensors at step 3")

# Exported again from the moved folder: copies, with what prediction needs.
ner_run(0 out export --checkpoint "${OUT}/moved/step-4.safetensors" --to "${OUT}/export4")
file(READ "${OUT}/export4/seqgpt_task.json" kept)
expect("${kept}" "\"tokenizer\": \"tokenizer.json\"")
expect("${kept}" "\"task_state\"")

# A launch script as transformers' examples are written, with the model directory above.
if(LAUNCH_SCRIPT)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env "SEQGPT_NER=${EXE}" "MODEL=${OUT}/model" "DATA=${OUT}/data2"
            "OUTPUT=${OUT}/script" "LAUNCH=${MPIEXEC}" bash "${LAUNCH_SCRIPT}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE sout ERROR_VARIABLE serr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${LAUNCH_SCRIPT}: exit code ${rc}:\n${sout}\n${serr}")
  endif()
  if(NOT EXISTS "${OUT}/script/model.safetensors")
    message(FATAL_ERROR "${LAUNCH_SCRIPT} left no model.safetensors:\n${sout}\n${serr}")
  endif()
endif()

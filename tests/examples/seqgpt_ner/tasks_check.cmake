# The three tasks through seqgpt_ner (docs/tasks.md): train a few steps -> eval -> predict
# on the fixtures of tests/data/fixtures (always), and on smp2017_ecdt, tnews and finre of
# DATA (the shared data; said skipped when absent). Each eval writes its predictions (one
# line per dev record, with its id) and its scores; the tiny model's few steps garble most
# answers, which must be counted, never crash. Dev gold the training set lacks is scored as
# missed and counted; a label list that leaves a prompt no text is refused. A named task the
# records contradict is refused with the record's line.
include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")
file(REMOVE_RECURSE "${OUT}")
set(common --quiet --seed 5 --plan single --batch 2 --max-steps 2 --max-new-tokens 6)

# lines(<file> <var>): the file's lines (counted as newlines: a CMake list would split
# answers at their brackets and semicolons).
function(lines file var)
  file(READ "${file}" c)
  string(REGEX MATCHALL "\n" l "${c}")
  list(LENGTH l n)
  set(${var} ${n} PARENT_SCOPE)
endfunction()

# plot_check(<run folder> <score fields...>): tools/plot_metrics.py (PLOT) finds the run's
# steps and dev scores, and draws them where Python has matplotlib.
function(plot_check dir)
  if(NOT PYTHON OR NOT PLOT)
    return()
  endif()
  execute_process(COMMAND "${PYTHON}" "${PLOT}" "${dir}/metrics.jsonl" --describe
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "plot_metrics.py --describe ${dir}: exit code ${rc}:\n${out}\n${err}")
  endif()
  expect("${out}" "loss (token mean): loss (2)")
  list(JOIN ARGN " (1), " scores)
  expect("${out}" "dev scores: ${scores} (1)\n")
  expect("${out}" "dev counts: correct (1), garbled (1), ")
  execute_process(COMMAND "${PYTHON}" "${PLOT}" "${dir}/metrics.jsonl" -o "${dir}/metrics.png"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 3)
    expect("${err}" "matplotlib is not installed")
  elseif(NOT rc EQUAL 0 OR NOT EXISTS "${dir}/metrics.png")
    message(FATAL_ERROR "plot_metrics.py ${dir}: exit code ${rc}, no metrics.png:\n${out}\n${err}")
  endif()
endfunction()

# task_run(<name> <data dir> <task> <dev records> <what the scores hold>): train, eval and
# predict; eval's files checked.
function(task_run name dir task records score_field)
  set(o "${OUT}/${name}")
  ner_run(0 out --data_dir "${dir}" --out "${o}" ${common} --eval-limit 3 ${ARGN})
  set(args ${ARGN})
  list(FIND args "--no-eval" no_eval)
  if(NOT no_eval EQUAL -1)
  elseif(task STREQUAL "ner")
    expect("${out}" "dev F1 ")  # NER's report, as before
    plot_check("${o}" f1 loss precision recall)
  else()
    expect("${out}" "dev ${task}: ")
    if(task STREQUAL "classification")
      plot_check("${o}" accuracy loss macro_f1)
    else()
      plot_check("${o}" f1 loss precision recall)
    endif()
  endif()
  ner_run(0 out eval --out "${o}" --max_new_tokens 6 --eval_limit ${records})
  expect("${out}" "garbled answers")
  lines("${o}/dev.predictions.jsonl" n)
  if(NOT n EQUAL records)
    message(FATAL_ERROR "${name}: ${n} prediction lines, expected ${records}")
  endif()
  file(READ "${o}/dev.predictions.jsonl" first LIMIT 200)
  expect("${first}" "\"task\":\"${task}\"")
  expect("${first}" "\"id\":")
  file(READ "${o}/dev.scores.json" scores)
  expect("${scores}" "\"task\":\"${task}\"")
  expect("${scores}" "\"${score_field}\"")
  expect("${scores}" "\"garbled\"")
  ner_run(0 out predict --out "${o}" --text "一句话" --text "另一句话" --max_new_tokens 6)
  expect("${out}" "{\"id\":2,\"task\":\"${task}\"")
endfunction()

set(fx "${CMAKE_CURRENT_LIST_DIR}/../../data/fixtures")
foreach(t classification relation)
  file(MAKE_DIRECTORY "${OUT}/data_${t}")
  configure_file("${fx}/${t}_fixture.jsonl" "${OUT}/data_${t}/train.jsonl" COPYONLY)
  configure_file("${fx}/${t}_fixture.jsonl" "${OUT}/data_${t}/dev.jsonl" COPYONLY)
endforeach()
file(MAKE_DIRECTORY "${OUT}/data_ner")
configure_file("${fx}/cluener_fixture.jsonl" "${OUT}/data_ner/train.jsonl" COPYONLY)
configure_file("${fx}/cluener_fixture.jsonl" "${OUT}/data_ner/dev.jsonl" COPYONLY)

task_run(classification "${OUT}/data_classification" classification 6 baseline)
file(READ "${OUT}/classification/run.json" run)
expect("${run}" "\"task\": \"classification\"")
task_run(relation "${OUT}/data_relation" relation 5 by_relation)
task_run(ner "${OUT}/data_ner" ner 5 by_label --task ner)
# A text-only CLUENER test file (with ids) turns into CLUENER's submission format.
ner_run(0 out predict --out "${OUT}/ner" --input "${fx}/texts_fixture.json"
        --submission "${OUT}/submission.json" --max_new_tokens 6)
file(READ "${OUT}/submission.json" sub0)
if(NOT sub0 MATCHES "^{\"id\":0,\"label\":{")
  message(FATAL_ERROR "submission line '${sub0}', expected {\"id\": 0, \"label\": {...}}")
endif()
# Gold the model cannot know is still gold: a dev record whose label (or one of whose
# mentions' labels) the training set lacks is scored, that gold counted as missed, and the
# records holding such gold counted beside the score.
foreach(t classification ner)
  set(d "${OUT}/unknown_${t}")
  file(MAKE_DIRECTORY "${d}")
  configure_file("${OUT}/data_${t}/train.jsonl" "${d}/train.jsonl" COPYONLY)
endforeach()
file(WRITE "${OUT}/unknown_classification/dev.jsonl"
     "{\"text\": \"国足客场战平叙利亚\", \"label\": \"体育\"}\n"
     "{\"text\": \"新片票房破十亿\", \"label\": \"娱乐\"}\n")
ner_run(0 out eval --out "${OUT}/classification" --data_dir "${OUT}/unknown_classification"
        --max_new_tokens 6)
expect("${out}" " of 2); majority class")  # both records scored, the unknown one wrong
expect("${out}" "2 records (1 with gold labels the task lacks, counted as missed)")
file(READ "${OUT}/classification/dev.scores.json" scores)
expect("${scores}" "\"unknown_gold\":1")
file(WRITE "${OUT}/unknown_ner/dev.jsonl"
     "{\"text\": \"张伟拿着长剑。\", \"label\": {\"name\": {\"张伟\": [[0, 1]]}, \"weapon\": {\"长剑\": [[4, 5]]}}}\n")
ner_run(0 out eval --out "${OUT}/ner" --data_dir "${OUT}/unknown_ner" --max_new_tokens 6)
expect("${out}" ", gold 2); 1 records (1 with gold labels the task lacks")
# A label list that leaves a prompt no room for its text is refused, naming the numbers and
# the --max_length that would fit (1,000 classes, each a token of the built tokenizer).
set(d "${OUT}/many_classes")
set(records "")
foreach(i RANGE 999)
  string(APPEND records "{\"text\": \"第${i}条消息\", \"label\": \"类${i}\"}\n")
endforeach()
file(WRITE "${d}/train.jsonl" "${records}")
file(WRITE "${d}/dev.jsonl" "{\"text\": \"第1条消息\", \"label\": \"类1\"}\n")
ner_run(1 out --data_dir "${d}" --out "${OUT}/many" ${common})
expect("${out}" "1000 prompt(s) (the first: record 0, prompt 0) cannot hold their text and label list in --max_length 512")
if(EXISTS "${OUT}/many/metrics.jsonl")
  message(FATAL_ERROR "a run whose prompts cannot hold their text trained:\n${out}")
endif()
# A wrong guess is refused with the record that contradicts it.
ner_run(1 out --data_dir "${OUT}/data_classification" --out "${OUT}/wrong" ${common}
        --task relation)
expect("${out}" "train.jsonl:1: record 1 is a classification record")
ner_run(1 out --data_dir "${OUT}/data_relation" --out "${OUT}/wrong" ${common} --task ner)
expect("${out}" "is a relation record")
ner_run(2 out --data_dir "${OUT}/data_relation" --out "${OUT}/wrong" ${common} --task topic)
expect("${out}" "--task is 'topic'")

# The shared data: a few steps on each data set (without the full dev evaluation at the
# end of training), eval on its first dev records.
if(NOT DATA OR NOT EXISTS "${DATA}/finre/train.jsonl")
  message(STATUS "tasks check: fixtures as expected; shared data skipped (no SEQPAR_DATA_DIR)")
  return()
endif()
foreach(pair IN ITEMS "smp2017_ecdt;classification;baseline" "tnews;classification;baseline"
                      "finre;relation;by_relation")
  list(GET pair 0 ds)
  list(GET pair 1 task)
  list(GET pair 2 field)
  task_run(${ds} "${DATA}/${ds}" ${task} 8 ${field} --no-eval)
endforeach()
message(STATUS "tasks check: fixtures and shared data (smp2017_ecdt, tnews, finre) as expected")

# Nothing lost, nothing silent: the command line refuses numbers that are not plain finite
# decimals; checkpoints rotate (the newest --save_total_limit kept), leftovers of a killed
# save are removed, one run at a time owns an output folder (a stale lock is taken over, a
# live one or another host's never); a resume says what changed and refuses without
# --allow_changed_options, having written nothing into the folder (another --data_dir or
# --model alike); after a resume the metrics hold each step once, a torn last row cut off;
# a run whose loss turns non-finite stops with an error; metrics that cannot be written end
# the run; weights for another model are refused from their header; predict keeps each
# line's number as its id and refuses a short submission; settings, run.json fields and
# folders that cannot work are refused before any work; export never overwrites a run folder
# or a folder of files, nor pairs a checkpoint with another tokenizer; weights without their
# tokenizer never train.
#   cmake -DEXE=<seqgpt_ner> -DOUT=<scratch dir> -P faults_check.cmake
file(REMOVE_RECURSE "${OUT}")
include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")
file(MAKE_DIRECTORY "${OUT}")
set(common --batch 8 --no-eval --quiet --seed 5 --plan single)

function(expect_files dir)
  foreach(f IN LISTS ARGN)
    if(f MATCHES "^!(.*)")
      if(EXISTS "${dir}/${CMAKE_MATCH_1}")
        message(FATAL_ERROR "${dir}/${CMAKE_MATCH_1} should not exist")
      endif()
    elseif(NOT EXISTS "${dir}/${f}")
      message(FATAL_ERROR "${dir}/${f} is missing")
    endif()
  endforeach()
endfunction()

# 1. Numbers: plain finite decimals in range, or exit code 2 naming the option and the value.
foreach(bad IN ITEMS "--lr;nan;--learning_rate" "--lr;inf;--learning_rate"
                     "--lr;0x1p-3;--learning_rate" "--lr;1e999;--learning_rate"
                     "--weight-decay;-0.1;--weight_decay" "--max-steps;99999999999999999999;--max_steps"
                     "--seed;-1;--seed" "--seed;18446744073709551616;--seed"
                     "--batch;0x10;--train_batch_size" "--save-total-limit;0;--save_total_limit")
  list(GET bad 0 flag)
  list(GET bad 1 value)
  list(GET bad 2 name)
  ner_run(2 out train ${flag} ${value})
  expect("${out}" "${name}")
  if(NOT flag STREQUAL "--save-total-limit")
    expect("${out}" "got '${value}'")
  endif()
endforeach()

# 2. Rotation: checkpoints every 2 steps, the newest 2 kept.
set(rot "${OUT}/rot")
ner_run(0 out train --out "${rot}" ${common} --max-steps 6 --save-every 2 --save-total-limit 2)
expect_files("${rot}" step-4.safetensors step-6.safetensors model.safetensors metrics.jsonl
             "!step-2.safetensors" "!seqgpt_ner.lock")

# 3. A resume with a changed lr schedule is refused, saying what differs, before it touches
# the folder: the leftovers, the stale lock and the incomplete checkpoint stay. Allowed, it
# removes the leftovers of a killed save (ours only), takes the stale lock over and sets the
# incomplete checkpoint aside.
file(WRITE "${rot}/.step-8.safetensors.tmp.1a2b3c" "partial")
file(WRITE "${rot}/.model.safetensors.tmp.ff" "partial")
file(WRITE "${rot}/.notes.txt.tmp.1" "not ours")
file(WRITE "${rot}/run.json.tmp.keep" "not ours either")
file(WRITE "${rot}/seqgpt_ner.lock" "2147483647\n")
file(WRITE "${rot}/step-99.safetensors" "truncated")
ner_run(1 out train --out "${rot}" ${common} --max-steps 8 --save-every 2 --resume)
expect("${out}" "options.schedule.total: checkpoint '6', this run '8'")
expect("${out}" "--allow_changed_options")
expect_files("${rot}" .notes.txt.tmp.1 run.json.tmp.keep .step-8.safetensors.tmp.1a2b3c
             .model.safetensors.tmp.ff seqgpt_ner.lock step-99.safetensors
             "!step-99.safetensors.incomplete")
# A row that a full disk tore (no newline) is cut off when the resume opens the metrics,
# and said: the resume's rows start lines of their own (every line below parses as JSON).
set(torn "{\"event\":\"train\",\"step\":7,\"lo")
string(LENGTH "${torn}" torn_bytes)
file(APPEND "${rot}/metrics.jsonl" "${torn}")
ner_run(0 out train --out "${rot}" ${common} --max-steps 8 --save-every 2 --resume --allow_changed_options)
expect("${out}" "cut a torn last row (${torn_bytes} bytes) off ${rot}/metrics.jsonl")
expect("${out}" "taking over the stale lock")
expect("${out}" "passing over an incomplete checkpoint: ${rot}/step-99.safetensors")
expect("${out}" "removed ${rot}/.step-8.safetensors.tmp.1a2b3c")
expect_files("${rot}" .notes.txt.tmp.1 run.json.tmp.keep "!.step-8.safetensors.tmp.1a2b3c"
             "!.model.safetensors.tmp.ff" "!seqgpt_ner.lock" step-99.safetensors.incomplete
             "!step-99.safetensors")
expect("${out}" "resumed from ${rot}/step-6.safetensors at step 6")
expect("${out}" "continuing with a changed options.schedule.total")
expect_files("${rot}" step-6.safetensors step-8.safetensors "!step-4.safetensors")
file(STRINGS "${rot}/metrics.jsonl" lines)
set(resumes "")
foreach(line IN LISTS lines)
  string(JSON event GET "${line}" event)
  if(event STREQUAL "resume")
    string(JSON step GET "${line}" step)
    list(APPEND resumes ${step})
  endif()
endforeach()
if(NOT resumes STREQUAL "6")
  message(FATAL_ERROR "metrics.jsonl marks resumes at '${resumes}', expected one at step 6")
endif()

# The metrics hold each step once: the steps 7 and 8 the refused attempts never took, the
# rows of steps 1 to 6 of the first run.
file(STRINGS "${rot}/metrics.jsonl" lines)
set(steps "")
foreach(line IN LISTS lines)
  string(JSON event GET "${line}" event)
  if(event STREQUAL "train")
    string(JSON step GET "${line}" step)
    list(APPEND steps ${step})
  endif()
endforeach()
if(NOT steps STREQUAL "1;2;3;4;5;6;7;8")
  message(FATAL_ERROR "metrics.jsonl holds the train steps '${steps}', expected 1 to 8 once each")
endif()

# 4. A live owner (pid 1 always exists) keeps the folder; its lock is not touched. Nor is the
# lock of a run on another node sharing the file system, whatever its pid.
file(WRITE "${rot}/seqgpt_ner.lock" "1\n")
ner_run(1 out train --out "${rot}" ${common} --max-steps 8 --resume)
expect("${out}" "another run (pid 1) is using this output folder")
expect_files("${rot}" seqgpt_ner.lock)
file(WRITE "${rot}/seqgpt_ner.lock" "2147483647 some-other-node\n")
ner_run(1 out train --out "${rot}" ${common} --max-steps 8 --resume)
expect("${out}" "is held by pid 2147483647 on some-other-node, not this host")
file(READ "${rot}/seqgpt_ner.lock" owner)
if(NOT owner STREQUAL "2147483647 some-other-node\n")
  message(FATAL_ERROR "another node's lock was changed to '${owner}'")
endif()
file(REMOVE "${rot}/seqgpt_ner.lock")
# An empty lock (a start that could not write it: a full disk) names no run; who made it
# cannot be known, so it is not taken over, and the message says which file to remove.
file(WRITE "${rot}/seqgpt_ner.lock" "")
ner_run(1 out train --out "${rot}" ${common} --max-steps 8 --resume)
expect("${out}" "the lock ${rot}/seqgpt_ner.lock names no run")
expect("${out}" "remove it once no run uses this folder")
expect_files("${rot}" seqgpt_ner.lock)
file(REMOVE "${rot}/seqgpt_ner.lock")

# 4b. A resume that is refused writes nothing into the folder: another --data_dir (its own
# tokenizer, caches and run.json would replace the run's) or another --model (refused from
# the model's shape, before SeqGPT-560M is allocated; in a build without it too) leaves
# every file as it was.
set(other "${OUT}/other_data")
set(corpus "${CMAKE_CURRENT_LIST_DIR}/../../../examples/data")
file(COPY "${corpus}/train.jsonl" "${corpus}/dev.jsonl" DESTINATION "${other}")
file(APPEND "${other}/train.jsonl" [=[{"text":"张伟在杭州工作。","label":{"name":{"张伟":[[0,1]]}}}
]=])
set(watched tokenizer.json run.json metrics.jsonl cache/train.tokens.safetensors
            step-8.safetensors)
foreach(f IN LISTS watched)
  file(SHA256 "${rot}/${f}" before_${f})
endforeach()
file(GLOB listing_before RELATIVE "${rot}" "${rot}/*" "${rot}/cache/*")
foreach(refused IN ITEMS "--data_dir;${other};ner.data: checkpoint"
                         "--model;seqgpt560m;model: checkpoint '")
  list(GET refused 0 flag)
  list(GET refused 1 value)
  list(GET refused 2 why)
  ner_run(1 out train --out "${rot}" ${common} --max-steps 8 --resume ${flag} "${value}")
  expect("${out}" "${why}")
  foreach(f IN LISTS watched)
    file(SHA256 "${rot}/${f}" after)
    if(NOT after STREQUAL before_${f})
      message(FATAL_ERROR "a resume refused for another ${flag} changed ${rot}/${f}")
    endif()
  endforeach()
  file(GLOB listing_after RELATIVE "${rot}" "${rot}/*" "${rot}/cache/*")
  if(NOT listing_before STREQUAL listing_after)
    message(FATAL_ERROR "a resume refused for another ${flag} changed the folder:\n  ${listing_before}\n  ${listing_after}")
  endif()
endforeach()

# 5. A learning rate that blows the weights up: the non-finite steps are skipped, logged,
# and the second in a row ends the run with an error naming the step.
ner_run(1 out train --out "${rot}" ${common} --max-steps 14 --resume --allow_changed_options --lr 1e30
    --max-nonfinite-steps 2 --save-every 1)
expect("${out}" "not finite in 2 steps in a row")
expect("${out}" "skipped: loss")
file(STRINGS "${rot}/metrics.jsonl" lines)
# A skipped step is logged under the step it attempted (the last update's + 1), never the
# previous step's, and each row has its own "attempt", one more than the row before.
set(skipped 0)
set(updated 0)
set(attempt 0)
foreach(line IN LISTS lines)
  string(JSON event GET "${line}" event)
  if(event STREQUAL "resume")
    string(JSON updated GET "${line}" step)
    set(attempt 0)
  elseif(event STREQUAL "train")
    string(JSON s GET "${line}" skipped)
    string(JSON step GET "${line}" step)
    string(JSON a GET "${line}" attempt)
    math(EXPR next "${attempt} + 1")
    if(attempt GREATER 0 AND NOT a EQUAL next)
      message(FATAL_ERROR "metrics.jsonl: attempt ${a} follows attempt ${attempt}: ${line}")
    endif()
    set(attempt ${a})
    if(s STREQUAL "ON" OR s STREQUAL "true")
      math(EXPR skipped "${skipped} + 1")
      math(EXPR next "${updated} + 1")
      if(NOT step EQUAL next)
        message(FATAL_ERROR "metrics.jsonl: a skipped step after update ${updated} is logged as "
                            "step ${step}; expected ${updated} + 1: ${line}")
      endif()
    else()
      set(updated ${step})
    endif()
  endif()
endforeach()
list(GET lines -1 last)
string(JSON event GET "${last}" event)
string(JSON why ERROR_VARIABLE none GET "${last}" message)
if(skipped LESS 1 OR NOT event STREQUAL "error")
  message(FATAL_ERROR "metrics.jsonl has ${skipped} skipped steps and ends with '${last}'; expected "
                      "skipped steps and an error event")
endif()
expect("${why}" "not finite in 2 steps in a row")

# 6. Metrics that cannot be written end the run.
file(MAKE_DIRECTORY "${OUT}/nometrics/metrics.jsonl")
ner_run(1 out train --out "${OUT}/nometrics" ${common} --max-steps 2)
expect("${out}" "metrics.jsonl: cannot be opened for appending metrics")

# 7. Weights of another model are refused from the header, before SeqGPT-560M is allocated.
ner_run(1 out train --out "${OUT}/wrong" ${common} --max-steps 2 --model seqgpt560m --weights "${rot}/model.safetensors")
expect("${out}" "this model (vocab 250880, hidden 1024, 24 layers) expects")
# 8. A fresh run in a folder holding an earlier run's checkpoints refuses to start and
#    deletes nothing; with --overwrite-output-dir it replaces them with its own.
ner_run(1 out train --out "${rot}" ${common} --max-steps 2 --save-every 1)
expect("${out}" "holds checkpoints of an earlier run (step-9.safetensors); --resume_from_checkpoint continues that run")
expect_files("${rot}" step-8.safetensors step-9.safetensors)
ner_run(0 out train --out "${rot}" ${common} --max-steps 2 --save-every 1 --overwrite_output_dir)
expect("${out}" "removed ${rot}/step-9.safetensors of an earlier run")
expect_files("${rot}" step-1.safetensors step-2.safetensors "!step-8.safetensors" "!step-9.safetensors")

# 9. Input that cannot be used is refused before any work, naming it: label lists with an
# empty label, a --max_length that leaves no token, decoding that cannot decode, a file
# where the output folder or the model directory should be (exit code 2, the folder as it
# was).
file(WRITE "${OUT}/a_file" "x")
foreach(bad IN ITEMS "train;--labels;,;--labels: label 1 of ',' is empty"
                     "train;--labels;name,,company;--labels: label 2 of 'name,,company' is empty"
                     "eval;--max-length;1;--max_length is 1"
                     "predict;--num-beams;0;--num_beams: num_beams is 0"
                     "predict;--repetition-penalty;0;--repetition_penalty: repetition_penalty is 0"
                     "train;--out;${OUT}/a_file;--output_dir ${OUT}/a_file is a file"
                     "predict;--out;${OUT}/a_file;--output_dir ${OUT}/a_file is a file"
                     "train;--export-hf;${OUT}/a_file;--export_hf ${OUT}/a_file is a file")
  list(GET bad 0 command)
  list(GET bad 1 flag)
  list(GET bad 2 value)
  list(GET bad 3 message)
  ner_run(2 out ${command} --out "${rot}" ${common} --text "张伟" ${flag} "${value}")
  expect("${out}" "${message}")
endforeach()
file(READ "${OUT}/a_file" kept)
if(NOT kept STREQUAL "x")
  message(FATAL_ERROR "${OUT}/a_file was changed")
endif()
# predict --input: a line that is not UTF-8 is named by file and line and skipped (the
# other lines answered), or with --on_bad_input stop ends the run there.
# A line's id is its line number, also after a skipped or an empty line (each one said).
string(ASCII 255 ff)
file(WRITE "${OUT}/input.txt" "张伟在杭州工作。\n李${ff}\n\n王芳在北京。\n")
ner_run(0 out predict --out "${rot}" --input "${OUT}/input.txt")
expect("${out}" "skipped ${OUT}/input.txt:2: record 2: line 2, byte 4:")
expect("${out}" "not UTF-8")
expect("${out}" "skipped ${OUT}/input.txt:3: empty line")
expect("${out}" "{\"id\":1,\"task\":\"ner\",\"text\":\"张伟在杭州工作。\"")
expect("${out}" "{\"id\":4,\"task\":\"ner\",\"text\":\"王芳在北京。\"")
ner_run(1 out predict --out "${rot}" --input "${OUT}/input.txt" --on_bad_input stop)
expect("${out}" "${OUT}/input.txt:2: record 2: line 2, byte 4:")
string(FIND "${out}" "王芳在北京" answered)
if(NOT answered EQUAL -1)
  message(FATAL_ERROR "--on_bad_input stop answered the lines after the bad one:\n${out}")
endif()
# A submission missing a skipped record is refused, nothing written.
file(WRITE "${OUT}/test.json" "{\"id\": 0, \"text\": \"张伟在杭州工作。\"}\n{\"id\": 1, \"text\": \"李${ff}\"}\n")
ner_run(1 out predict --out "${rot}" --input "${OUT}/test.json" --submission "${OUT}/sub.json")
expect("${out}" "--submission ${OUT}/sub.json: 1 record(s) of ${OUT}/test.json were skipped")
expect_files("${OUT}" "!sub.json")

# 10. Settings and files that cannot work are refused before any work, naming the option,
# the file and field, or the path: an answer too long for any memory, a run.json field of
# the wrong type, a file in the way of a folder, a duplicate key of a DeepSpeed
# configuration (controls_check), a read-only run folder.
ner_run(2 out predict --out "${rot}" --text "张伟" --max_new_tokens 1000000000000)
expect("${out}" "--max_new_tokens: max_new_tokens is 1000000000000; expected 1 to 65536")
set(badinfo "${OUT}/badinfo")
file(MAKE_DIRECTORY "${badinfo}")
file(READ "${rot}/run.json" info)
string(JSON info SET "${info}" max_new_tokens "\"many\"")
file(WRITE "${badinfo}/run.json" "${info}")
ner_run(1 out eval --out "${badinfo}" --weights "${rot}/model.safetensors")
expect("${out}" "${badinfo}/run.json: field 'max_new_tokens' is a string (\"many\"); expected an integer")
ner_run(2 out train --out "${OUT}/a_file/run" ${common})
expect("${out}" "--output_dir ${OUT}/a_file/run: ${OUT}/a_file is a file")
ner_run(2 out export --checkpoint "${rot}/step-2.safetensors" --to "${OUT}/a_file")
expect("${out}" "--to ${OUT}/a_file is a file")
execute_process(COMMAND unshare -m sh -c "mount --bind -o ro \"$0\" \"$0\" && exec \"$@\""
                        "${rot}" "${EXE}" eval --out "${rot}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(err MATCHES "unshare|mount")
  message(STATUS "faults check: the read-only run folder is not tested (no private mount: ${err})")
else()
  expect("${out}${err}" "--output_dir ${rot}: no file can be created in ${rot} (Read-only file system)")
  if(NOT rc EQUAL 2 OR out MATCHES "dev F1")
    message(FATAL_ERROR "eval in a read-only run folder: exit code ${rc}, expected 2 before any work:\n${out}${err}")
  endif()
endif()

# 11. export: never into the run folder (nor a folder inside it); a folder holding files
# only with --overwrite_output_dir; the tokenizer the checkpoint records or none.
ner_run(1 out export --checkpoint "${rot}/step-2.safetensors" --to "${rot}/hf2")
expect("${out}" "--to ${rot}/hf2 is inside the run folder ${rot}")
ner_run(1 out export --checkpoint "${rot}/step-2.safetensors" --to "${rot}")
expect("${out}" "is inside the run folder")
set(exp "${OUT}/exported")
ner_run(0 out export --checkpoint "${rot}/step-2.safetensors" --to "${exp}")
file(SHA256 "${exp}/model.safetensors" first)
ner_run(1 out export --checkpoint "${rot}/step-1.safetensors" --to "${exp}")
expect("${out}" "--to ${exp} is not empty")
expect("${out}" "--overwrite_output_dir")
file(SHA256 "${exp}/model.safetensors" kept)
if(NOT kept STREQUAL first)
  message(FATAL_ERROR "a refused export changed ${exp}/model.safetensors")
endif()
ner_run(0 out export --checkpoint "${rot}/step-1.safetensors" --to "${exp}" --overwrite_output_dir)
file(READ "${rot}/tokenizer.json" tok)
file(WRITE "${OUT}/other_tokenizer.json" "${tok}\n")  # the same ids, another digest
ner_run(1 out export --checkpoint "${rot}/step-2.safetensors" --to "${OUT}/exported2"
        --tokenizer "${OUT}/other_tokenizer.json")
expect("${out}" "${rot}/step-2.safetensors was trained with the tokenizer of digest")
expect("${out}" "but ${OUT}/other_tokenizer.json (digest")
ner_run(1 out predict --out "${rot}" --weights "${rot}/step-2.safetensors" --text "张伟"
        --tokenizer "${OUT}/other_tokenizer.json")
expect("${out}" "was trained with the tokenizer of digest")

# 12. Weights without their tokenizer never train with one built from the data.
set(notok "${OUT}/no_tokenizer")
file(COPY "${exp}/config.json" "${exp}/model.safetensors" DESTINATION "${notok}")
ner_run(1 out train --out "${OUT}/notok_run" ${common} --max-steps 1 --weights "${notok}")
expect("${out}" "${notok}/tokenizer.json is missing")
expect("${out}" "--tokenizer")
expect_files("${OUT}" "!notok_run/metrics.jsonl")
message(STATUS "faults check: all cases behave")

# The everyday training controls and --deepspeed, end to end on the tiny model:
# --gradient_accumulation_steps (the same losses as one micro-batch per rank; the global
# batch = micro-batch x accumulation x data ranks), --save_steps, --eval_steps, --max_length
# (prompts cut on the left, or skipped), a DeepSpeed configuration mapped onto the layout
# and schedule, refused by key, or refused for its precision on the CPU; Hugging Face's
# names and an unknown option answered with the nearest; export of a stopped run's
# checkpoint; eval on the data the run was trained on; --local_rank against the launcher's.
#   cmake -DEXE=<seqgpt_ner> -DOUT=<scratch dir> [-DDS_GUIDE=<zero3_offload.json>] -P controls_check.cmake
file(REMOVE_RECURSE "${OUT}")
include("${CMAKE_CURRENT_LIST_DIR}/check_common.cmake")
file(MAKE_DIRECTORY "${OUT}")
set(common --no-eval --quiet --seed 5)

# events(<dir> <event> <field> <var>): the field of every such event of dir's metrics.jsonl.
function(events dir event field var)
  file(STRINGS "${dir}/metrics.jsonl" lines)
  set(result "")
  foreach(line IN LISTS lines)
    string(JSON e GET "${line}" event)
    if(e STREQUAL event)
      string(JSON v GET "${line}" ${field})
      list(APPEND result "${v}")
    endif()
  endforeach()
  set(${var} "${result}" PARENT_SCOPE)
endfunction()

# 1. Accumulation: 8 rows over 2 ranks as 2 micro-batches of 2 rows each take the steps that
#    one micro-batch of 4 rows takes (within rounding).
ner_run(0 out train --out "${OUT}/whole" ${common} --plan dp2 --batch 8 --max-steps 4)
ner_run(0 out train --out "${OUT}/accum" ${common} --plan dp2 --micro-batch 2 --gradient-accumulation-steps 2 --max-steps 4)
expect("${out}" "batch 8 rows = micro-batch 2 x accumulation 2 x 2 data rank(s)")
events("${OUT}/accum" start batch b)
if(NOT b EQUAL 8)
  message(FATAL_ERROR "--micro-batch 2 --gradient-accumulation-steps 2 on dp2: batch ${b}, expected 8")
endif()
events("${OUT}/whole" train loss a)
events("${OUT}/accum" train loss c)
foreach(i RANGE 3)
  list(GET a ${i} x)
  list(GET c ${i} y)
  micro("${x}" xm)
  micro("${y}" ym)
  math(EXPR d "${xm} - ${ym}")
  if(d GREATER 10 OR d LESS -10)
    message(FATAL_ERROR "step ${i}: loss ${x} with one micro-batch, ${y} with two: more than 1e-5 apart")
  endif()
endforeach()
ner_run(2 out train --out "${OUT}/bad" --batch 8 --gradient-accumulation-steps -1)
expect("${out}" "--gradient_accumulation_steps expects a non-negative decimal integer")

# 2. --save-steps: a checkpoint every 2 steps, all kept.
ner_run(0 out train --out "${OUT}/save" ${common} --plan single --batch 4 --max-steps 6 --save-steps 2
    --save-total-limit 10)
foreach(s 2 4 6)
  if(NOT EXISTS "${OUT}/save/step-${s}.safetensors")
    message(FATAL_ERROR "--save-steps 2: no step-${s}.safetensors")
  endif()
endforeach()
if(EXISTS "${OUT}/save/step-3.safetensors")
  message(FATAL_ERROR "--save-steps 2 wrote step-3.safetensors")
endif()
# The model directory of a finished run (transformers' check of it: hf_check.cmake).
foreach(f config.json generation_config.json model.safetensors tokenizer.json
          tokenizer_config.json special_tokens_map.json)
  if(NOT EXISTS "${OUT}/save/hf/${f}")
    message(FATAL_ERROR "the finished run wrote no hf/${f}")
  endif()
endforeach()
file(READ "${OUT}/save/hf/config.json" config)
string(JSON arch GET "${config}" architectures 0)
string(JSON vocab GET "${config}" vocab_size)
string(JSON layers GET "${config}" n_layer)
file(READ "${OUT}/save/hf/generation_config.json" gen)
string(JSON beams GET "${gen}" num_beams)
if(NOT arch STREQUAL "BloomForCausalLM" OR NOT vocab EQUAL 4608 OR NOT layers EQUAL 2 OR NOT beams EQUAL 1)
  message(FATAL_ERROR "hf/config.json or generation_config.json of the tiny model:\n${config}\n${gen}")
endif()

# 3. --eval-steps: evaluations at steps 2 and 4 (and none between).
ner_run(0 out train --out "${OUT}/eval" --quiet --seed 5 --plan single --batch 4 --max-steps 4
    --eval-steps 2 --eval-limit 2 --max-new-tokens 4 --eval-rows 64)
events("${OUT}/eval" eval step e)
if(NOT e STREQUAL "2;4")
  message(FATAL_ERROR "--eval-steps 2 over 4 steps evaluated at steps '${e}', expected 2;4")
endif()

# 4. --max-length: prompts cut on the left (the answer kept), or with --truncation skip left out;
# a limit at which a cut would leave a prompt none of its text is refused, naming the limit.
ner_run(1 out train --out "${OUT}/cut" ${common} --plan single --batch 4 --max-steps 1 --max-length 64)
expect("${out}" "cannot hold their text and label list in --max_length 64")
ner_run(0 out train --out "${OUT}/cut" ${common} --plan single --batch 4 --max-steps 1 --max-length 80)
string(REGEX MATCH "train: [0-9]+ examples[^\n]*--max_length 80: ([0-9]+) prompts cut on the left, ([0-9]+) skipped" m "${out}")
if(NOT m OR CMAKE_MATCH_1 EQUAL 0)
  message(FATAL_ERROR "--max-length 80 cut no prompt:\n${out}")
endif()
set(cut ${CMAKE_MATCH_1})
ner_run(0 out train --out "${OUT}/skip" ${common} --plan single --batch 4 --max-steps 1 --max-length 80
    --truncation skip)
string(REGEX MATCH "train: [0-9]+ examples[^\n]*--max_length 80: 0 prompts cut on the left, ([0-9]+) skipped" m "${out}")
if(NOT m OR NOT CMAKE_MATCH_1 GREATER_EQUAL cut)
  message(FATAL_ERROR "--max-length 80 --truncation skip skipped fewer than the ${cut} cut before:\n${out}")
endif()

# 5. --deepspeed: ZeRO-2 over the in-process ranks, the batch from micro x accumulation,
#    WarmupDecayLR; performance keys named as ignored.
file(WRITE "${OUT}/ds.json" [=[
{
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 2,
  "zero_optimization": {"stage": 2, "overlap_comm": true},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": [0.9, 0.99]}},
  "scheduler": {"type": "WarmupDecayLR",
                "params": {"warmup_min_lr": 0, "warmup_max_lr": "auto", "warmup_num_steps": 2,
                           "total_num_steps": "auto", "warmup_type": "linear"}},
  "gradient_clipping": 1.0,
  "steps_per_print": 5
}
]=])
ner_run(0 out train --out "${OUT}/ds" ${common} --deepspeed "${OUT}/ds.json" --max-steps 4 --lr 1e-3)
expect("${out}" "zero_optimization.stage=2 -> --zero-stage 2")
expect("${out}" "plan zero2x2 (Sharded<Zero2,2>; --zero-stage 2)")
expect("${out}" "ignored (performance only; the results are the same): steps_per_print=5, zero_optimization.overlap_comm=true")
expect("${out}" "batch 8 rows = micro-batch 2 x accumulation 2 x 2 data rank(s); lr linear, linear warmup from 0; AdamW betas 0.9, 0.99")
if(NOT EXISTS "${OUT}/ds/hf/model.safetensors")  # a run of two ranks writes it too
  message(FATAL_ERROR "the zero2x2 run wrote no hf/model.safetensors:\n${out}")
endif()
events("${OUT}/ds" train lr lrs)
list(GET lrs 0 lr0)
list(GET lrs 1 lr1)
if(NOT lr0 MATCHES "^0(\\.0*)?$" OR NOT lr1 MATCHES "^0\\.0005")
  message(FATAL_ERROR "WarmupDecayLR over 2 warmup steps to 1e-3: rates ${lrs}, expected 0, 0.0005, ...")
endif()
file(WRITE "${OUT}/lamb.json" [=[{"optimizer": {"type": "Lamb"}, "zero_optimization": {"stage": 1, "mics_shard_size": 4}}]=])
ner_run(1 out train --out "${OUT}/lamb" ${common} --deepspeed "${OUT}/lamb.json")
expect("${out}" "2 key(s) that seqpar does not honour")
expect("${out}" "optimizer.type=\"Lamb\"")
expect("${out}" "zero_optimization.mics_shard_size=4")
# A key given twice in one object is refused, as DeepSpeed refuses it (a JSON reader would
# keep the last one silently).
file(WRITE "${OUT}/twice.json" [=[{"bf16": {"enabled": true, "enabled": false}}]=])
ner_run(1 out train --out "${OUT}/twice" ${common} --deepspeed "${OUT}/twice.json")
expect("${out}" "${OUT}/twice.json: key 'bf16.enabled' appears twice in one object")
file(WRITE "${OUT}/bf16.json" [=[{"bf16": {"enabled": true}}]=])
ner_run(0 out train --out "${OUT}/bf16" ${common} --deepspeed "${OUT}/bf16.json" --max-steps 1)
expect("${out}" "on cpu in bf16")
file(WRITE "${OUT}/fp16.json" [=[{"fp16": {"enabled": true}}]=])
ner_run(2 out train --out "${OUT}/fp16" ${common} --deepspeed "${OUT}/fp16.json")
expect("${out}" "precision fp16 (from ${OUT}/fp16.json or --precision) is not built for --device cpu in this seqgpt_ner; it has fp32, bf16")
if(EXISTS "${OUT}/fp16")
  message(FATAL_ERROR "a refused precision made ${OUT}/fp16")
endif()
if(DS_GUIDE AND EXISTS "${DS_GUIDE}")
  ner_run(0 out train --out "${OUT}/guide" ${common} --deepspeed "${DS_GUIDE}" --max-steps 2 --batch 8)
  expect("${out}" "zero_optimization.stage=3 -> --zero-stage 3")
  expect("${out}" "plan zero3x2 (Sharded<Zero3,2>; --zero-stage 3)")
  expect("${out}" "--offload optimizer+params")
  # The guide's 4 GPUs: ZeRO-3 over the 4 ranks (here as threads).
  ner_run(0 out train --out "${OUT}/guide4" ${common} --deepspeed "${DS_GUIDE}" --max-steps 1 --batch 8 --ranks 4)
  expect("${out}" "plan zero3x4 (Sharded<Zero3,4>; --zero-stage 3): 4 rank(s)")
else()
  message(STATUS "the users' guide's zero3_offload.json is not here (DS_GUIDE): that run is skipped")
endif()
# 6. Hugging Face's names as they are written; an unknown one is answered with the nearest.
ner_run(0 out train --output_dir "${OUT}/hf_names" --quiet --no_eval --seed 5 --learning_rate 1e-3
    --max_steps 2 --per_device_train_batch_size 2 --gradient_accumulation_steps 2
    --logging_steps 1 --warmup_ratio 0.5 --save_steps 1 --save_total_limit 1)
expect("${out}" "batch 8 rows = micro-batch 2 x accumulation 2 x 2 data rank(s)")
if(NOT EXISTS "${OUT}/hf_names/step-2.safetensors" OR EXISTS "${OUT}/hf_names/step-1.safetensors")
  message(FATAL_ERROR "--save_steps 1 --save_total_limit 1 should leave step-2 alone")
endif()
ner_run(2 out train --out "${OUT}/typo" --learning-rat 1e-3)
expect("${out}" "unknown option '--learning-rat'; did you mean --learning_rate?")

# 7. export: the transformers directory of a checkpoint of a run that stopped (no
# model.safetensors, no hf/), with the run's tokenizer; its weights are the checkpoint's.
ner_run(0 out train --out "${OUT}/stopped" ${common} --plan single --batch 4 --max-steps 6 --stop_after 3)
if(EXISTS "${OUT}/stopped/hf" OR EXISTS "${OUT}/stopped/model.safetensors")
  message(FATAL_ERROR "a stopped run wrote its final weights")
endif()
ner_run(0 out export --checkpoint "${OUT}/stopped/step-3.safetensors" --to "${OUT}/exported")
expect("${out}" "model directory ${OUT}/exported from ${OUT}/stopped/step-3.safetensors (tiny")
foreach(f config.json generation_config.json model.safetensors tokenizer.json
          tokenizer_config.json special_tokens_map.json)
  if(NOT EXISTS "${OUT}/exported/${f}")
    message(FATAL_ERROR "export wrote no ${f}")
  endif()
endforeach()
file(STRINGS "${OUT}/exported/model.safetensors" moments LIMIT_INPUT 65536 REGEX "optimizer\\.")
file(STRINGS "${OUT}/exported/model.safetensors" weights LIMIT_INPUT 65536 REGEX "transformer\\.ln_f")
if(moments OR NOT weights)
  message(FATAL_ERROR "the exported weights should hold the model's tensors and no AdamW moment")
endif()

# 8. eval without --data_dir: the data the run was trained on (run.json), never the bundled
# corpus silently; a folder without run.json is refused.
file(MAKE_DIRECTORY "${OUT}/small")
file(COPY "${CMAKE_CURRENT_LIST_DIR}/../../../examples/data/dev.jsonl"
          "${CMAKE_CURRENT_LIST_DIR}/../../../examples/data/train.jsonl" DESTINATION "${OUT}/small")
ner_run(0 out train --out "${OUT}/evaldata" ${common} --plan single --batch 4 --max-steps 2
    --data_dir "${OUT}/small")
ner_run(0 out eval --out "${OUT}/evaldata" --eval_limit 2 --max_new_tokens 2)
expect("${out}" "data ${OUT}/small")
file(COPY "${OUT}/evaldata/model.safetensors" DESTINATION "${OUT}/norun")
ner_run(1 out eval --out "${OUT}/norun" --labels name --tokenizer "${OUT}/evaldata/tokenizer.json")
expect("${out}" "no run.json names the data this run was trained on; pass --data_dir")
# 9. --local_rank, as torch.distributed.launch passes it: taken where the launcher's node-local
# rank (here torchrun's LOCAL_RANK) is the same, refused naming both where it differs.
set(ENV{LOCAL_RANK} 1)
ner_run(2 out train --out "${OUT}/local" ${common} --plan single --max-steps 1 --local_rank 0)
expect("${out}" "--local_rank 0, but LOCAL_RANK makes this process number 1 on its node")
ner_run(0 out train --out "${OUT}/local" ${common} --plan single --batch 4 --max-steps 1
        --local-rank=1)
unset(ENV{LOCAL_RANK})
message(STATUS "controls check: accumulation, save/eval steps, max length, deepspeed, names, export, eval data, local rank: all as expected")

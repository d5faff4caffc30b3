#!/usr/bin/env bash
# A fine-tune launched the way transformers' example scripts are, flag for flag:
#   torchrun --nproc_per_node 2 run_clm.py --model_name_or_path ... --do_train ...
# becomes
#   mpirun -np 2 seqgpt_ner --model_name_or_path ... --do_train ...
# SEQGPT_NER is the program, MODEL a model directory, DATA the data folder, OUTPUT the run's
# folder; LAUNCH is the launcher (mpirun and its flags), empty for ranks as threads.
set -euo pipefail
NPROC_PER_NODE=${NPROC_PER_NODE:-2}
launch=()
if [[ -n ${LAUNCH:-} ]]; then
  read -r -a launch <<< "$LAUNCH"
  launch+=(-np "$NPROC_PER_NODE")
fi

"${launch[@]}" "$SEQGPT_NER" \
  --model_name_or_path "$MODEL" \
  --data_dir "$DATA" \
  --do_train \
  --do_eval \
  --output_dir "$OUTPUT" \
  --overwrite_output_dir \
  --per_device_train_batch_size 1 \
  --per_device_eval_batch_size 4 \
  --gradient_accumulation_steps 1 \
  --learning_rate 2e-5 \
  --weight_decay 0.01 \
  --warmup_ratio 0.03 \
  --lr_scheduler_type cosine \
  --num_train_epochs 1 \
  --max_steps 2 \
  --logging_steps 1 \
  --eval_strategy steps \
  --eval_steps 1 \
  --save_strategy steps \
  --save_steps 1 \
  --save_total_limit 1 \
  --load_best_model_at_end True \
  --metric_for_best_model loss \
  --bf16 False \
  --gradient_checkpointing true \
  --seed 42 \
  --report_to none

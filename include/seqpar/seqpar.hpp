#pragma once
// The umbrella header: everything public in seqpar. The CPU backend, MPI, tokenizer and
// CUDA parts appear only where their dependency is (the seqpar::cpu / ::mpi / ::tokenizer /
// ::cuda targets define SEQPAR_WITH_*; the CUDA part needs nvcc, or SEQPAR_SEPARATE_COMPILATION
// with its kernels compiled once: SEQPAR_CUDA_BACKEND), so a program that links seqpar::seqpar
// alone builds with the core.

#include "seqpar/backend/device.hpp"  // Cpu, Cuda, the Device concept, Ops<Device>
#include "seqpar/config/bloom.hpp"    // BloomConfig, Bloom<...>, SeqGPT560M, the published shapes
#include "seqpar/core/arena.hpp"      // Arena, Buffer, Memory categories and their counts
#include "seqpar/core/crc32c.hpp"     // crc32c: the checksum of saved tensors
#include "seqpar/core/dtype.hpp"      // DType, exact f16/bf16 conversions
#include "seqpar/core/error.hpp"      // Error, SEQPAR_CHECK
#include "seqpar/core/fields.hpp"     // FieldOf, aggregate_fields: an aggregate's one field list
#include "seqpar/core/rng.hpp"        // CounterRng: plan-independent random numbers
#include "seqpar/core/separate_compilation.hpp"  // SEQPAR_DECL, SEQPAR_CUDA_BACKEND
#if defined(SEQPAR_WITH_EIGEN) || __has_include(<Eigen/Core>)
#include "seqpar/backend/cpu/ops.hpp"  // Ops<Cpu>: Eigen GEMMs and row-wise loops (seqpar::cpu)
#endif
#include "seqpar/comm/agreement.hpp"     // require_agreement: what every rank must share
#include "seqpar/comm/communicator.hpp"  // the Communicator concept, CommStats, ring byte counts
#include "seqpar/comm/fingerprint.hpp"   // CommCall, CommHistory, comm_checks
#include "seqpar/comm/local_rank.hpp"    // launcher_local_rank: the GPU a process takes
#include "seqpar/comm/thread_comm.hpp"   // ThreadComm, run_ranks
#include "seqpar/comm/timeout.hpp"       // comm_timeout (SEQPAR_COMM_TIMEOUT_S), CommSeconds
#include "seqpar/data/any_task.hpp"  // AnyTask, TaskMenu, StandardTasks: a task chosen at run time
#include "seqpar/data/batching.hpp"  // BatchStream: left-padded batches in a plan-independent order
#include "seqpar/data/char_tokenizer.hpp"  // a character tokenizer written as tokenizer.json
#include "seqpar/data/classification.hpp"  // classification prompts and answers
#include "seqpar/data/cluener.hpp"         // CLUENER-style NER JSON
#include "seqpar/data/conll.hpp"           // CoNLL-style BIO files
#include "seqpar/data/decoding.hpp"        // a model's default decoding settings
#include "seqpar/data/examples.hpp"        // tokenized SeqGPT examples
#include "seqpar/data/json_reader.hpp"     // one JSON reader for every task's record shape
#include "seqpar/data/json_records.hpp"    // JSON records of every task
#include "seqpar/data/metrics.hpp"         // entity-level precision, recall and F1
#include "seqpar/data/ner_record.hpp"      // NerRecord: the NER names of the records
#include "seqpar/data/predictions.hpp"     // predictions and scores as files
#include "seqpar/data/prompt.hpp"          // SeqGPT prompts and the answer contract
#include "seqpar/data/record.hpp"          // TextRecord, ReadOptions: records of every task
#include "seqpar/data/relation.hpp"        // relation extraction from two prompts
#include "seqpar/data/spans.hpp"           // character offsets of answered strings
#include "seqpar/data/task.hpp"            // the NluTask concept every task type satisfies
#include "seqpar/data/tasks.hpp"           // NerTask, ClassificationTask, RelationTask
#include "seqpar/data/token_cache.hpp"     // a pre-tokenized cache of examples on disk
#include "seqpar/io/hf_config.hpp"         // read_bloom_config: a Hugging Face config.json
#include "seqpar/io/safetensors.hpp"       // SafetensorsFile, write_safetensors
#include "seqpar/io/tensor_file.hpp"       // TensorFile: either kind, told apart by content
#include "seqpar/io/tensorboard.hpp"       // EventFileWriter: TensorBoard's event files
#include "seqpar/io/torch_checkpoint.hpp"  // TorchCheckpoint: pytorch_model.bin without libtorch
#include "seqpar/nn/beam_search.hpp"       // beam_search: transformers' beam search with a KV cache
#include "seqpar/nn/decoder.hpp"   // Decoder: a stack's prefill and decoding step with a KV cache
#include "seqpar/nn/generate.hpp"  // greedy_generate: batched decoding with a KV cache
#include "seqpar/nn/model.hpp"     // BloomStack: layers, forward and backward
#include "seqpar/optim/adamw.hpp"  // AdamW over flat ranges
#include "seqpar/optim/host_adamw.hpp"    // host_adamw: AVX2, AVX-512 or scalar AdamW
#include "seqpar/optim/loss_scale.hpp"    // LossScaler, LossScaleOptions: dynamic loss scaling
#include "seqpar/optim/offload.hpp"       // Offload: optimizer state in host memory
#include "seqpar/optim/schedule.hpp"      // LrSchedule: warmup, linear or cosine decay
#include "seqpar/parallel/data_axis.hpp"  // DataAxis<Policy, ...>: Replicated, ZeRO-1/2, ZeRO-3
#include "seqpar/parallel/mesh.hpp"       // Mesh: rank coordinates and sub-communicators
#include "seqpar/parallel/pipeline_axis.hpp"  // PipelineAxis, StageLayers: the layers and units of each stage
#include "seqpar/parallel/plan.hpp"      // PlanTraits, the ParallelPlan concept, plan rules
#include "seqpar/parallel/policies.hpp"  // Replicated, Sharded<Zero*>, TensorSplit, Pipeline, Hybrid
#include "seqpar/plan/plan_desc.hpp"     // PlanDesc: plan types as numbers
#include "seqpar/plan/plan_rules.hpp"  // check_plan: whether a layout fits a world, the model, the program
#include "seqpar/plan/predict.hpp"            // predict: bytes per rank by category, bytes moved
#include "seqpar/plan/registry.hpp"           // PlanFamily, StandardPlans, plan names, resolve_plan
#include "seqpar/plan/step_time.hpp"          // Hardware presets, step_time, max_micro_batch
#include "seqpar/train/any_trainer.hpp"       // AnyTrainer, make_trainer: a plan chosen at launch
#include "seqpar/train/deepspeed_config.hpp"  // apply_deepspeed_config: ds_config.json
#include "seqpar/train/generation_model.hpp"  // GenerationModel: a whole model to decode with
#include "seqpar/train/hf_model_dir.hpp"   // write_hf_model_dir, HfModelDir: transformers' folders
#include "seqpar/train/launch.hpp"         // RankLaunch, run_world: threads or mpirun/srun
#include "seqpar/train/metrics_log.hpp"    // MetricsLog: metrics.jsonl and its reporters
#include "seqpar/train/plan_trainers.hpp"  // make_family_trainer: a family's trainers compiled
#include "seqpar/train/rank_report.hpp"    // RankReport: each rank's memory and bytes
#include "seqpar/train/run.hpp"            // TrainingRun over any RunnableTrainer
#include "seqpar/train/run_folder.hpp"     // RunFolder, OutputLock, CheckpointDir
#include "seqpar/train/run_keys.hpp"       // what ranks agree on and resumes compare
#include "seqpar/train/run_spec.hpp"       // RunSpec: a run as named fields
#include "seqpar/train/stop.hpp"           // StopSignals, StopRequest: stop at a step boundary
#include "seqpar/train/trainer.hpp"        // Trainer<Model, Plan, Device, Precision>
#include "seqpar/train/training_arguments.hpp"  // TrainingArguments: Hugging Face's names

#if defined(SEQPAR_WITH_MPI)
#include "seqpar/comm/mpi_comm.hpp"  // MpiComm, MpiSession, mpi_main
#endif
#if defined(SEQPAR_WITH_ONIGURUMA)
#include "seqpar/io/tokenizer.hpp"  // Tokenizer: tokenizer.json byte-level BPE
#endif
#if defined(SEQPAR_CUDA_BACKEND)
#include "seqpar/backend/cuda/ops.hpp"       // Ops<Cuda>: cuBLAS and kernels
#include "seqpar/comm/cuda_thread_comm.hpp"  // CudaThreadComm: every plan's ranks on one GPU
#include "seqpar/comm/nccl_comm.hpp"  // NcclComm (where nccl.h and MPI are): one process per GPU
#endif

// seqgpt_ner's command line (examples/seqgpt_ner/options.cpp): Hugging Face's
// TrainingArguments names as they are written, the example's own names as aliases, `_` and
// `-` alike, an unknown option answered with the nearest known one, the layout from --plan or
// the layout flags (never both disagreeing), fine-tuning defaults from published weights, and
// numbers that are not plain finite decimals refused by name.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../../support/fields.hpp"
#include "options.hpp"

namespace {

ner::Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "seqgpt_ner");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return ner::parse_options(static_cast<int>(argv.size()), argv.data());
}

// The message of the UsageError that parsing throws ("" when none).
std::string refusal(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const ner::UsageError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("Hugging Face's TrainingArguments names, as they are written") {
  const ner::Options o = parse({"--learning_rate",
                                "3e-4",
                                "--num_train_epochs",
                                "2",
                                "--per_device_train_batch_size",
                                "4",
                                "--gradient_accumulation_steps",
                                "2",
                                "--output_dir",
                                "runs/a",
                                "--save_steps",
                                "50",
                                "--logging_steps",
                                "5",
                                "--warmup_ratio",
                                "0.1",
                                "--max_steps",
                                "30",
                                "--weight_decay",
                                "0.1",
                                "--seed",
                                "7",
                                "--lr_scheduler_type",
                                "cosine",
                                "--save_total_limit",
                                "3"});
  const auto& t = o.train;
  CHECK(t.learning_rate == 3e-4);
  CHECK(t.num_train_epochs == 2);
  CHECK(t.per_device_train_batch_size == 4);
  CHECK(t.gradient_accumulation_steps == 2);
  CHECK(o.out_dir == "runs/a");
  CHECK(t.save_steps == 50);
  CHECK(t.logging_steps == 5);
  CHECK(t.warmup_ratio == 0.1);
  CHECK(t.max_steps == 30);
  CHECK(t.weight_decay == 0.1);
  CHECK(t.seed == 7);
  CHECK(t.lr_scheduler_type == "cosine");
  CHECK(t.save_total_limit == 3);
  for (const char* field : {"learning_rate", "num_train_epochs", "per_device_train_batch_size",
                            "gradient_accumulation_steps", "warmup_ratio", "seed"})
    CHECK_MESSAGE(t.was_given(field), field);
  CHECK(parse({"--bf16"}).train.precision == "bf16");
  CHECK(parse({"--fp16"}).train.precision == "fp16");
  CHECK(parse({"--fp16"}).train.was_given("precision"));
  // --resume_from_checkpoint with or without its path.
  const ner::Options newest = parse({"--resume_from_checkpoint"});
  CHECK(newest.resume);
  CHECK(newest.resume_from.empty());
  const ner::Options named =
      parse({"--resume_from_checkpoint", "out/step-4.safetensors", "--seed", "3"});
  CHECK(named.resume);
  CHECK(named.resume_from == "out/step-4.safetensors");
  CHECK(named.train.seed == 3);
  CHECK(parse({"--gradient_checkpointing"}).train.recompute == seqpar::Recompute::full);
}

TEST_CASE("the example's own names and dashes are the same options") {
  const ner::Options a = parse({"--lr", "0.01", "--epochs", "4", "--micro-batch", "2", "--batch",
                                "8", "--out", "x", "--save-every", "5", "--log-every", "3",
                                "--eval-every", "7", "--max-tokens", "64", "--resume"});
  const ner::Options b = parse(
      {"--learning-rate", "0.01", "--num-train-epochs", "4", "--per-device-train-batch-size", "2",
       "--train-batch-size", "8", "--output-dir", "x", "--save-steps", "5", "--logging-steps", "3",
       "--eval-steps", "7", "--max-length", "64", "--resume-from-checkpoint"});
  const ner::Options c =
      parse({"--learning_rate=0.01", "--num_train_epochs=4", "--per_device_train_batch_size=2",
             "--train_batch_size=8", "--output_dir=x", "--save_steps=5", "--logging_steps=3",
             "--eval_steps=7", "--max_length=64", "--resume"});
  for (const ner::Options* o : {&b, &c}) {
    CHECK(o->train.learning_rate == a.train.learning_rate);
    CHECK(o->train.num_train_epochs == a.train.num_train_epochs);
    CHECK(o->train.per_device_train_batch_size == a.train.per_device_train_batch_size);
    CHECK(o->train.train_batch_size == a.train.train_batch_size);
    CHECK(o->out_dir == a.out_dir);
    CHECK(o->train.save_steps == a.train.save_steps);
    CHECK(o->train.logging_steps == a.train.logging_steps);
    CHECK(o->train.eval_steps == a.train.eval_steps);
    CHECK(o->max_length == a.max_length);
    CHECK(o->resume == a.resume);
    CHECK(o->train.given == a.train.given);
  }
}

TEST_CASE("an unknown option is refused with the nearest known one") {
  CHECK(refusal({"--learning_rat", "1"}) ==
        "unknown option '--learning_rat'; did you mean --learning_rate?");
  CHECK(refusal({"--num_epochs", "3"}) ==
        "unknown option '--num_epochs'; did you mean --num_train_epochs or --num_beams?");
  CHECK(refusal({"--tensor-paralel", "2"}) ==
        "unknown option '--tensor-paralel'; did you mean --tensor_parallel?");
  CHECK(refusal({"--per_device_batch_size", "2"}) ==
        "unknown option '--per_device_batch_size'; did you mean --per_device_eval_batch_size or "
        "--per_device_train_batch_size?");
  CHECK(refusal({"--zzzzzzzz"}) == "unknown option '--zzzzzzzz'");
  // The names about as near as the nearest, the nearest first, three at most.
  CHECK(refusal({"--eval_step", "5"}) ==
        "unknown option '--eval_step'; did you mean --eval_steps?");
  CHECK(contains(refusal({"--quiet=maybe"}), "--quiet is a switch: alone, or with True/False"));
  CHECK(contains(refusal({"--learning_rate"}), "--learning_rate needs a value"));
  CHECK(contains(refusal({"frobnicate"}), "unknown command 'frobnicate'"));
}

TEST_CASE(
    "switches take transformers' boolean values: --bf16 True, --gradient_checkpointing false") {
  CHECK(parse({"--bf16"}).train.precision == "bf16");
  CHECK(parse({"--bf16", "True"}).train.precision == "bf16");
  CHECK(parse({"--bf16=true"}).train.precision == "bf16");
  CHECK(parse({"--bf16", "False"}).train.precision == "fp32");
  CHECK(parse({"--fp16", "1"}).train.precision == "fp16");
  CHECK(parse({"--gradient_checkpointing", "true"}).train.recompute == seqpar::Recompute::full);
  CHECK(parse({"--gradient_checkpointing", "false"}).train.recompute == seqpar::Recompute::none);
  CHECK(parse({"--overwrite_output_dir", "yes"}).overwrite_output_dir);
  CHECK(!parse({"--overwrite_output_dir", "no"}).overwrite_output_dir);
  // A switch alone before another option, and before a value that is no boolean.
  const ner::Options q = parse({"--quiet", "--lr", "0.1"});
  CHECK(q.quiet);
  CHECK(q.train.learning_rate == 0.1);
  CHECK(contains(refusal({"--quiet", "later"}), "'later' is not an option"));
  CHECK(parse({"--load_best_model_at_end", "True"}).train.load_best_model_at_end);
  CHECK(parse({"--greater_is_better", "False"}).train.greater_is_better == false);
  CHECK(!parse({}).train.greater_is_better.has_value());
}

TEST_CASE("evaluation and saving strategies, the best model, early stopping") {
  using seqpar::IntervalStrategy;
  const ner::Options o =
      parse({"--eval_strategy", "steps", "--eval_steps", "20", "--save_strategy", "no",
             "--metric_for_best_model", "accuracy", "--early_stopping_patience", "3",
             "--early_stopping_threshold", "0.01", "--per_device_eval_batch_size", "8"});
  CHECK(o.train.eval_strategy == IntervalStrategy::steps);
  CHECK(o.train.eval_steps == 20);
  CHECK(o.train.save_strategy == IntervalStrategy::no);
  CHECK(o.train.metric_for_best_model == "accuracy");
  CHECK(o.train.early_stopping_patience == 3);
  CHECK(o.train.early_stopping_threshold == 0.01);
  CHECK(o.train.per_device_eval_batch_size == 8);
  CHECK(parse({"--evaluation_strategy", "epoch"}).train.eval_strategy == IntervalStrategy::epoch);
  CHECK(parse({"--no_eval"}).train.eval_strategy == IntervalStrategy::no);
  CHECK(parse({"--do_eval", "False"}).train.eval_strategy == IntervalStrategy::no);
  CHECK(parse({"--eval_rows", "4"}).train.per_device_eval_batch_size == 4);
  CHECK(contains(refusal({"--eval_strategy", "step"}),
                 "--eval_strategy is 'step'; expected no, steps or epoch"));
  CHECK(contains(refusal({"--do_train", "False"}), "--do_train False"));
  CHECK(contains(refusal({"--per_device_eval_batch_size", "0"}),
                 "--per_device_eval_batch_size must be positive"));
  CHECK(contains(refusal({"predict", "--text", "x", "--submission", "s.json"}),
                 "--text sentences have no place in it"));
  // transformers' name for the weights.
  CHECK(parse({"--model_name_or_path", "dir"}).weights == "dir");
}

TEST_CASE("the layout: flags as DeepSpeed and Megatron users write them, or one name") {
  const ner::Options d = parse({});
  CHECK(d.train.plan.layout == seqpar::PlanDesc{0, 1, 1, 0, false});  // data parallel, all ranks
  const ner::Options f = parse({"--zero-stage", "3", "--tensor-parallel", "2",
                                "--pipeline-parallel", "2", "--pipeline-schedule", "gpipe"});
  CHECK(f.train.plan.layout == seqpar::PlanDesc{0, 2, 2, 3, true});
  CHECK(f.train.plan.asked ==
        "--zero-stage 3 --tensor-parallel 2 --pipeline-parallel 2 --pipeline-schedule gpipe");
  CHECK(parse({"--tensor_model_parallel_size", "4"}).train.plan.layout.tensor == 4);  // Megatron's
  const ner::Options p = parse({"--plan", "tp2dp4"});
  CHECK(p.train.plan.layout == seqpar::PlanDesc{4, 2, 1, 0, false});
  CHECK(p.train.plan.asked == "--plan tp2dp4");
  CHECK(p.train.was_given("zero_stage"));  // a DeepSpeed stage must agree with the name's
  // Every name seqgpt_ner has taken still works.
  for (const char* name : {"single", "dp2", "dp4", "zero1x2", "zero2x2", "zero3x2", "zero3x4",
                           "tp2", "tp2dp2", "tp2zero3x2", "pp2", "pp2dp2"})
    CHECK_NOTHROW(parse({"--plan", name}));
  // Both, agreeing: accepted; disagreeing: refused, naming both.
  CHECK_NOTHROW(parse({"--plan", "tp2zero3x2", "--zero-stage", "3", "--tensor-parallel", "2"}));
  CHECK(refusal({"--plan", "tp2dp2", "--zero-stage", "3"}) ==
        "--plan tp2dp2 is --zero-stage 0 --tensor-parallel 2, but the command line also gives "
        "--zero-stage 3; give one of them");
  CHECK(contains(refusal({"--plan", "tp3x"}), "--plan 'tp3x' is not a plan name"));
  CHECK(contains(refusal({"--zero-stage", "4"}), "--zero_stage is 4; expected 0, 1, 2 or 3"));
  CHECK(contains(refusal({"--pipeline-schedule", "interleaved"}), "expected gpipe or 1f1b"));
  CHECK(contains(refusal({"--tensor-parallel", "0"}), "--tensor_parallel must be at least 1"));
  CHECK(contains(refusal({"--ranks", "0"}), "--ranks is 0; expected 1 to 4096"));
  CHECK(parse({"--ranks", "6"}).ranks == 6);
  // torch.distributed.launch's --local_rank (torch 2's --local-rank=N): a rank on the node.
  CHECK(parse({}).local_rank == -1);
  CHECK(parse({"--local_rank", "3"}).local_rank == 3);
  CHECK(parse({"--local-rank=0"}).local_rank == 0);
  CHECK(contains(refusal({"--local_rank", "-1"}), "--local_rank"));
  CHECK(contains(refusal({"--model", "bloom2b"}),
                 "--model is 'bloom2b'; expected one of tiny, seqgpt560m, bloom1b1, bloom1b7, "
                 "bloom3b, bloom7b1"));
  CHECK(parse({"--model", "bloom1b7"}).model == "bloom1b7");
}

TEST_CASE("published weights bring fine-tuning defaults; what the command line says stays") {
  ner::Options tiny = parse({});
  ner::apply_fine_tuning_defaults(tiny);
  CHECK(tiny.train.learning_rate == 5e-3);
  CHECK(tiny.train.num_train_epochs == 15);
  CHECK(tiny.train.warmup_ratio == 0.03);
  ner::Options seqgpt = parse({"--weights", "SeqGPT-560M"});
  ner::apply_fine_tuning_defaults(seqgpt);
  CHECK(seqgpt.train.learning_rate == 2e-5);
  CHECK(seqgpt.train.num_train_epochs == 3);
  CHECK(seqgpt.train.warmup_ratio == 0.1);
  ner::Options given = parse({"--weights", "SeqGPT-560M", "--learning_rate", "1e-4"});
  ner::apply_fine_tuning_defaults(given);
  CHECK(given.train.learning_rate == 1e-4);
  CHECK(given.train.num_train_epochs == 3);
}

TEST_CASE("--report_to: none, jsonl, tensorboard and all, comma-separated or repeated") {
  using seqpar::Reporter;
  const std::vector<Reporter> tensorboard{Reporter::tensorboard};
  CHECK(parse({}).report_to.empty());  // metrics.jsonl alone
  CHECK(parse({"--report_to", "none"}).report_to.empty());
  CHECK(parse({"--report_to", "jsonl"}).report_to.empty());
  CHECK(parse({"--report_to", "tensorboard"}).report_to == tensorboard);
  CHECK(parse({"--report_to", "jsonl,tensorboard"}).report_to == tensorboard);
  CHECK(parse({"--report_to", "jsonl", "--report-to", "tensorboard"}).report_to == tensorboard);
  CHECK(parse({"--report_to=tensorboard,tensorboard"}).report_to == tensorboard);
  CHECK(parse({"--report_to", "all"}).report_to == tensorboard);
  const std::string unknown = refusal({"--report_to", "jsonl,wandb"});
  CHECK(contains(unknown, "--report_to is 'jsonl,wandb'; expected none, all, jsonl, tensorboard"));
  CHECK(contains(refusal({"--report_to", "tensorboard,"}), "--report_to is 'tensorboard,'"));
  CHECK(contains(refusal({"--report_to", "none", "--report_to", "tensorboard"}),
                 "--report_to none cannot be combined with tensorboard"));
}

TEST_CASE("numbers: plain finite decimals in range, or refused naming the option and value") {
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--learning_rate", "nan"},
                                                        {"--lr", "inf"},
                                                        {"--lr", "0x1p-3"},
                                                        {"--lr", "1e999"},
                                                        {"--weight_decay", "-0.1"},
                                                        {"--max_steps", "99999999999999999999"},
                                                        {"--seed", "-1"},
                                                        {"--seed", "18446744073709551616"},
                                                        {"--batch", "0x10"}}) {
    const std::string m = refusal({flag, value});
    CAPTURE(flag);
    CHECK(contains(m, "got '" + value + "'"));
  }
  CHECK(contains(refusal({"--save_total_limit", "0"}), "--save_total_limit must be positive"));
  CHECK(contains(refusal({"--device", "gpu"}), "--device is 'gpu'; expected cpu or cuda"));
  CHECK(contains(refusal({"--precision", "fp8"}),
                 "--precision is 'fp8'; expected fp32, bf16 or fp16"));
  CHECK(contains(refusal({"--hysteresis", "0"}), "--hysteresis must be positive"));
  CHECK(contains(refusal({"--initial_scale_power", "1001"}), "at most 1000"));
  CHECK(contains(refusal({"export", "--to", "dir"}), "export needs --checkpoint FILE"));
  const ner::Options ls =
      parse({"--fp16", "--initial-scale-power", "12", "--loss-scale-window", "500", "--hysteresis",
             "3", "--consecutive-hysteresis", "--min-loss-scale", "0.5"});
  CHECK(ls.train.loss_scale.initial_scale_power == 12);
  CHECK(ls.train.loss_scale.loss_scale_window == 500);
  CHECK(ls.train.loss_scale.hysteresis == 3);
  CHECK(ls.train.loss_scale.consecutive_hysteresis);
  CHECK(ls.train.loss_scale.min_loss_scale == 0.5);
  CHECK(ls.train.was_given("hysteresis"));
}

TEST_CASE("settings that cannot work are refused on the command line, naming them") {
  CHECK(contains(refusal({"--labels", ","}), "--labels: label 1 of ',' is empty"));
  CHECK(contains(refusal({"--labels", "name,,company"}),
                 "--labels: label 2 of 'name,,company' is empty"));
  CHECK(contains(refusal({"--labels", "name,name"}), "'name' is listed twice"));
  CHECK(parse({"--labels", "name, company"}).labels == std::vector<std::string>{"name", "company"});
  CHECK(contains(refusal({"eval", "--max_length", "1"}), "--max_length is 1; expected at least 2"));
  CHECK(contains(refusal({"predict", "--num_beams", "0"}), "--num_beams: num_beams is 0"));
  CHECK(contains(refusal({"predict", "--repetition_penalty", "0"}),
                 "--repetition_penalty: repetition_penalty is 0"));
  CHECK(parse({"predict"}).num_beams == 0);  // not given: the model's default
  CHECK(parse({"predict", "--num_beams", "2"}).num_beams == 2);
  CHECK(contains(refusal({"predict", "--on_bad_input", "ignore"}),
                 "--on_bad_input is 'ignore'; expected skip or stop"));
  CHECK(contains(refusal({"predict", "--text", "ok", "--text", "\xff"}),
                 "--text number 2 is not UTF-8"));
  // A file where a folder is to be written: refused before any work, naming it.
  const std::string file = "test_options_a_file";
  { std::ofstream(file) << "x"; }
  CHECK(contains(refusal({"--output_dir", file}), "--output_dir " + file + " is a file"));
  CHECK(contains(refusal({"--export_hf", file}), "--export_hf " + file + " is a file"));
  std::remove(file.c_str());
}

TEST_CASE("every option a job's processes must share reaches their start-up agreement") {
  // Each agreed field of option_fields and training_arguments_fields, changed alone, changes
  // the agreement's value of its own flag and no other (a field left out of either list
  // stops the build: their static_asserts).
  const ner::Options o = parse({"--save_steps", "4", "--eval_steps", "2"});
  CHECK(seqpar::test::agreed_fields_missing(o, ner::option_fields, ner::agreed_options).empty());
  const auto train = [&o](const seqpar::TrainingArguments& a) {
    ner::Options with = o;
    with.train = a;
    return ner::agreed_options(with);
  };
  CHECK(seqpar::test::agreed_fields_missing(o.train, seqpar::training_arguments_fields, train)
            .empty());
  const auto values = ner::agreed_options(o);
  for (const char* name :
       {"save_steps", "save_strategy", "eval_steps", "eval_strategy", "logging_steps", "stop_after",
        "eval_limit", "num_beams", "max_new_tokens", "metric_for_best_model",
        "early_stopping_patience", "per_device_eval_batch_size", "report_to"}) {
    CAPTURE(name);
    CHECK(std::count_if(values.begin(), values.end(),
                        [&](const auto& v) { return v.first == name; }) == 1);
  }
}

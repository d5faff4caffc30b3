// seqpar._seqpar: what the Python package (seqpar/__init__.py) calls. The commands are
// seqgpt_ner's own (examples/seqgpt_ner/command.hpp), given the same arguments as its command
// line, so that a script's run is the command line's run; CompiledTrainer is one rank's
// seqpar::AnyTrainer stepped on arrays the caller made. The GIL is released while C++ works.
#include <fcntl.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "command.hpp"
#include "compiled.hpp"
#include "devices.hpp"
#include "models.hpp"
#include "options.hpp"
#include "seqpar/comm/text.hpp"
#include "seqpar/comm/thread_comm.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/train/launch.hpp"
#include "train.hpp"
#if defined(SEQPAR_WITH_MPI)
#include "seqpar/comm/mpi_comm.hpp"  // defines SEQPAR_HAS_MPI_COMM
#endif

namespace nb = nanobind;
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------
// Arguments: the command line's flags, parsed by its parser (the same names, checks and
// messages).

ner::Options parse(const std::vector<std::string>& args) {
  std::vector<std::string> words{"seqpar"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  return ner::parse_options(static_cast<int>(argv.size()), argv.data());
}

// A field's value as Python has it: numbers, switches, text and lists of text as themselves,
// paths as text, anything else as the text the run's agreement shows.
template <class V>
nb::object python_value(const V& v) {
  if constexpr (std::is_same_v<V, bool> || std::is_arithmetic_v<V> ||
                std::is_same_v<V, std::string> || std::is_same_v<V, std::vector<std::string>>)
    return nb::cast(v);
  else if constexpr (std::is_same_v<V, fs::path>)
    return v.empty() ? nb::none() : nb::cast(v.string());
  else if constexpr (std::is_same_v<V, std::set<std::string>>)
    return nb::cast(std::vector<std::string>(v.begin(), v.end()));
  else
    return nb::cast(seqpar::field_text(v));
}

template <class A, class List>
void add_fields(nb::dict& out, const A& a, const List& list) {
  std::apply(
      [&](const auto&... f) {
        (
            [&](const auto& x) {
              // A list of entries (Options::train) is read by its own list.
              if constexpr (std::remove_cvref_t<decltype(x)>::use != seqpar::FieldUse::entries) {
                const std::string name(x.name);
                if (name.find(' ') == std::string::npos)
                  out[name.c_str()] = python_value(a.*(x.member));
              }
            }(f),
            ...);
      },
      list);
}

// Every argument of `args` parsed, by name: the values a TrainingArguments reads back.
nb::dict argument_values(const std::vector<std::string>& args) {
  const ner::Options o = parse(args);
  nb::dict out;
  add_fields(out, o, ner::option_fields);
  add_fields(out, o.train, seqpar::training_arguments_fields);
  return out;
}

// ---------------------------------------------------------------------------------------
// The process's ranks: the processes mpirun or srun started (one MPI world for the process,
// its session kept until finalize()), else threads of this process.

struct Processes {
  std::optional<seqpar::ProcessLaunch> launch = seqpar::process_launch_from_environment();
#if defined(SEQPAR_HAS_MPI_COMM)
  std::unique_ptr<seqpar::MpiSession> session;
  std::optional<seqpar::MpiComm> world;
#endif
};

Processes& processes() {
  static Processes p;
  return p;
}

#if defined(SEQPAR_HAS_MPI_COMM)
seqpar::MpiComm& mpi_world() {
  Processes& p = processes();
  if (!p.world) {
    int argc = 0;
    char** argv = nullptr;
    p.session = std::make_unique<seqpar::MpiSession>(argc, argv);  // none if mpi4py made one
    p.world.emplace(seqpar::MpiComm::world());
  }
  return *p.world;
}
#endif

// The launch of a call: this process of a launcher's job (one rank), else `thread_ranks`
// threads.
seqpar::RankLaunch launch_for(const ner::Options& o, int thread_ranks) {
  const Processes& p = processes();
  if (!p.launch) {
    seqpar::RankLaunch launch;
    launch.threads = thread_ranks;
    return launch;
  }
#if defined(SEQPAR_HAS_MPI_COMM)
  return ner::process_launch(mpi_world(), o, p.launch->launcher);
#else
  throw ner::LaunchRefusal("started by " + p.launch->launcher +
                           " as one of several processes, but this seqpar was built without "
                           "MPI; install Open MPI's development files and build it again, or "
                           "run the script without " +
                           p.launch->launcher);
#endif
}

int process_rank() {
#if defined(SEQPAR_HAS_MPI_COMM)
  if (processes().launch) return mpi_world().rank();
#endif
  return 0;
}

int process_count() {
#if defined(SEQPAR_HAS_MPI_COMM)
  if (processes().launch) return mpi_world().size();
#endif
  return 1;
}

void finalize() {
#if defined(SEQPAR_HAS_MPI_COMM)
  Processes& p = processes();
  p.world.reset();
  p.session.reset();
#endif
}

// While it lives, this process's stdout (file descriptor 1) goes nowhere when it is not the
// run's writer: every process of a job reads the data and would print it (the command line
// sends the other ranks' stdout to /dev/null for the same reason).
class QuietUnlessWriter {
 public:
  explicit QuietUnlessWriter(bool writer) {
    if (writer) return;
    std::fflush(stdout);
    saved_ = ::dup(1);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved_ >= 0 && null >= 0) ::dup2(null, 1);
    if (null >= 0) ::close(null);
  }
  QuietUnlessWriter(const QuietUnlessWriter&) = delete;
  QuietUnlessWriter& operator=(const QuietUnlessWriter&) = delete;
  ~QuietUnlessWriter() {
    std::fflush(stdout);
    if (saved_ < 0) return;
    ::dup2(saved_, 1);
    ::close(saved_);
  }

 private:
  int saved_ = -1;
};

// A fault on one process of several (not a refusal every process makes alike) leaves the
// others waiting in a collective: as the command line does, it is said with the rank and
// the whole job ends.
[[noreturn]] void end_job(const std::string& what) {
  std::fprintf(stderr, "seqpar: rank %d: %s\n", process_rank(), what.c_str());
  std::fflush(stderr);
#if defined(SEQPAR_HAS_MPI_COMM)
  MPI_Abort(MPI_COMM_WORLD, 1);
#endif
  std::_Exit(1);
}

// An outcome as JSON text: {"code": exit code, "value": command.hpp's Outcome::value}.
std::string outcome_text(const ner::Outcome& out) {
  return nlohmann::json{{"code", out.code}, {"value", out.value}}.dump();
}

// Runs a command with the command line's arguments `args`; returns its outcome_text.
std::string run(const std::vector<std::string>& args, bool print_predictions) {
  ner::Options o = parse(args);
  const seqpar::RankLaunch launch = launch_for(o, ner::thread_ranks(o));
  ner::Outcome out;
  {
    nb::gil_scoped_release unlocked;
    const QuietUnlessWriter quiet(launch.writer());
    ner::prepare_command(o, launch);  // every process alike: its errors are raised everywhere
    try {
      // eval, predict and export run on the writer; under a launcher every process waits
      // for its outcome (or its refusal), so that each returns it and the next call of the
      // script finds them all.
      if (o.command != "train" && launch.under_launcher() && launch.world_size() > 1) {
        seqpar::AnyComm world = launch.processes;
        return seqpar::decide_on_writer(
            world, [&] { return outcome_text(ner::execute(o, launch, print_predictions)); });
      }
      out = ner::execute(o, launch, print_predictions);
    } catch (const seqpar::Refusal&) {
      throw;  // every rank alike
    } catch (const ner::LaunchRefusal&) {
      throw;
    } catch (const std::exception& e) {
      if (launch.under_launcher() && launch.world_size() > 1) end_job(e.what());
      throw;
    }
  }
  return outcome_text(out);
}

// ---------------------------------------------------------------------------------------
// CompiledTrainer: one step at a time on arrays the caller made.

using Tokens = nb::ndarray<const std::int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

nb::dict memory_dict(const seqpar::MemoryStats& m) {
  nb::dict d;
  for (std::size_t k = 0; k < seqpar::memory_kinds; ++k) {
    const char* name = seqpar::memory_name(static_cast<seqpar::Memory>(k));
    d[name] = nb::make_tuple(m.current[k], m.peak[k]);
  }
  d["total"] = nb::make_tuple(m.total_current, m.total_peak);
  return d;
}

class CompiledTrainer {
 public:
  // In one process its ranks are threads: ranks=N, else the plan's world, else tensor x
  // pipeline (one for the default plan).
  explicit CompiledTrainer(const std::vector<std::string>& args)
      : o_(parse(args)), launch_(launch_for(o_, ner::thread_ranks(o_, 1))) {
    nb::gil_scoped_release unlocked;
    ner::prepare_command(o_, launch_);
    SEQPAR_CHECK(o_.train.max_steps > 0, "max_steps is ", o_.train.max_steps,
                 "; CompiledTrainer needs the number of steps its learning-rate schedule spans");
    // The layout, model and batch as a run checks them (ner::check_launch).
    const ner::Launched run = ner::check_launch(o_, launch_);
    vocab_ = run.model->config.vocab_size;
    layout_ = run.layout;
    services_ = ner::model_services(o_.model, o_.device);
    const seqpar::TrainOptions options =
        seqpar::train_options(o_.train, o_.train.max_steps, run.batch);
    threads_ = ner::rank_threads(o_, launch_);
    const int ranks = launch_.under_launcher() ? 1 : launch_.threads;
    if (launch_.under_launcher()) {
      ner::set_threads(threads_);
      trainers_.push_back(
          services_->make_trainer(layout_, o_.train.precision, launch_.processes, options));
    } else {
      comms_ = seqpar::ThreadComm::make_world(ranks);
      trainers_.resize(static_cast<std::size_t>(ranks));
      on_ranks([&](int r) {
        trainers_[r] = services_->make_trainer(layout_, o_.train.precision,
                                               seqpar::AnyComm(comms_[r]), options);
      });
    }
    if (!o_.weights.empty()) load_weights(o_.weights);
  }

  nb::dict step(const Tokens& input_ids, const Tokens& labels,
                std::optional<Tokens> attention_mask) {
    const seqpar::BatchView batch = view(input_ids, labels, attention_mask);
    seqpar::StepStats st;
    {
      nb::gil_scoped_release unlocked;
      on_ranks([&](int r) {
        const seqpar::StepStats s = trainers_[r].step(batch);
        if (r == 0) st = s;
      });
    }
    nb::dict d;
    d["step"] = st.step;
    d["loss"] = st.loss;
    d["grad_norm"] = st.grad_norm;
    d["lr"] = st.lr;
    d["tokens"] = st.tokens;
    d["targets"] = st.targets;
    d["seconds"] = st.seconds;
    d["tokens_per_s"] = st.tokens_per_s;
    d["skipped"] = st.skipped;
    d["overflow"] = st.overflow;
    d["loss_scale"] = st.loss_scale;
    return d;
  }

  // n steps on the same batch inside C++, their seconds each: the C++ side of the benchmark
  // that compares the step called from Python with the step called from C++.
  std::vector<double> steps_in_cpp(const Tokens& input_ids, const Tokens& labels, int n) {
    const seqpar::BatchView batch = view(input_ids, labels, std::nullopt);
    std::vector<double> seconds;
    nb::gil_scoped_release unlocked;
    for (int i = 0; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      on_ranks([&](int r) { trainers_[r].step(batch); });
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return seconds;
  }

  double evaluate(const Tokens& input_ids, const Tokens& labels,
                  std::optional<Tokens> attention_mask) {
    const seqpar::BatchView batch = view(input_ids, labels, attention_mask);
    double loss = 0;
    nb::gil_scoped_release unlocked;
    on_ranks([&](int r) {
      const double l = trainers_[r].evaluate(batch);
      if (r == 0) loss = l;
    });
    return loss;
  }

  nb::dict memory() const { return memory_dict(trainers_.front().memory()); }

  void save(const std::string& path) {
    nb::gil_scoped_release unlocked;
    on_ranks([&](int r) { trainers_[r].save_checkpoint(path); });
  }

  void load(const std::string& path) {
    nb::gil_scoped_release unlocked;
    on_ranks([&](int r) { trainers_[r].load_checkpoint(path); });
  }

  void save_weights(const std::string& path) {
    nb::gil_scoped_release unlocked;
    on_ranks([&](int r) { trainers_[r].save_weights(path); });
  }

  void load_weights(const fs::path& path) {
    services_->check_weights(path);
    on_ranks([&](int r) { trainers_[r].load_weights(path); });
  }

  std::int64_t steps_taken() const { return trainers_.front().steps_taken(); }
  std::string plan() const { return seqpar::plan_name(layout_); }
  std::string model() const { return o_.model; }
  int ranks() const { return static_cast<int>(trainers_.size()); }

 private:
  // The batch of the arrays, checked here, before any rank sees it: a bad batch leaves the
  // trainer as it was.
  seqpar::BatchView view(const Tokens& ids, const Tokens& labels,
                         const std::optional<Tokens>& mask) {
    SEQPAR_CHECK(labels.shape(0) == ids.shape(0) && labels.shape(1) == ids.shape(1),
                 "labels: shape (", labels.shape(0), ", ", labels.shape(1),
                 "), expected input_ids' (", ids.shape(0), ", ", ids.shape(1), ")");
    const auto rows = static_cast<std::int64_t>(ids.shape(0)),
               seq = static_cast<std::int64_t>(ids.shape(1));
    const auto n = static_cast<std::size_t>(rows * seq);
    std::span<const std::int32_t> m;
    if (mask) {
      SEQPAR_CHECK(mask->shape(0) == ids.shape(0) && mask->shape(1) == ids.shape(1),
                   "attention_mask: shape (", mask->shape(0), ", ", mask->shape(1),
                   "), expected input_ids' (", ids.shape(0), ", ", ids.shape(1), ")");
      m = {mask->data(), n};
    } else {
      ones_.assign(n, 1);
      m = ones_;
    }
    seqpar::BatchView b{rows, seq, {ids.data(), n}, {labels.data(), n}, m};
    b.validate(vocab_);
    return b;
  }

  // fn(rank) on every rank of this process: itself under a launcher, else a thread each
  // (a rank that fails makes the others fail promptly; the first failure is rethrown).
  template <class F>
  void on_ranks(F&& fn) {
    if (launch_.under_launcher()) {
      fn(0);
      return;
    }
    std::vector<std::thread> threads;
    const int n = static_cast<int>(comms_.size());
    const int each = std::max(1, threads_);
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        try {
          ner::set_threads(each);
          fn(r);
        } catch (...) {
          comms_[r].abort(std::current_exception());
        }
      });
    for (auto& t : threads) t.join();
    if (auto e = comms_[0].failure()) std::rethrow_exception(e);
  }

  ner::Options o_;
  seqpar::RankLaunch launch_;
  std::unique_ptr<ner::ModelServices> services_;
  seqpar::PlanDesc layout_;
  std::vector<seqpar::ThreadComm> comms_;
  std::vector<seqpar::AnyTrainer> trainers_;
  std::vector<std::int32_t> ones_;
  std::int64_t vocab_ = 0;
  int threads_ = 1;
};

}  // namespace

NB_MODULE(_seqpar, m) {
  m.doc() = "seqpar's compiled core: seqgpt_ner's commands and one rank's trainer";

  // The library's errors as Python's: a file or folder that does not exist:
  // FileNotFoundError; bad input (arguments, files, data, a refusal): ValueError; anything
  // else (a fault): RuntimeError.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const seqpar::MissingFile& e) {
      PyErr_SetString(PyExc_FileNotFoundError, ner::in_flag_terms(e.what()).c_str());
    } catch (const seqpar::Error& e) {
      PyErr_SetString(PyExc_ValueError, ner::in_flag_terms(e.what()).c_str());
    } catch (const ner::UsageError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.def("run", &run, nb::arg("args"), nb::arg("print_predictions") = false,
        "Runs seqgpt_ner's command of `args` (its command line's words); returns the outcome "
        "as JSON text.");
  m.def("argument_values", &argument_values, nb::arg("args"),
        "Every argument of `args` as the command line parses it, by name.");
  m.def(
      "option_names",
      [] {
        std::vector<std::tuple<std::string, std::string, bool>> out;
        for (const auto& n : ner::option_names()) out.emplace_back(n.name, n.option, n.switch_);
        return out;
      },
      "Every name the arguments take: (name, the option's first name, whether a switch).");
  m.def("compiled_models", [] {
    std::vector<std::string> names;
    for (const char* n : ner::compiled_models) names.emplace_back(n);
    return names;
  });
  m.def("compiled_precisions", [](const std::string& device) {
    std::vector<std::string> out;
    for (const auto p : ner::compiled_precisions(device)) out.emplace_back(p);
    return out;
  });
  m.def("process_rank", &process_rank,
        "This process's rank among those a launcher started (0 alone).");
  m.def("process_count", &process_count, "The processes a launcher started (1 alone).");
  m.def("finalize", &finalize, "Ends the MPI session this module began, if any.");

  nb::class_<CompiledTrainer>(m, "CompiledTrainer")
      .def(nb::init<const std::vector<std::string>&>(), nb::arg("args"))
      .def("step", &CompiledTrainer::step, nb::arg("input_ids"), nb::arg("labels"),
           nb::arg("attention_mask") = nb::none())
      .def("evaluate", &CompiledTrainer::evaluate, nb::arg("input_ids"), nb::arg("labels"),
           nb::arg("attention_mask") = nb::none())
      .def("steps_in_cpp", &CompiledTrainer::steps_in_cpp, nb::arg("input_ids"), nb::arg("labels"),
           nb::arg("n"))
      .def("memory", &CompiledTrainer::memory)
      .def("save", &CompiledTrainer::save, nb::arg("path"))
      .def("load", &CompiledTrainer::load, nb::arg("path"))
      .def("save_weights", &CompiledTrainer::save_weights, nb::arg("path"))
      .def_prop_ro("steps_taken", &CompiledTrainer::steps_taken)
      .def_prop_ro("plan", &CompiledTrainer::plan)
      .def_prop_ro("model", &CompiledTrainer::model)
      .def_prop_ro("ranks", &CompiledTrainer::ranks);
}

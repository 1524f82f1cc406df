#include "gridfeed/python/feeder_binding.h"

#include <mpi.h>
// mpi4py's C API (PyMPIComm_New, PyMPIComm_Get); its function table is filled on first use.
#include <mpi4py/mpi4py.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gridfeed/audit/ledger.h"
#include "gridfeed/core/stopwatch.h"
#include "gridfeed/feed/feeder.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/parallel/agree.h"
#include "gridfeed/python/errors.h"
#include "gridfeed/python/job_abort.h"
#include "gridfeed/python/kwargs.h"
#include "gridfeed/python/microbatch_binding.h"

namespace gridfeed::python {
namespace py = pybind11;
namespace {

// Imports mpi4py.MPI (which initialises MPI) and its C API, once.
void EnsureMpi4py() {
  static bool imported = false;
  if (imported) return;
  if (import_mpi4py() < 0) throw py::error_already_set();
  imported = true;
}

py::object WrapComm(MPI_Comm comm) {
  EnsureMpi4py();
  PyObject* obj = PyMPIComm_New(comm);
  if (obj == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(obj);
}

class PyFeeder;

// Open feeders, for the MPI_Finalize hook; guarded by g_open_mu.
std::mutex g_open_mu;
std::set<PyFeeder*> g_open;

// The facts of an open feeder that do not change after Open (read without the lock).
struct Facts {
  int world_rank = 0, world_size = 0, dp_rank = 0, tp_rank = 0, pp_rank = 0, cp_rank = 0;
  int dp_size = 0, tp_size = 0, pp_size = 0, cp_size = 0;
  bool first_stage = false, last_stage = false, reader = false;
  MPI_Comm world = MPI_COMM_NULL, dp = MPI_COMM_NULL, tp = MPI_COMM_NULL, pp = MPI_COMM_NULL,
           cp = MPI_COMM_NULL;
  int64_t resumed_iteration = 0, micro_batches = 0, split_length = 0;
  std::string fingerprint, canonical;
  config::JobOptions options;
  feed::StartupTimes startup;
};

// Whether an exception other than StopIteration is being handled on this thread (an except or
// finally block): a close() there may be this rank's alone. REQUIRES: the GIL.
bool HandlingAnException() {
  py::object info = py::module_::import("sys").attr("exc_info")();
  py::object type = info.cast<py::tuple>()[0];
  return !type.is_none() && !PyErr_GivenExceptionMatches(type.ptr(), PyExc_StopIteration);
}

int OnFinalize(MPI_Comm, int, void*, void*);

// Registers OnFinalize as the delete callback of an attribute of MPI_COMM_SELF, which
// MPI_Finalize runs first (MPI 3.1, 8.7.1), once.
void HookFinalize() {
  static std::once_flag once;
  std::call_once(once, [] {
    int keyval = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, OnFinalize, &keyval, nullptr) ==
        MPI_SUCCESS) {
      MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr);
    }
  });
}

class PyFeeder {
 public:
  explicit PyFeeder(py::kwargs kwargs) {
    py::object comm = py::none();
    if (kwargs.contains("comm")) {
      comm = kwargs["comm"];
      PyDict_DelItemString(kwargs.ptr(), "comm");
    }
    EnsureMpi4py();
    if (comm.is_none()) comm = py::module_::import("mpi4py.MPI").attr("COMM_WORLD");
    if (!PyObject_TypeCheck(comm.ptr(), &PyMPIComm_Type)) {
      ThrowIfError(
          InvalidArgument("gridfeed.Feeder: keyword 'comm' must be an mpi4py "
                          "communicator, got " +
                          py::repr(comm).cast<std::string>()));
    }
    MPI_Comm c = *PyMPIComm_Get(comm.ptr());
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (c == MPI_COMM_NULL || finalized) {
      ThrowIfError(FailedPrecondition("gridfeed.Feeder: MPI is finalized or 'comm' is null"));
    }
    // Every rank of an intercommunicator sees it as one (a local call), so every rank raises.
    int inter = 0;
    MPI_Comm_test_inter(c, &inter);
    if (inter) {
      ThrowIfError(
          InvalidArgument("gridfeed.Feeder: keyword 'comm' is an intercommunicator; a "
                          "Feeder needs an intracommunicator (e.g. MPI.COMM_WORLD or one from "
                          "Split)"));
    }
    HookFinalize();
    // Keyword errors are local; they are agreed before Open so no rank waits alone.
    auto local = OptionsFromKwargs("gridfeed.Feeder", kwargs, config::Groups::All());
    Status checked = local.ok() ? config::Validate(*local) : local.status();
    Status agreed;
    {
      py::gil_scoped_release release;
      int rank = 0;
      MPI_Comm_rank(c, &rank);
      MPI_Comm dup;
      MPI_Comm_dup(c, &dup);
      agreed = parallel::AgreeOnStatus(dup, checked, rank);
      MPI_Comm_free(&dup);
    }
    ThrowIfError(agreed);
    const config::JobOptions options = *local;
    Result<std::unique_ptr<feed::Feeder>> opened = Status();
    {
      py::gil_scoped_release release;
      opened = feed::Feeder::Open(options, c);
    }
    ThrowIfError(opened.status());
    feeder_ = std::move(opened).value();
    Status ledger_opened;
    {
      py::gil_scoped_release release;
      ledger_opened = OpenLedger();
      if (!ledger_opened.ok()) {
        ledger_.reset();
        feeder_.reset();  // the same error on every rank: a collective destruction
      }
    }
    ThrowIfError(ledger_opened);
    const auto& g = feeder_->grid();
    facts_.world_rank = g.world_rank(), facts_.world_size = g.world_size();
    facts_.dp_rank = g.dp_rank(), facts_.tp_rank = g.tp_rank(), facts_.pp_rank = g.pp_rank();
    facts_.cp_rank = g.cp_rank(), facts_.dp_size = g.dp_size(), facts_.tp_size = g.tp_size();
    facts_.pp_size = g.pp_size(), facts_.cp_size = g.cp_size();
    facts_.first_stage = g.first_stage(), facts_.last_stage = g.last_stage();
    facts_.reader = g.is_reader();
    facts_.world = g.world(), facts_.dp = g.dp_comm(), facts_.tp = g.tp_comm();
    facts_.pp = g.pp_comm(), facts_.cp = g.cp_comm();
    facts_.resumed_iteration = feeder_->resumed_iteration();
    facts_.micro_batches = feeder_->num_microbatches_per_global_batch();
    facts_.split_length = feeder_->split_length();
    facts_.fingerprint = feeder_->fingerprint();
    facts_.canonical = feeder_->canonical_config();
    facts_.options = feeder_->options();
    facts_.startup = feeder_->startup();
    consumed_ = feeder_->consumed_samples();
    open_ = true;
    NoteFeederOpened();  // until closed collectively (job_abort.h: a rank's end)
    std::lock_guard lock(g_open_mu);
    g_open.insert(this);
  }

  ~PyFeeder() {
    // Not closed: a local end (see feeder_binding.h). No call is in flight (one would hold a
    // reference to this object).
    {
      std::lock_guard lock(g_open_mu);
      g_open.erase(this);
    }
    std::lock_guard lock(call_mu_);
    AbandonLocked();
  }

  py::object Next() {
    RaiseDeferredInterrupt();
    Result<feed::MicroBatch> r = Status();
    Status logged;
    const bool abort_when_stuck = SigintIsPythonsDefault();  // read with the GIL
    {
      py::gil_scoped_release release;
      std::unique_lock lock(call_mu_);  // one call at a time; taken without the GIL
      if (!feeder_) {
        r = ClosedStatus();
      } else {
        feed::Feeder& f = *feeder_;
        {
          InterruptWatch watch("gridfeed.Feeder.next()", abort_when_stuck);
          r = f.Next();
        }
        if (r.ok()) {
          if (r->device_payload != nullptr) {
            // Device path: the arrays are a host copy of what reached this rank's GPU.
            auto host = f.DevicePayloadToHost(*r);
            if (host.ok()) {
              f.payload_layout().Unpack(std::move(*host), &*r);
            } else {
              logged = host.status();
            }
          }
          if (ledger_) {
            for (const auto& rec : r->records) {
              if (logged.ok()) logged = ledger_->Append(rec);
            }
          }
        }
        consumed_ = f.consumed_samples();
        if (abandon_requested_) AbandonLocked();
      }
    }
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kOutOfRange) {
        PyErr_SetString(PyExc_StopIteration, r.status().message().c_str());
        throw py::error_already_set();
      }
      ThrowIfError(r.status());
    }
    ThrowIfError(logged);
    py::object out = py::cast(PyMicroBatch(std::move(r).value()));
    // A SIGINT that arrived during the call would raise KeyboardInterrupt as soon as this
    // returns, before the caller holds the micro-batch that consumed_samples counts: the
    // interrupt is taken here and raised by this Feeder's next call instead.
    // (PyErr_CheckSignals does nothing off the main thread, where Python raises it anyway.)
    if (PyErr_CheckSignals() != 0) {
      deferred_ = py::error_already_set();
    }
    return out;
  }

  void SaveCheckpoint(py::object path_arg, py::object iteration_arg) {
    RaiseDeferredInterrupt();
    // Checked here and agreed below: a rank given other arguments must not wait alone.
    std::string path;
    Status local = PathArgument(path_arg, &path);
    int64_t iteration = -1;
    if (local.ok()) local = IterationArgument(iteration_arg, &iteration);
    Status st;
    {
      py::gil_scoped_release release;
      std::unique_lock lock(call_mu_);
      if (!feeder_) {
        st = ClosedStatus();
      } else {
        const auto& g = feeder_->grid();
        // World rank 0 writes: it creates the folder (as `gridfeed run --save` does).
        if (local.ok() && g.world_rank() == 0) {
          const std::string parent = std::filesystem::path(path).parent_path().string();
          if (!parent.empty()) local = io::MakeDirs(parent);
        }
        st = parallel::AgreeOnStatus(g.world(), local, g.world_rank());
        if (st.ok()) st = FlushLedger();
        if (st.ok()) st = feeder_->SaveCheckpoint(path, iteration);
        if (abandon_requested_) AbandonLocked();
      }
    }
    ThrowIfError(st);
  }

  void Close() {
    if (!open_) return;
    if (HandlingAnException()) {
      // In an except or finally block this rank may be alone: no collective (see the header).
      Abandon();
      return;
    }
    RaiseDeferredInterrupt();
    std::unique_lock lock(call_mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      ThrowIfError(
          FailedPrecondition("gridfeed.Feeder.close(): another thread is in next() or "
                             "save_checkpoint() of this Feeder; close it after that returns"));
    }
    if (!feeder_) return;
    {
      std::lock_guard open_lock(g_open_mu);
      g_open.erase(this);
    }
    open_ = false;
    Status st;
    {
      py::gil_scoped_release release;
      st = FlushLedger();
      ledger_.reset();
      feeder_.reset();  // collective
    }
    NoteFeederClosed();
    ThrowIfError(st);
  }

  // Local: gives the feeder up without its collective destruction (feed::Feeder::Abandon).
  // When another thread's call is in flight, that call does it when it returns.
  void Abandon() {
    {
      std::lock_guard open_lock(g_open_mu);
      g_open.erase(this);
    }
    std::unique_lock lock(call_mu_, std::try_to_lock);
    if (lock.owns_lock()) {
      AbandonLocked();
    } else {
      abandon_requested_ = true;
      open_ = false;
    }
  }

  // MPI_Finalize with this feeder open (any thread, maybe without the GIL).
  void AbandonAtFinalize() {
    std::unique_lock lock(call_mu_, std::try_to_lock);
    finalized_ = true;
    if (lock.owns_lock()) {
      AbandonLocked();
    } else {
      abandon_requested_ = true;
      open_ = false;
    }
  }

  // Seconds that `n` calls of the C++ Next() take (the benchmark's floor). Collective as Next.
  double TimeCxxNext(int64_t n) {
    Status st;
    double seconds = 0;
    {
      py::gil_scoped_release release;
      std::unique_lock lock(call_mu_);
      if (!feeder_) {
        st = ClosedStatus();
      } else {
        Stopwatch watch;
        for (int64_t i = 0; i < n && st.ok(); ++i) {
          auto mb = feeder_->Next();
          if (!mb.ok()) st = mb.status();
        }
        seconds = watch.Seconds();
        consumed_ = feeder_->consumed_samples();
      }
    }
    ThrowIfError(st);
    return seconds;
  }

  // The facts of an open feeder; raises FailedPrecondition when closed.
  const Facts& facts() const {
    if (!open_) ThrowIfError(ClosedStatus());
    return facts_;
  }
  int64_t consumed_samples() const {
    facts();
    return consumed_;
  }
  bool closed() const { return !open_; }

 private:
  // REQUIRES: call_mu_ held.
  void AbandonLocked() {
    ledger_.reset();  // flushes what it can; local
    feed::Feeder::Abandon(std::move(feeder_));
    open_ = false;
    abandon_requested_ = false;
  }

  Status ClosedStatus() const {
    return FailedPrecondition(finalized_ ? "the gridfeed.Feeder was given up by MPI_Finalize"
                                         : "the gridfeed.Feeder is closed");
  }

  void RaiseDeferredInterrupt() {
    if (!deferred_) return;
    py::error_already_set e = std::move(*deferred_);
    deferred_.reset();
    throw e;
  }

  static Status PathArgument(const py::object& v, std::string* out) {
    py::object text = v;
    if (!py::isinstance<py::str>(v) && py::hasattr(v, "__fspath__")) text = v.attr("__fspath__")();
    if (!py::isinstance<py::str>(text)) {
      return InvalidArgument(
          "gridfeed.Feeder.save_checkpoint: argument 'path' must be a str or path-like, got " +
          py::repr(v).cast<std::string>());
    }
    *out = text.cast<std::string>();
    if (out->empty() || out->find('\0') != std::string::npos) {
      return InvalidArgument(
          "gridfeed.Feeder.save_checkpoint: argument 'path' is empty or holds a NUL "
          "character");
    }
    return Status::Ok();
  }

  // What the cursor reader accepts (checkpoint::ReadCursor, and so WriteCursor: an iteration
  // in [0, 2^40], the range of --train-iters), checked here to name the argument.
  static Status IterationArgument(const py::object& v, int64_t* out) {
    constexpr long long kMaxIteration = 1LL << 40;
    const std::string got = py::repr(v).cast<std::string>().substr(0, 60);
    if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr())) {
      return InvalidArgument(
          "gridfeed.Feeder.save_checkpoint: argument 'iteration' must be an integer, got " + got);
    }
    int overflow = 0;
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
    long long n = index ? PyLong_AsLongLongAndOverflow(index.ptr(), &overflow) : -1;
    if (!index || overflow != 0 || (n == -1 && PyErr_Occurred())) PyErr_Clear();
    if (!index || overflow != 0 || n < 0 || n > kMaxIteration) {
      return InvalidArgument(
          "gridfeed.Feeder.save_checkpoint: argument 'iteration' must be in [0, 2^40] (the "
          "range of --train-iters), got " +
          got);
    }
    *out = n;
    return Status::Ok();
  }

  // Collective on the world: the first-stage reader of CP rank 0 of each DP rank opens its
  // ledger file (as gridfeed run does).
  Status OpenLedger() {
    const auto& o = feeder_->options();
    if (o.run.ledger.empty()) return Status::Ok();
    const auto& g = feeder_->grid();
    // As gridfeed run and the toy trainer: a fresh run into a non-empty ledger is refused
    // (overwrite_ledger=True replaces it), the folder is locked, failures agreed.
    auto w = audit::OpenJobLedger(
        g.is_reader() && g.first_stage() && g.cp_rank() == 0, o.run.ledger, g.dp_rank(),
        feeder_->fingerprint(), feeder_->canonical_config(), feeder_->schedule(),
        feeder_->schedule_history(), {!o.resume.resume_from.empty(), o.run.overwrite_ledger},
        [&g](const Status& local) {
          return parallel::AgreeOnStatus(g.world(), local, g.world_rank());
        });
    if (!w.ok()) return w.status();
    ledger_ = std::move(w).value();
    return Status::Ok();
  }

  // Collective on the world: the ledger's lines are durable on every rank that writes one.
  Status FlushLedger() {
    const auto& g = feeder_->grid();
    if (feeder_->options().run.ledger.empty()) return Status::Ok();
    Status flushed = ledger_ ? ledger_->Flush() : Status::Ok();
    return parallel::AgreeOnStatus(g.world(), flushed, g.world_rank());
  }

  // call_mu_ serialises the calls into the C++ Feeder (next, save_checkpoint, close, the local
  // ends); it is only ever waited for without the GIL, and never held while waiting for it.
  mutable std::mutex call_mu_;
  std::unique_ptr<feed::Feeder> feeder_;           // guarded by call_mu_
  std::unique_ptr<audit::LedgerWriter> ledger_;    // guarded by call_mu_
  std::atomic<bool> open_{false};                  // not closed nor given up
  std::atomic<bool> abandon_requested_{false};     // by a thread that found call_mu_ held
  std::atomic<bool> finalized_{false};             // given up by MPI_Finalize
  std::atomic<int64_t> consumed_{0};               // after the last next()
  std::optional<py::error_already_set> deferred_;  // a KeyboardInterrupt taken in next()
  Facts facts_;
};

int OnFinalize(MPI_Comm, int, void*, void*) {
  std::lock_guard lock(g_open_mu);
  for (PyFeeder* f : g_open) f->AbandonAtFinalize();
  g_open.clear();
  return MPI_SUCCESS;
}

}  // namespace

void RegisterFeeder(py::module_& m) {
  RegisterMicroBatch(m);

  using F = const PyFeeder&;
  py::class_<PyFeeder>(m, "Feeder", R"doc(
gridfeed's feeder for one rank of an MPI job (collective constructor):

    Feeder(comm=MPI.COMM_WORLD, config="job.yaml", **options)

Keywords are the option table's names with underscores (gridfeed.option_table()); config= is a
YAML file of the same options, which keywords override. Unknown keywords raise
gridfeed.InvalidArgument on every rank; so does an intercommunicator. next() returns the next
MicroBatch (collective on the TP group) and raises StopIteration on every rank at the same step
when the split runs out; the Feeder is also an iterator. close() is collective: call it on every
rank at the same point, or use `with Feeder(...) as feeder:`. Left by an exception (a `with`
block's, or close() called in an except/finally block while an exception other than
StopIteration is handled), dropped without close(), or open at MPI_Finalize, a Feeder is given
up locally instead: its prefetch thread stops, its MPI resources stay until the job ends.
Thread safe: calls are serialised by a per-Feeder lock; close() while another thread is in
next() raises gridfeed.FailedPrecondition; any call after close() raises it too.)doc")
      .def(py::init([](py::kwargs kwargs) { return std::make_unique<PyFeeder>(kwargs); }))
      .def("next", &PyFeeder::Next,
           "The next MicroBatch (collective on the TP group; releases the GIL)")
      .def("__next__", &PyFeeder::Next)
      .def("__iter__", [](py::object self) { return self; })
      .def("save_checkpoint", &PyFeeder::SaveCheckpoint, py::arg("path"), py::kw_only(),
           py::arg("iteration"),
           "Collective: world rank 0 writes the HDF5 cursor atomically, creating its folder (the "
           "ledger is flushed first); iteration >= 0; resume with resume=path")
      .def("close", &PyFeeder::Close,
           "Collective: destroys the feeder on every rank (local when called while an exception "
           "is handled; see the class)")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyFeeder& f, py::object type, py::object, py::object) {
             // StopIteration (out of data) comes at the same step on every rank: collective,
             // as close() treats it.
             if (type.is_none() || PyErr_GivenExceptionMatches(type.ptr(), PyExc_StopIteration)) {
               f.Close();
             } else {
               f.Abandon();  // this rank may be alone here: no collective
             }
             return false;
           })
      .def("_time_cxx_next", &PyFeeder::TimeCxxNext, py::arg("n"),
           "Benchmarks only: seconds for n calls of the C++ Next()")
      .def_property_readonly("closed", &PyFeeder::closed)
      .def_property_readonly("world_rank", [](F f) { return f.facts().world_rank; })
      .def_property_readonly("world_size", [](F f) { return f.facts().world_size; })
      .def_property_readonly("dp_rank", [](F f) { return f.facts().dp_rank; })
      .def_property_readonly("tp_rank", [](F f) { return f.facts().tp_rank; })
      .def_property_readonly("pp_rank", [](F f) { return f.facts().pp_rank; })
      .def_property_readonly("cp_rank", [](F f) { return f.facts().cp_rank; })
      .def_property_readonly("dp_size", [](F f) { return f.facts().dp_size; })
      .def_property_readonly("tp_size", [](F f) { return f.facts().tp_size; })
      .def_property_readonly("pp_size", [](F f) { return f.facts().pp_size; })
      .def_property_readonly("cp_size", [](F f) { return f.facts().cp_size; })
      .def_property_readonly("sizes",
                             [](F f) {
                               const Facts& g = f.facts();
                               py::dict d;
                               d["dp"] = g.dp_size;
                               d["tp"] = g.tp_size;
                               d["pp"] = g.pp_size;
                               d["cp"] = g.cp_size;
                               return d;
                             })
      .def_property_readonly("is_first_stage", [](F f) { return f.facts().first_stage; })
      .def_property_readonly("is_last_stage", [](F f) { return f.facts().last_stage; })
      .def_property_readonly("is_reader", [](F f) { return f.facts().reader; })
      .def_property_readonly("world_comm", [](F f) { return WrapComm(f.facts().world); })
      .def_property_readonly("dp_comm", [](F f) { return WrapComm(f.facts().dp); })
      .def_property_readonly("tp_comm", [](F f) { return WrapComm(f.facts().tp); })
      .def_property_readonly("pp_comm", [](F f) { return WrapComm(f.facts().pp); })
      .def_property_readonly("cp_comm", [](F f) { return WrapComm(f.facts().cp); })
      .def_property_readonly("consumed_samples", &PyFeeder::consumed_samples)
      .def_property_readonly("resumed_iteration", [](F f) { return f.facts().resumed_iteration; })
      .def_property_readonly("num_microbatches_per_global_batch",
                             [](F f) { return f.facts().micro_batches; })
      .def_property_readonly("split_length", [](F f) { return f.facts().split_length; })
      .def_property_readonly("fingerprint", [](F f) { return f.facts().fingerprint; })
      .def_property_readonly("canonical_config", [](F f) { return f.facts().canonical; })
      .def_property_readonly(
          "options", [](F f) { return OptionsDict(f.facts().options, config::Groups::All()); })
      .def_property_readonly("startup_seconds", [](F f) {
        const auto& s = f.facts().startup;
        py::dict d;
        d["build"] = s.build_seconds;
        d["broadcast"] = s.broadcast_seconds;
        d["open"] = s.open_seconds;
        return d;
      });
}

}  // namespace gridfeed::python

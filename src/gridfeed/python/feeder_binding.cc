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

// One micro-batch as Python sees it: a read-only mapping of Megatron's field names to NumPy
// views over the buffers this object owns.
class PyMicroBatch {
 public:
  explicit PyMicroBatch(feed::MicroBatch mb) : mb_(std::move(mb)) {}

  // The keys this rank's stage received: its pipeline's schema fields, in the schema's order.
  std::vector<const char*> Keys() const {
    std::vector<const char*> keys;
    for (const feed::FieldArray& f : mb_.fields) keys.push_back(f.spec->name);
    return keys;
  }

  // A view of field `key` whose base is `self` (this object), with the schema's dtype and
  // this rank's shape; nullopt when absent.
  std::optional<py::array> Field(py::handle self, const std::string& key) const {
    const feed::FieldArray* f = mb_.Find(key);
    if (f == nullptr) return std::nullopt;
    std::vector<py::ssize_t> shape(f->shape.begin(), f->shape.end());
    const std::byte* data = mb_.payload.data() + f->offset;
    return py::array(py::dtype(order::NumpyDescr(f->spec->dtype)), std::move(shape), data, self);
  }

  py::array SampleIndices(py::handle self) const {
    return View(self, mb_.sample_indices, {static_cast<py::ssize_t>(mb_.sample_indices.size())});
  }
  py::array SamplePositions(py::handle self) const {
    return View(self, mb_.sample_positions,
                {static_cast<py::ssize_t>(mb_.sample_positions.size())});
  }
  py::array SourceIds(py::handle self) const {
    return View(self, mb_.source_ids, {static_cast<py::ssize_t>(mb_.source_ids.size())});
  }
  py::array CuSeqlens(py::handle self) const {
    if (auto v = Field(self, std::string(order::kCuSeqlens))) return *v;
    return py::array_t<int32_t>(std::vector<py::ssize_t>{0});
  }
  const feed::MicroBatch& mb() const { return mb_; }

 private:
  template <typename T>
  static py::array View(py::handle self, const std::vector<T>& v, std::vector<py::ssize_t> shape) {
    if (v.empty()) return py::array_t<T>(shape);  // nothing to view (middle stage)
    return py::array(py::dtype::of<T>(), std::move(shape), v.data(), self);
  }
  feed::MicroBatch mb_;
};

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
  py::class_<PyMicroBatch>(m, "MicroBatch", R"doc(
What one rank received for one micro-batch: a read-only mapping of the field names its
pipeline declares (Megatron's get_batch keys: tokens, position_ids, attention_mask, labels,
loss_mask; only those this rank's pipeline stage gets) to NumPy views [micro_batch_size,
local_seq_length] (attention_mask bool [micro_batch_size, 1, local_seq_length, seq_length]) over
the payload this object owns: no copy; each view's base is the MicroBatch, which lives as long
as any view or tensor made from one.
dict(mb) gives a plain dict of the same views. seq_length is this micro-batch's: a mixture stage
with its own seq_length changes it between global batches.

Packed micro-batches (--sft, sft=True; mb.packed is True on every pipeline stage)
are what Megatron's get_batch leaves for --sft: tokens, labels, loss_mask and position_ids are
one flattened row [1, micro_batch_size * local_seq_length] (this CP rank's THD slice of the
micro-batch's samples laid end to end), mb.cu_seqlens (int32 [K], also mb["cu_seqlens"]) holds
the micro-batch's merged sequence boundaries (the whole micro-batch's, the same on every CP
rank) and mb.max_seqlen its longest sequence (mb["max_seqlen"]: int32 [1]). Otherwise packed is False, cu_seqlens is empty
and max_seqlen is 0. Middle pipeline stages of a packed order get cu_seqlens and max_seqlen alone
(as Megatron's get_batch for --sft); of other orders, nothing.)doc")
      .def("__getitem__",
           [](py::object self, const std::string& key) {
             auto a = self.cast<const PyMicroBatch&>().Field(self, key);
             if (!a) throw py::key_error(key);
             return *a;
           })
      .def(
          "get",
          [](py::object self, const std::string& key, py::object dflt) -> py::object {
            auto a = self.cast<const PyMicroBatch&>().Field(self, key);
            return a ? py::object(*a) : dflt;
          },
          py::arg("key"), py::arg("default") = py::none())
      .def("__contains__",
           [](const PyMicroBatch& b, const std::string& key) {
             for (const char* k : b.Keys()) {
               if (key == k) return true;
             }
             return false;
           })
      .def("__len__", [](const PyMicroBatch& b) { return b.Keys().size(); })
      .def("keys", [](const PyMicroBatch& b) { return py::cast(b.Keys()); })
      .def("__iter__", [](const PyMicroBatch& b) { return py::iter(py::cast(b.Keys())); })
      .def("values",
           [](py::object self) {
             py::list out;
             const auto& b = self.cast<const PyMicroBatch&>();
             for (const char* k : b.Keys()) out.append(*b.Field(self, k));
             return out;
           })
      .def("items",
           [](py::object self) {
             py::list out;
             const auto& b = self.cast<const PyMicroBatch&>();
             for (const char* k : b.Keys()) out.append(py::make_tuple(k, *b.Field(self, k)));
             return out;
           })
      .def_property_readonly(
          "sample_indices",
          [](py::object self) { return self.cast<const PyMicroBatch&>().SampleIndices(self); },
          "int64 [micro_batch_size]: the order's sample index of each sample (Megatron's "
          "top-level dataset index, OLMo's instance index; empty on middle pipeline stages that "
          "get no "
          "field)")
      .def_property_readonly(
          "sample_positions",
          [](py::object self) { return self.cast<const PyMicroBatch&>().SamplePositions(self); },
          "int64 [micro_batch_size]: each sample's global position in the split's read order "
          "(what resumes and ledgers count; equal to sample_indices for Megatron's order)")
      .def_property_readonly(
          "source_ids",
          [](py::object self) { return self.cast<const PyMicroBatch&>().SourceIds(self); },
          "int64 [micro_batch_size]: each sample's blend source (0 without a blend)")
      .def_property_readonly(
          "packed", [](const PyMicroBatch& b) { return b.mb().packed; },
          "whether this is a packed micro-batch (--sft): the sequence fields are one flattened "
          "row [1, micro_batch_size * local_seq_length] and cu_seqlens/max_seqlen are set")
      .def_property_readonly(
          "cu_seqlens",
          [](py::object self) { return self.cast<const PyMicroBatch&>().CuSeqlens(self); },
          "int32 [K]: a packed micro-batch's merged cumulative sequence lengths over the "
          "micro-batch's micro_batch_size * seq_length tokens (Megatron's flattened cu_seqlens, "
          "the same on every CP rank); empty when not packed")
      .def_property_readonly(
          "max_seqlen", [](const PyMicroBatch& b) { return b.mb().max_seqlen(); },
          "a packed micro-batch's longest sequence (Megatron's max_seqlen); 0 when not packed")
      .def_property_readonly("micro_batch_size",
                             [](const PyMicroBatch& b) { return b.mb().micro_batch_size; })
      .def_property_readonly(
          "seq_length", [](const PyMicroBatch& b) { return b.mb().seq_length; },
          "tokens per sample of this micro-batch (a mixture stage may set its own)")
      .def_property_readonly("local_seq_length",
                             [](const PyMicroBatch& b) { return b.mb().local_seq_length; })
      .def_property_readonly("has_inputs", [](const PyMicroBatch& b) { return b.mb().has_inputs; })
      .def_property_readonly("has_targets",
                             [](const PyMicroBatch& b) { return b.mb().has_targets; })
      .def("__repr__", [](const PyMicroBatch& b) {
        std::string keys;
        for (const char* k : b.Keys()) keys += std::string(keys.empty() ? "" : ", ") + k;
        if (b.mb().packed) {
          return "<gridfeed.MicroBatch packed [1 x " +
                 std::to_string(b.mb().micro_batch_size * b.mb().local_seq_length) + "] " + keys +
                 ", " + std::to_string(b.mb().cu_seqlens().size()) + " cu_seqlens>";
        }
        return "<gridfeed.MicroBatch [" + std::to_string(b.mb().micro_batch_size) + " x " +
               std::to_string(b.mb().local_seq_length) + "] " + keys + ">";
      });
  py::module_::import("collections.abc").attr("Mapping").attr("register")(m.attr("MicroBatch"));

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
